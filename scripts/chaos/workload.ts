/**
 * The chaos workload: concurrent clients, each with its own stream of the run's seeded PRNG, sending a mix of
 * writes and reads to random nodes, and recording every operation (history.ts).
 *
 * The registers the checks reason about:
 * - `config:<name>`: a service-defaults entry whose field Counter is incremented by read-then-cas: GET the entry
 *   (Counter c, ModifyIndex m), then PUT it with Counter c+1 and `?cas=m`. Each version of the entry has its own
 *   ModifyIndex, so cas=m applies exactly when the entry still holds Counter c: a CAS register on Counter.
 * - `policy:<name>` and `token:<AccessorID>`: the Description, set at create and replaced by updates, each write
 *   with a value never written before, so that a read names the write it saw.
 * Reads go out in all three modes; stale ones are checked apart (checks.ts), since they promise no recency.
 */
import type { SeededRng } from '../../src/lib/rng.js'
import { READ_MODES, writeOutcome, type OperationKind, type Outcome, type ReadMode, type RecordedOperation } from './history.js'
import { Clients, request, type Answer } from './http.js'

export const CONFIG_KIND = 'service-defaults'

export interface WorkloadOptions {
  /** Node name → HTTP address (stable across restarts: a node comes back on its ports). */
  addresses: Record<string, string>
  token: string
  configNames: string[]
  requestTimeoutMs: number
  /** The clock's zero (performance.now()); workloads sharing one have comparable times. Default: when created. */
  origin?: number
}

/** What the run learned that later operations (and the final checks) need; shared by every client. */
export class Workload {
  readonly history: RecordedOperation[] = []
  /** Policies whose create was acknowledged: name → ID. */
  readonly policies = new Map<string, string>()
  /** Tokens whose create was acknowledged. */
  readonly tokens: string[] = []
  /** Every key a create was attempted for, acknowledged or not: the final state must be read for each. */
  readonly attemptedPolicies = new Set<string>()
  readonly attemptedTokens = new Set<string>()
  private readonly origin: number
  private readonly clients: Clients

  constructor(readonly options: WorkloadOptions) {
    this.origin = options.origin ?? performance.now()
    this.clients = new Clients(options.token)
  }

  /** Closes the API clients' connections; the run calls it when it is done with the nodes. */
  close(): void {
    this.clients.close()
  }

  now(): number {
    return performance.now() - this.origin
  }

  nodes(): string[] {
    return Object.keys(this.options.addresses)
  }

  record(operation: Omit<RecordedOperation, 'id'>): RecordedOperation {
    const recorded = { id: this.history.length, ...operation }
    this.history.push(recorded)
    return recorded
  }

  /** Sends one request to `node` and times it. */
  async send(node: string, method: string, path: string, body: unknown, signal?: AbortSignal): Promise<{ answer: Answer; start: number; end: number }> {
    const address = this.options.addresses[node]
    if (address === undefined) throw new Error(`no node ${node}`)
    const client = this.clients.for(address)
    const start = this.now()
    const answer = await request(client, method, path, {
      body,
      timeoutMs: this.options.requestTimeoutMs,
      ...(signal === undefined ? {} : { signal }),
    })
    return { answer, start, end: this.now() }
  }
}

/** The query string of a read mode. */
export function modeQuery(mode: ReadMode): string {
  return mode === 'stale' ? '?stale' : mode === 'consistent' ? '?consistent' : ''
}

function writeResult(answer: Answer): { outcome: Outcome; status?: number; error?: string } {
  if (answer.kind === 'error') return { outcome: answer.reached === 'no' ? 'failed' : 'unknown', error: answer.error }
  const outcome = writeOutcome(answer.status)
  return { outcome, status: answer.status, ...(outcome === 'ok' ? {} : { error: answer.text.slice(0, 200) }) }
}

/** A read observes a value (200), observes absence (404), or tells nothing (anything else). */
function readResult(answer: Answer, value: (body: unknown) => string | number | null): { outcome: Outcome; result?: string | number | null; status?: number; error?: string } {
  if (answer.kind === 'error') return { outcome: 'failed', error: answer.error }
  if (answer.status === 200) return { outcome: 'ok', result: value(answer.body), status: 200 }
  if (answer.status === 404) return { outcome: 'ok', result: null, status: 404 }
  return { outcome: 'failed', status: answer.status, error: answer.text.slice(0, 200) }
}

function pick<T>(rng: SeededRng, items: readonly T[]): T {
  const item = items[rng.nextInt(items.length)]
  if (item === undefined) throw new Error('pick from an empty list')
  return item
}

/** A UUID-shaped string from the seeded stream: test identifiers, never secrets that protect anything. */
function seededUuid(rng: SeededRng): string {
  const hex = Array.from({ length: 4 }, () => rng.nextUint32().toString(16).padStart(8, '0')).join('')
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-a${hex.slice(17, 20)}-${hex.slice(20, 32)}`
}

export async function configRead(workload: Workload, client: number, node: string, name: string, mode: ReadMode, signal?: AbortSignal): Promise<RecordedOperation> {
  const { answer, start, end } = await workload.send(node, 'GET', `/v1/config/${CONFIG_KIND}/${name}${modeQuery(mode)}`, undefined, signal)
  const read = readResult(answer, (body) => {
    const counter = (body as { Counter?: unknown }).Counter
    return typeof counter === 'number' ? counter : null
  })
  const modifyIndex = answer.kind === 'response' && answer.status === 200 ? (answer.body as { ModifyIndex?: number }).ModifyIndex : undefined
  return workload.record({ client, node, kind: 'config.read', key: `config:${name}`, mode, start, end, ...read, ...(modifyIndex === undefined ? {} : { modifyIndex }) })
}

/** PUT the entry with Counter `value` if its ModifyIndex is still `cas` (0: only if it does not exist). */
export async function configCas(
  workload: Workload,
  client: number,
  node: string,
  name: string,
  expected: number | null,
  cas: number,
  value: number,
  signal?: AbortSignal,
): Promise<RecordedOperation> {
  const body = { Kind: CONFIG_KIND, Name: name, Counter: value }
  const { answer, start, end } = await workload.send(node, 'PUT', `/v1/config?cas=${cas}`, body, signal)
  const written = writeResult(answer)
  const kind: OperationKind = expected === null ? 'config.create' : 'config.cas'
  const result = written.outcome === 'ok' && answer.kind === 'response' ? answer.body === true : undefined
  return workload.record({ client, node, kind, key: `config:${name}`, value, expected, start, end, ...written, ...(result === undefined ? {} : { result }) })
}

/** One client: operations until `deadline` (ms on the workload clock) or until `signal` aborts. */
export async function runClient(workload: Workload, client: number, rng: SeededRng, deadline: number, signal: AbortSignal): Promise<void> {
  let sequence = 0
  const unique = (prefix: string): string => `${prefix}${client}.${(sequence += 1)}`
  const node = (): string => pick(rng, workload.nodes())
  while (workload.now() < deadline && !signal.aborted) {
    const roll = rng.nextInt(100)
    const mode = pick(rng, READ_MODES)
    if (roll < 35) {
      // Config increment: read in any mode, then cas on what was read. A stale read makes a losing cas, which
      // is fine: a false answer is an observation too.
      const name = pick(rng, workload.options.configNames)
      const read = await configRead(workload, client, node(), name, mode, signal)
      if (read.outcome === 'ok' && typeof read.result === 'number' && read.modifyIndex !== undefined && !signal.aborted) {
        await configCas(workload, client, node(), name, read.result, read.modifyIndex, read.result + 1, signal)
      }
    } else if (roll < 50) {
      await configRead(workload, client, node(), pick(rng, workload.options.configNames), mode, signal)
    } else if (roll < 75) {
      await policyOperation(workload, client, rng, node(), mode, unique, signal)
    } else {
      await tokenOperation(workload, client, rng, node(), mode, unique, signal)
    }
  }
}

async function policyOperation(
  workload: Workload,
  client: number,
  rng: SeededRng,
  node: string,
  mode: ReadMode,
  unique: (prefix: string) => string,
  signal: AbortSignal,
): Promise<void> {
  const known = [...workload.policies.entries()]
  const roll = rng.nextInt(100)
  // Few policies, many updates each: the register histories are what the checker needs to be long.
  if (known.length < 3 || roll < 2) {
    const name = `chaos-policy-${unique('')}`.replace('.', '-')
    const description = unique('p')
    workload.attemptedPolicies.add(name)
    const { answer, start, end } = await workload.send(node, 'PUT', '/v1/acl/policy', { Name: name, Description: description }, signal)
    const written = writeResult(answer)
    workload.record({ client, node, kind: 'policy.create', key: `policy:${name}`, value: description, start, end, ...written })
    const id = answer.kind === 'response' && written.outcome === 'ok' ? (answer.body as { ID?: string }).ID : undefined
    if (id !== undefined) workload.policies.set(name, id)
    return
  }
  const [name, id] = pick(rng, known)
  if (roll < 55) {
    const description = unique('p')
    const { answer, start, end } = await workload.send(node, 'PUT', `/v1/acl/policy/${id}`, { Name: name, Description: description }, signal)
    workload.record({ client, node, kind: 'policy.update', key: `policy:${name}`, value: description, start, end, ...writeResult(answer) })
    return
  }
  const { answer, start, end } = await workload.send(node, 'GET', `/v1/acl/policy/${id}${modeQuery(mode)}`, undefined, signal)
  const read = readResult(answer, (body) => (body as { Description?: string }).Description ?? null)
  workload.record({ client, node, kind: 'policy.read', key: `policy:${name}`, mode, start, end, ...read })
}

async function tokenOperation(
  workload: Workload,
  client: number,
  rng: SeededRng,
  node: string,
  mode: ReadMode,
  unique: (prefix: string) => string,
  signal: AbortSignal,
): Promise<void> {
  const roll = rng.nextInt(100)
  if (workload.tokens.length < 3 || roll < 2) {
    const accessor = seededUuid(rng)
    const secret = seededUuid(rng)
    const description = unique('t')
    workload.attemptedTokens.add(accessor)
    const body = { AccessorID: accessor, SecretID: secret, Description: description }
    const { answer, start, end } = await workload.send(node, 'PUT', '/v1/acl/token', body, signal)
    const written = writeResult(answer)
    workload.record({ client, node, kind: 'token.create', key: `token:${accessor}`, value: description, start, end, ...written })
    if (written.outcome === 'ok') workload.tokens.push(accessor)
    return
  }
  const accessor = pick(rng, workload.tokens)
  if (roll < 55) {
    const description = unique('t')
    const { answer, start, end } = await workload.send(node, 'PUT', `/v1/acl/token/${accessor}`, { Description: description }, signal)
    workload.record({ client, node, kind: 'token.update', key: `token:${accessor}`, value: description, start, end, ...writeResult(answer) })
    return
  }
  const { answer, start, end } = await workload.send(node, 'GET', `/v1/acl/token/${accessor}${modeQuery(mode)}`, undefined, signal)
  const read = readResult(answer, (body) => (body as { Description?: string }).Description ?? null)
  workload.record({ client, node, kind: 'token.read', key: `token:${accessor}`, mode, start, end, ...read })
}
