/**
 * Token resolution in a secondary datacenter (issue 19): a secret the secondary does not hold is looked up at the
 * primary as its holder would see it there (`GET /v1/acl/token/self` with that secret, over WAN links), so a global
 * token works in every datacenter before (and without) token replication. Only the token travels back; the policies
 * and roles it links are the secondary's replicated ones.
 */
import type { AclToken } from '../state/records.js'
import type { DatacenterForwarder } from './dc-forward.js'

/** The token of `secret` at `primary`; undefined when the primary says there is none; throws when it cannot be asked. */
export async function tokenAtPrimary(forwarder: DatacenterForwarder, primary: string, secret: string): Promise<AclToken | undefined> {
  const answer = await forwarder.forward(primary, { method: 'GET', path: '/v1/acl/token/self', headers: { 'x-service-token': secret } }, 30_000)
  if (answer.status === 403 || answer.status === 404) return undefined
  if (answer.status !== 200) throw new Error(`the primary answered token self with ${answer.status}`)
  return tokenOf(JSON.parse(answer.body.toString('utf8')) as Record<string, unknown>, secret)
}

function tokenOf(body: Record<string, unknown>, secret: string): AclToken {
  const links = (name: string): Array<{ ID: string }> =>
    (Array.isArray(body[name]) ? (body[name] as Array<{ ID?: unknown }>) : []).filter((link) => typeof link.ID === 'string').map((link) => ({ ID: link.ID as string }))
  const list = <T>(name: string): T[] => (Array.isArray(body[name]) ? (body[name] as T[]) : [])
  const text = (name: string, fallback = ''): string => (typeof body[name] === 'string' ? (body[name] as string) : fallback)
  return {
    AccessorID: text('AccessorID'),
    // The secret the caller presented, whatever the answer shows (a token's own secret is shown to it, never hidden).
    SecretID: secret,
    Description: text('Description'),
    Policies: links('Policies'),
    Roles: links('Roles'),
    TemplatedPolicies: list('TemplatedPolicies'),
    ServiceIdentities: list('ServiceIdentities'),
    NodeIdentities: list('NodeIdentities'),
    Local: body['Local'] === true,
    AuthMethod: text('AuthMethod'),
    ...(typeof body['ExpirationTime'] === 'string' ? { ExpirationTime: body['ExpirationTime'] } : {}),
    CreateTime: text('CreateTime', new Date(0).toISOString()),
    Namespace: text('Namespace', 'default'),
    Hash: text('Hash'),
    CreateIndex: typeof body['CreateIndex'] === 'number' ? body['CreateIndex'] : 0,
    ModifyIndex: typeof body['ModifyIndex'] === 'number' ? body['ModifyIndex'] : 0,
  }
}
