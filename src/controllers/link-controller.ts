/**
 * The cloud link controller: a leader-only loop that checks the link against the cloud management platform and
 * records the outcome as the link's status (condition `linked`), through a proposed command like any other write.
 *
 * One check per generation of the link: the loop checks when it starts and whenever the link's data is rewritten
 * (a new generation), and stays idle on its own status writes. The loop waits on the `link` table's watch. Two
 * things come back on a timer: a status write that could not be proposed, after a bounded pause; and a check that
 * ended FAILED because the management plane could not be reached or answered 429/5xx (all its retries spent), which
 * may pass by itself, so the same generation is checked again after `recheckBaseMs`, doubling up to `recheckMaxMs`,
 * until its outcome is anything else. A definite answer (UNAUTHORIZED, FORBIDDEN, another 4xx, a 200 without the
 * expected fields, an invalid resource ID) waits for a new generation. `stop()` aborts a
 * check in flight (its requests and backoff sleeps) and leaves no timer behind.
 *
 * With a management-plane URL, a check is two requests, each with a timeout and bounded retries with exponential
 * backoff (on network errors, timeouts, 429 and 5xx):
 *   1. `POST {url}/oauth2/token`, a form-encoded client_credentials grant with client_id and client_secret, answers
 *      `{access_token}`;
 *   2. `GET {url}/clusters/{resourceId}` with that bearer token answers `{accessLevel, clusterUrl}`.
 * A 401 from either gives reason UNAUTHORIZED, a 403 or 404 FORBIDDEN, anything else FAILED (consul-behaviour.md
 * §2k); success gives SUCCESS and records accessLevel and cloudClusterUrl in the link's data.
 *
 * Without a URL there is nothing to ask: the link is recorded as linked, with ACCESS_LEVEL_GLOBAL_READ_WRITE and the
 * portal URL built from the resource ID (see `portalClusterUrl`).
 *
 * The client secret goes only into the token request's body; it is never logged or put in a status message.
 */
import type { Logger } from 'pino'
import { formatTime, newUlid, newUuid } from '../lib/ids.js'
import type { Cluster } from '../rpc/index.js'
import { COMMAND_VERSION, type LinkStatusWrite, type LinkWrite } from '../state/commands.js'
import { LINK_NAME, linkSpec, parseResourceId, type ResourceId } from '../state/link.js'
import type { CloudLink } from '../state/records.js'
import type { StateStore } from '../state/store.js'
import { getRecord } from '../state/tables.js'

export const ACCESS_LEVEL_GLOBAL_READ_WRITE = 'ACCESS_LEVEL_GLOBAL_READ_WRITE'
export const LINKED_CONDITION = 'linked'

/** The portal of the cloud platform, for links checked without a management plane. */
export const PORTAL_BASE_URL = 'https://portal.cloud.service.io'

/**
 * The cluster's page on the portal, built from the resource ID's parts:
 * `https://portal.cloud.service.io/organization/<org_id>/project/<project_id>/clusters/<cluster_name>`.
 */
export function portalClusterUrl(id: ResourceId): string {
  const part = encodeURIComponent
  return `${PORTAL_BASE_URL}/organization/${part(id.organization)}/project/${part(id.project)}/clusters/${part(id.cluster)}`
}

export type LinkReason = 'SUCCESS' | 'UNAUTHORIZED' | 'FORBIDDEN' | 'FAILED'

export interface LinkOutcome {
  state: 'STATE_TRUE' | 'STATE_FALSE'
  reason: LinkReason
  message: string
  accessLevel?: string
  cloudClusterUrl?: string
  /** A FAILED that may pass by itself (no answer, or 429/5xx after the retries): worth checking again later. */
  transient?: boolean
}

export interface CheckSettings {
  /** Without one, the link is recorded as linked without asking anything. */
  managementPlaneUrl?: string | undefined
  /** Per request. */
  requestTimeoutMs: number
  /** Per request, counting the first. */
  attemptsMax: number
  /** The pause after the first failed attempt; doubled after each further one. */
  backoffBaseMs: number
  /** After a check ended FAILED, the pause before checking the same generation again; doubled after each further one. */
  recheckBaseMs: number
  /** The longest pause between re-checks of a failing link. */
  recheckMaxMs: number
}

/** What one check needs: the loop's re-check pauses are not its concern. */
export type RequestSettings = Omit<CheckSettings, 'recheckBaseMs' | 'recheckMaxMs'>

export const DEFAULT_CHECK_SETTINGS: CheckSettings = {
  requestTimeoutMs: 5_000,
  attemptsMax: 3,
  backoffBaseMs: 200,
  recheckBaseMs: 30_000,
  recheckMaxMs: 5 * 60_000,
}

/** Bound on a management-plane answer that is read; a larger one is a failure, not a memory cost. */
const RESPONSE_BYTES_MAX = 64 * 1024
/** The pause before proposing a status again when the last proposal failed, and how many times in a row. */
const PROPOSE_RETRY_MS = 2_000
const PROPOSE_RETRIES_MAX = 5

/** The problem with a management-plane URL setting, or undefined when it is usable. */
export function managementPlaneUrlProblem(text: string): string | undefined {
  let url: URL
  try {
    url = new URL(text)
  } catch {
    return `must be an absolute http or https URL, not ${JSON.stringify(text)}`
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return `must be an http or https URL, not ${url.protocol}`
  if (url.search !== '' || url.hash !== '') return 'must not carry a query or a fragment'
  // fetch refuses such a URL anyway, and its error quotes the URL, which ends up in the link's status where
  // operator:read callers read it. The link authenticates with client_id and client_secret.
  if (url.username !== '' || url.password !== '') return 'must not carry credentials (user:password@)'
  return undefined
}

/** A server's `cloud` settings (config-file keys resource_id, client_id, client_secret, management_plane_url). */
export interface CloudSettings {
  resourceId?: string
  clientId?: string
  clientSecret?: string
  managementPlaneUrl?: string
}

/** What is wrong with the cloud settings, naming the key, or undefined. The three credentials go together. */
export function cloudSettingsProblem(cloud: CloudSettings): string | undefined {
  const given = [cloud.resourceId, cloud.clientId, cloud.clientSecret].filter((value) => value !== undefined && value !== '')
  if (given.length > 0 && given.length < 3) {
    const missing = (
      [
        ['cloud.resource_id', cloud.resourceId],
        ['cloud.client_id', cloud.clientId],
        ['cloud.client_secret', cloud.clientSecret],
      ] as const
    ).find(([, value]) => value === undefined || value === '')
    return `${missing?.[0] ?? 'cloud'}: is required when any of cloud.resource_id, cloud.client_id, cloud.client_secret is set`
  }
  if (cloud.resourceId !== undefined && cloud.resourceId !== '') {
    const parsed = parseResourceId(cloud.resourceId)
    if (!parsed.ok) return `cloud.resource_id: ${parsed.message}`
  }
  if (cloud.managementPlaneUrl !== undefined) {
    const problem = managementPlaneUrlProblem(cloud.managementPlaneUrl)
    if (problem !== undefined) return `cloud.management_plane_url: ${problem}`
  }
  return undefined
}

/** The link write a server makes from its cloud settings at start, or undefined when they name no link. */
export function linkFromSettings(cloud: CloudSettings, nowMs: number): LinkWrite | undefined {
  if (cloud.resourceId === undefined || cloud.clientId === undefined || cloud.clientSecret === undefined) return undefined
  if (cloud.resourceId === '' || cloud.clientId === '' || cloud.clientSecret === '') return undefined
  return {
    resourceId: cloud.resourceId,
    clientId: cloud.clientId,
    clientSecret: cloud.clientSecret,
    uid: newUuid(),
    generation: newUlid(nowMs),
    source: 'config',
  }
}

export interface LinkControllerOptions {
  state: StateStore
  cluster: Cluster
  log: Logger
  now: () => number
  check?: Partial<CheckSettings>
}

export class LinkController {
  private readonly abort = new AbortController()
  private readonly settings: CheckSettings
  private running: Promise<void> | undefined
  private wake: (() => void) | undefined
  /** The generation whose status this controller recorded; undefined until the first check of this process. */
  private checkedGeneration: string | undefined
  /** Re-checks of checkedGeneration in a row that ended FAILED (0 when its last check did not fail). */
  private failedChecks = 0

  constructor(private readonly options: LinkControllerOptions) {
    this.settings = { ...DEFAULT_CHECK_SETTINGS, ...options.check }
  }

  start(): void {
    this.running ??= this.loop()
  }

  /** Aborts a check in flight and waits for the loop to end. */
  async stop(): Promise<void> {
    this.abort.abort()
    this.wake?.()
    await this.running
  }

  private async loop(): Promise<void> {
    const { signal } = this.abort
    let retries = 0
    while (!signal.aborted) {
      let unsubscribe = (): void => {}
      // Subscribed before reading, so a change made while a check runs wakes the next round.
      const changed = new Promise<void>((resolve) => {
        this.wake = resolve
        unsubscribe = this.options.state.watches.subscribe('link', undefined, resolve)
      })
      let outcome: 'idle' | 'retry' | 'recheck' = 'idle'
      try {
        outcome = await this.reconcile()
      } catch (error) {
        // A failure here (the state closing under a stop, a proposal refused) leaves the link as it was; the next
        // change, or the bounded retry below, tries again.
        if (!signal.aborted) this.options.log.warn({ err: error }, 'link reconcile failed')
        outcome = signal.aborted ? 'idle' : 'retry'
      }
      retries = outcome === 'retry' ? retries + 1 : 0
      if (outcome === 'retry' && retries <= PROPOSE_RETRIES_MAX) await Promise.race([changed, sleep(PROPOSE_RETRY_MS, signal)])
      else if (outcome === 'recheck') {
        const { recheckBaseMs, recheckMaxMs } = this.settings
        const pauseMs = Math.min(recheckMaxMs, recheckBaseMs * 2 ** Math.min(this.failedChecks - 1, 20))
        // Its own abort, so that a pause cut short by a change does not leave its timer running.
        const pause = new AbortController()
        const onStop = (): void => pause.abort()
        signal.addEventListener('abort', onStop, { once: true })
        const timedOut = await Promise.race([changed.then(() => false), sleep(pauseMs, pause.signal).then(() => !pause.signal.aborted)])
        pause.abort()
        signal.removeEventListener('abort', onStop)
        // Checked again below although the generation is the one already recorded.
        if (timedOut && !signal.aborted) this.checkedGeneration = undefined
      } else await changed
      unsubscribe()
    }
  }

  private async reconcile(): Promise<'idle' | 'retry' | 'recheck'> {
    const { state, cluster, log, now } = this.options
    // Leader-only: on a follower the leader's controller records the status (a single node always leads).
    if (!cluster.isLeader()) return 'idle'
    const link = await getRecord(state.reader, linkSpec, LINK_NAME)
    if (link === undefined) {
      this.checkedGeneration = undefined
      this.failedChecks = 0
      return 'idle'
    }
    if (link.generation === this.checkedGeneration) return this.failedChecks > 0 ? 'recheck' : 'idle'
    const outcome = await checkLink(link, this.settings, this.abort.signal)
    if (this.abort.signal.aborted) return 'idle'
    const status: LinkStatusWrite = {
      generation: link.generation,
      conditions: [{ message: outcome.message, reason: outcome.reason, state: outcome.state, type: LINKED_CONDITION }],
      updatedAt: formatTime(now()),
      ...(outcome.accessLevel === undefined ? {} : { accessLevel: outcome.accessLevel }),
      ...(outcome.cloudClusterUrl === undefined ? {} : { cloudClusterUrl: outcome.cloudClusterUrl }),
    }
    const result = await cluster.propose({ v: COMMAND_VERSION, type: 'link.status', status })
    if (!result.ok) {
      log.warn({ error: result.error.message }, 'link status not recorded')
      return 'retry'
    }
    // Failures of the same generation in a row set the re-check pause; another generation starts again from the base.
    this.failedChecks = outcome.transient !== true ? 0 : link.generation === this.checkedGeneration || this.checkedGeneration === undefined ? this.failedChecks + 1 : 1
    this.checkedGeneration = link.generation
    log.info({ resourceId: link.data.resourceId, generation: link.generation, reason: outcome.reason, recorded: result.value }, 'link checked')
    return this.failedChecks > 0 ? 'recheck' : 'idle'
  }
}

/** Checks one link; never throws for what the management plane answers (only when `signal` aborts). */
export async function checkLink(link: CloudLink, settings: RequestSettings, signal: AbortSignal): Promise<LinkOutcome> {
  const parsed = parseResourceId(link.data.resourceId)
  if (!parsed.ok) return failed(`the resource ID is invalid: ${parsed.message}`)
  if (settings.managementPlaneUrl === undefined) return linked(link, ACCESS_LEVEL_GLOBAL_READ_WRITE, portalClusterUrl(parsed.id))
  const base = settings.managementPlaneUrl.replace(/\/+$/, '')

  const tokenCall = 'POST /oauth2/token'
  const token = await request(
    `${base}/oauth2/token`,
    {
      method: 'POST',
      headers: { 'Content-Type': 'application/x-www-form-urlencoded', Accept: 'application/json' },
      body: new URLSearchParams({ grant_type: 'client_credentials', client_id: link.data.clientId, client_secret: link.data.clientSecret }).toString(),
    },
    settings,
    signal,
  )
  if ('error' in token) return failed(`${tokenCall} ${token.error}`, true)
  if (token.status !== 200) return refused(tokenCall, token.status)
  const accessToken = jsonField(token.text, 'access_token')
  if (accessToken === undefined) return failed(`${tokenCall} answered 200 without a string access_token`)

  const path = `/clusters/${link.data.resourceId.split('/').map(encodeURIComponent).join('/')}`
  const clusterCall = `GET ${path}`
  const cluster = await request(`${base}${path}`, { method: 'GET', headers: { Authorization: `Bearer ${accessToken}`, Accept: 'application/json' } }, settings, signal)
  if ('error' in cluster) return failed(`${clusterCall} ${cluster.error}`, true)
  if (cluster.status !== 200) return refused(clusterCall, cluster.status)
  const accessLevel = jsonField(cluster.text, 'accessLevel')
  const clusterUrl = jsonField(cluster.text, 'clusterUrl')
  if (accessLevel === undefined || clusterUrl === undefined) return failed(`${clusterCall} answered 200 without string accessLevel and clusterUrl`)
  return linked(link, accessLevel, clusterUrl)
}

function linked(link: CloudLink, accessLevel: string, cloudClusterUrl: string): LinkOutcome {
  return { state: 'STATE_TRUE', reason: 'SUCCESS', message: `Successfully linked to cluster '${link.data.resourceId}'`, accessLevel, cloudClusterUrl }
}

function failed(detail: string, transient = false): LinkOutcome {
  return { state: 'STATE_FALSE', reason: 'FAILED', message: `Failed to link to the cloud management platform: ${detail}`, ...(transient ? { transient } : {}) }
}

/** A definite answer other than 200: 401 means bad credentials, 403 and 404 a resource ID they may not use. */
function refused(call: string, status: number): LinkOutcome {
  if (status === 401) return { state: 'STATE_FALSE', reason: 'UNAUTHORIZED', message: `Access denied, check client_id and client_secret (${call} answered 401)` }
  if (status === 403 || status === 404) {
    return { state: 'STATE_FALSE', reason: 'FORBIDDEN', message: `Access denied, check the resource_id (${call} answered ${status})` }
  }
  return failed(`${call} answered ${status}`)
}

function jsonField(text: string, field: string): string | undefined {
  try {
    const value = JSON.parse(text) as unknown
    if (typeof value !== 'object' || value === null) return undefined
    const found = (value as Record<string, unknown>)[field]
    return typeof found === 'string' && found !== '' ? found : undefined
  } catch {
    // Not JSON: the caller reports the missing field.
    return undefined
  }
}

type Answer = { status: number; text: string } | { error: string }

/** One call with a timeout per attempt and bounded retries with exponential backoff on transient failures. */
async function request(url: string, init: RequestInit, settings: RequestSettings, signal: AbortSignal): Promise<Answer> {
  let problem = 'was not attempted'
  for (let attempt = 1; attempt <= settings.attemptsMax; attempt += 1) {
    if (attempt > 1) await sleep(settings.backoffBaseMs * 2 ** (attempt - 2), signal)
    signal.throwIfAborted()
    // A timer of our own rather than AbortSignal.timeout, so that none outlives the attempt.
    const attemptAbort = new AbortController()
    const onAbort = (): void => attemptAbort.abort(signal.reason)
    signal.addEventListener('abort', onAbort, { once: true })
    let timedOut = false
    const timer = setTimeout(() => {
      timedOut = true
      attemptAbort.abort(new Error('timeout'))
    }, settings.requestTimeoutMs)
    try {
      const response = await fetch(url, { ...init, redirect: 'error', signal: attemptAbort.signal })
      const text = await readLimited(response)
      if (response.status !== 429 && response.status < 500) return { status: response.status, text }
      problem = `answered ${response.status}`
    } catch (error) {
      signal.throwIfAborted()
      problem = timedOut ? `timed out after ${settings.requestTimeoutMs} ms` : `failed (${describe(error)})`
    } finally {
      clearTimeout(timer)
      signal.removeEventListener('abort', onAbort)
    }
  }
  return { error: `${problem} (after ${settings.attemptsMax} attempts)` }
}

function describe(error: unknown): string {
  const cause = (error as { cause?: { code?: unknown; message?: unknown } }).cause
  if (typeof cause?.code === 'string') return cause.code
  if (typeof cause?.message === 'string') return cause.message
  return (error as Error).message
}

async function readLimited(response: Response): Promise<string> {
  if (response.body === null) return ''
  const chunks: Uint8Array[] = []
  let size = 0
  for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
    size += chunk.length
    if (size > RESPONSE_BYTES_MAX) throw new Error(`answer larger than ${RESPONSE_BYTES_MAX} bytes`)
    chunks.push(chunk)
  }
  return Buffer.concat(chunks).toString('utf8')
}

/** Resolves after `ms`, or at once when `signal` aborts; the timer never outlives either. */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve()
    const done = (): void => {
      clearTimeout(timer)
      signal.removeEventListener('abort', done)
      resolve()
    }
    const timer = setTimeout(done, ms)
    signal.addEventListener('abort', done, { once: true })
  })
}
