/**
 * The outbound side of `--join`: a new server asks a running member, over its HTTP API, to add it, proving the
 * cluster key without sending it (lib/join-proof.ts). It tries each address in turn, with a growing pause, until one
 * answers; then it learns every member's address and the index before which it may not vote.
 *
 * An address may be `https://HOST:PORT`: the member's certificate is then checked against the CA and must name a
 * server of this datacenter (whatever address was dialed), and this server presents its own certificate, which a
 * member with verify_incoming requires.
 */
import { Client } from '../api/client.js'
import type { TlsOptions } from '../api/transport.js'
import { makeJoinRequest } from '../lib/join-proof.js'
import { serverName } from '../lib/tls-names.js'
import type { RaftReplica } from '../replica/raft-replica.js'

export interface JoinTls {
  ca: Buffer
  cert: Buffer
  key: Buffer
  datacenter: string
}

export async function joinThroughHttp(
  replica: RaftReplica,
  httpAddresses: readonly string[],
  clusterKey: string,
  advertiseAddress: string,
  tls?: JoinTls,
): Promise<void> {
  const tlsOptions: TlsOptions | undefined = tls === undefined ? undefined : { ca: tls.ca, cert: tls.cert, key: tls.key, serverName: serverName(tls.datacenter) }
  const { environment, log } = replica
  /** A member of the previous release refuses the Incarnation field; it is then left out (the answer says the index). */
  let sendIncarnation = true
  for (let attempt = 0; !replica.isStopped; attempt += 1) {
    for (const httpAddress of httpAddresses) {
      if (replica.isStopped) return
      try {
        if (!replica.membershipChanges.awaitingJoin()) return
        const incarnation = sendIncarnation ? replica.membershipChanges.incarnation : undefined
        // A fresh proof (time and nonce) on every attempt: the leader accepts each proof once, and only one made since
        // it became the leader (lib/join-proof.ts).
        const request = makeJoinRequest(clusterKey, replica.nodeName, advertiseAddress, environment.wallNow(), incarnation)
        const client = new Client({ address: httpAddress, keepAlive: false, timeoutMs: replica.applyWaitMs, ...(tlsOptions === undefined ? {} : { tls: tlsOptions }) })
        const response = await client.request<JoinAnswer>('POST', '/v1/operator/raft/join', { body: request, token: null })
        const body: JoinAnswer = typeof response.body === 'object' && response.body !== null ? response.body : {}
        if (response.status === 400 && incarnation !== undefined && (body.Field === 'Incarnation' || body.Error?.startsWith('Incarnation') === true)) {
          sendIncarnation = false
          throw new Error(`${httpAddress} runs a release without incarnations: joining without one`)
        }
        if (response.status !== 200 || body.Members === undefined) throw new Error(body.Error ?? `HTTP ${response.status}`)
        replica.membershipChanges.learnAddresses(body.Members)
        // A leader of an earlier release does not say: it added this server as a new non-voter, as before.
        await replica.membershipChanges.recordVoteFrom(typeof body.VoteFromIndex === 'number' ? body.VoteFromIndex : 0)
        log.info({ through: httpAddress, members: Object.keys(body.Members) }, 'joined the cluster')
        return
      } catch (error) {
        if (replica.isStopped) return
        log.warn({ err: error, through: httpAddress, attempt }, 'join attempt failed; retrying')
      }
    }
    await replica.pause(Math.min(5_000, 250 * 2 ** Math.min(attempt, 5)))
  }
}

interface JoinAnswer {
  Members?: Record<string, string>
  VoteFromIndex?: number
  Error?: string
  Field?: string
}
