/**
 * What the signed-in token may do, so that controls it cannot use are disabled with the reason instead of failing
 * after a click. Asked of the agent with Consul's `POST /v1/internal/acl/authorize` (a list of resource/access pairs,
 * no permission needed), once per token, datacenter and set of checks and then again when the answer is older than
 * VERDICT_TTL_MS (policies change: a page opened later asks afresh). Until an answer comes, or when the agent cannot
 * say, controls stay enabled and the server's refusal is shown if it comes.
 */
import { useEffect, useState } from 'preact/hooks'
import { ApiError, request } from './api.js'
import { useSession } from './live.js'

export interface Check {
  Resource: string
  Access: 'read' | 'write' | 'list'
  /** The name within the resource (a service name for service:write), where the rule is per name. */
  Segment?: string
}

interface Authorization extends Check {
  Allow: boolean
}

/** Allowed, refused with the reason, or unknown (undefined). */
export interface Verdict {
  allowed: boolean | undefined
  reason: string
}

/** How long an answer is reused: past this, the next view that needs it asks the agent again. */
const VERDICT_TTL_MS = 30_000

const cache = new Map<string, { at: number; answer: Promise<boolean[] | undefined> }>()

function label(check: Check): string {
  return `${check.Resource}:${check.Access}${check.Segment === undefined ? '' : ` on "${check.Segment}"`}`
}

function ask(checks: Check[], token: string, datacenter: string | undefined): Promise<boolean[] | undefined> {
  const key = JSON.stringify([token, datacenter, checks])
  const cached = cache.get(key)
  if (cached !== undefined && Date.now() - cached.at < VERDICT_TTL_MS) return cached.answer
  const answer = request<Authorization[]>('POST', '/v1/internal/acl/authorize', { body: checks })
    .then(({ body }) => (Array.isArray(body) && body.length === checks.length ? body.map((item) => item.Allow === true) : undefined))
    .catch((error: unknown) => {
      // Unknown. An agent without the endpoint (404, 405) will not grow it: keep the answer, so it is asked once a TTL.
      // Anything else (a network error, no leader) may pass: ask again next time.
      if (!(error instanceof ApiError && (error.status === 404 || error.status === 405)) && cache.get(key)?.answer === answer) cache.delete(key)
      return undefined
    })
  for (const [old, entry] of cache) if (Date.now() - entry.at >= VERDICT_TTL_MS) cache.delete(old)
  cache.set(key, { at: Date.now(), answer })
  return answer
}

/**
 * One verdict per check. A check may be a list of alternatives ("mesh:write or operator:write"), allowed when any
 * is. Stable across renders as long as the checks are.
 */
export function useAllowed(checks: Array<Check | Check[]>): Verdict[] {
  const { token, datacenter } = useSession()
  const flat = checks.flatMap((check) => (Array.isArray(check) ? check : [check]))
  const key = JSON.stringify(flat)
  const [answers, setAnswers] = useState<{ key: string; allowed: boolean[] | undefined }>({ key: '', allowed: undefined })
  useEffect(() => {
    if (token === undefined || flat.length === 0) return
    let current = true
    void ask(flat, token, datacenter).then((allowed) => {
      if (current) setAnswers({ key: JSON.stringify([token, datacenter, key]), allowed })
    })
    return () => {
      current = false
    }
  }, [key, token, datacenter])
  const known = answers.key === JSON.stringify([token, datacenter, key]) ? answers.allowed : undefined
  let offset = 0
  return checks.map((check) => {
    const group = Array.isArray(check) ? check : [check]
    const slice = known?.slice(offset, offset + group.length)
    offset += group.length
    const allowed = slice === undefined ? undefined : slice.some(Boolean)
    return { allowed, reason: allowed === false ? `Your token lacks ${group.map(label).join(' or ')}.` : '' }
  })
}

/** Forgets every answer (after a sign-out, so a new token is asked afresh). */
export function forgetPermissions(): void {
  cache.clear()
}

/** The verdict on acl:write: every ACL create, edit and delete needs it. */
export function useAclWrite(): Verdict {
  return useAllowed([{ Resource: 'acl', Access: 'write' }])[0]!
}
