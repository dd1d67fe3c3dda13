/**
 * TLS on real processes (issue 18), black box: the built CLI, certificates made by `warden tls` into a temp dir, and
 * every peer link of a cluster (each directed link A→B) through an in-test TCP proxy that records every byte.
 *
 * 1. Three nodes over mutual TLS, HTTPS only (`--http-addr off`) with `--tls-verify-incoming`: they elect a leader,
 *    a token made on the leader is read on both followers (`?stale`), and a write sent to a follower is forwarded.
 * 2. HTTPS clients: none without a certificate, none with another CA's certificate (a ConnectionError, no answer);
 *    the right CA's client certificate is answered.
 * 3. A fourth server with the cluster key but another CA's certificate, started with `--join https://…` and also
 *    proposed to the leader by the test with a valid join proof (an attacker who has the key but not the PKI): it is
 *    never a voter, no founder ever links with it, and the cluster keeps committing meanwhile.
 * 4. SIGHUP on a follower: a new certificate of the same CA in place of its files is what new HTTPS and peer
 *    connections see (node:tls), and with every link of the node cut and made again it still links (a write through
 *    it commits and replicates). A garbage certificate file then gives the error line, and the node keeps serving
 *    and linking with the certificate it had.
 * 5. What the recorder saw: on the TLS cluster, after 60 token creates, no SecretID, no node name, no certificate,
 *    not the cluster key, not even the WebSocket upgrade: TLS records from the first byte. (The dialer's ClientHello
 *    does carry server.dc1.warden in clear, as SNI: it names the datacenter, not a node, and is not searched for.)
 *    On a cluster without TLS (frames sealed under the cluster key), no SecretID in any form, after unmasking every
 *    WebSocket frame. A control cluster whose links are left unsealed (the benchmark's hidden flag) shows the same
 *    search finds every SecretID, so the sealed result is not an artefact of where the recorder sits.
 *
 * Every process and proxy is stopped in `after` hooks even when a test fails; the root hook kills any agent left.
 */
import { expect } from 'chai'
import { execFile } from 'node:child_process'
import { randomUUID, X509Certificate } from 'node:crypto'
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { connect as tlsConnect } from 'node:tls'
import { promisify } from 'node:util'
import { ConnectionError, WardenClient, type TlsOptions } from '../../src/api/index.js'
import { makeJoinRequest } from '../../src/lib/join-proof.js'
import { CLI, startAgent, type AgentProcess } from '../support/agent.js'
import { CLUSTER_KEY, freePort, MANAGEMENT_TOKEN } from '../support/cluster.js'
import { startRecordingProxy, type RecordedStream, type RecordingProxy } from '../support/recording-proxy.js'
import { eventually } from './eventually.js'

const run = promisify(execFile)

const DATACENTER = 'dc1'
/** Node names long enough that a chance match in the ciphertext is out of the question (two bytes like `n1` are not). */
const TLS_NAMES = ['tls-node-alpha', 'tls-node-bravo', 'tls-node-charlie']
const SEALED_NAMES = ['sealed-node-1', 'sealed-node-2', 'sealed-node-3']
const OUTSIDER = 'tls-node-outsider'
const TOKEN_CREATES = 60
const CAPTURE_BYTES_MIN = 20 * 1024
/** How long the outsider is watched: many dial attempts, and several times what a joiner takes to be promoted. */
const OUTSIDER_WATCH_MS = 6_000
const RELOADED = 'TLS certificates reloaded'
const NOT_RELOADED = 'SIGHUP: the TLS files were not reloaded; the ones in use stay in use'

interface FilePair {
  cert: string
  key: string
}

/** Paths of what `warden tls` wrote: the CA's certificate, server certificates in the order made, one client's. */
interface Pki {
  ca: string
  servers: FilePair[]
  client: FilePair
}

interface Node {
  name: string
  clusterPort: number
  apiPort: number
  agent: AgentProcess
  /** HTTPS with the right client certificate on a TLS cluster; plain HTTP otherwise. The management token. */
  client: WardenClient
  /** This node's own copies of the TLS files (replacing them touches no other node), on a TLS cluster. */
  tlsFiles: (FilePair & { ca: string }) | undefined
}

interface ProxiedCluster {
  nodes: Node[]
  /** One recording proxy per directed link: `from` dials `to` through it. */
  links: Array<{ from: string; to: string; proxy: RecordingProxy }>
  node(name: string): Node
  stop(): Promise<void>
}

interface RaftState {
  Node: string
  Role: string
  Leader: string
  ForwardedWrites: number
}

interface RaftServer {
  ID: string
  Voter: boolean
}

async function warden(cwd: string, ...args: string[]): Promise<void> {
  await run(process.execPath, [CLI, ...args], { cwd })
}

/** A CA, `servers` server certificates and a client certificate for dc1, made by the CLI in `dir`. */
async function makePki(dir: string, servers: number): Promise<Pki> {
  await mkdir(dir, { recursive: true })
  await warden(dir, 'tls', 'ca', 'create')
  const made: FilePair[] = []
  for (let n = 0; n < servers; n += 1) {
    await warden(dir, 'tls', 'cert', 'create', '-server', '-dc', DATACENTER)
    made.push({ cert: join(dir, `${DATACENTER}-server-warden-${n}.pem`), key: join(dir, `${DATACENTER}-server-warden-${n}-key.pem`) })
  }
  await warden(dir, 'tls', 'cert', 'create', '-client', '-dc', DATACENTER)
  return { ca: join(dir, 'warden-agent-ca.pem'), servers: made, client: { cert: join(dir, `${DATACENTER}-client-warden-0.pem`), key: join(dir, `${DATACENTER}-client-warden-0-key.pem`) } }
}

async function clientTls(ca: string, pair: FilePair | undefined): Promise<TlsOptions> {
  return { ca: await readFile(ca), ...(pair === undefined ? {} : { cert: await readFile(pair.cert), key: await readFile(pair.key) }) }
}

async function copyInto(from: string, to: string, mode: number): Promise<void> {
  await writeFile(to, await readFile(from), { mode })
}

async function fingerprintOf(certFile: string): Promise<string> {
  return new X509Certificate(await readFile(certFile)).fingerprint256
}

/**
 * Starts `names` as one cluster in `root`, each peer link through a recording proxy of its own. With `pki`: TLS files
 * (server certificate N for node N), HTTPS only, verify_incoming. `args` are added to every node's flags.
 */
async function startCluster(root: string, names: readonly string[], options: { pki?: Pki; args?: string[] } = {}): Promise<ProxiedCluster> {
  const ports = new Map<string, { cluster: number; api: number }>()
  for (const name of names) ports.set(name, { cluster: await freePort(), api: await freePort() })
  const links: ProxiedCluster['links'] = []
  const nodes: Node[] = []
  const cluster: ProxiedCluster = {
    nodes,
    links,
    node(name) {
      const found = nodes.find((node) => node.name === name)
      if (found === undefined) throw new Error(`no node ${name}`)
      return found
    },
    async stop() {
      for (const node of nodes) node.client.close()
      await Promise.all(nodes.map((node) => node.agent.stop()))
      await Promise.all(links.map((link) => link.proxy.close()))
    },
  }
  const { pki } = options
  const startNode = async (name: string, position: number): Promise<Node> => {
    const home = join(root, name)
    await mkdir(home, { recursive: true })
    const { cluster: clusterPort, api: apiPort } = ports.get(name)!
    const peers = names.flatMap((other) => {
      const address = other === name ? `127.0.0.1:${clusterPort}` : links.find((link) => link.from === name && link.to === other)!.proxy.address
      return ['--peer', `${other}=${address}`]
    })
    const args = ['--node-name', name, '--cluster-addr', `127.0.0.1:${clusterPort}`, '--cluster-key', CLUSTER_KEY, '--initial-management-token', MANAGEMENT_TOKEN, ...peers]
    let tlsFiles: Node['tlsFiles']
    if (pki === undefined) args.push('--http-addr', `127.0.0.1:${apiPort}`)
    else {
      const server = pki.servers[position]!
      tlsFiles = { ca: join(home, 'ca.pem'), cert: join(home, 'cert.pem'), key: join(home, 'key.pem') }
      await copyInto(pki.ca, tlsFiles.ca, 0o644)
      await copyInto(server.cert, tlsFiles.cert, 0o644)
      await copyInto(server.key, tlsFiles.key, 0o600)
      args.push('--http-addr', 'off', '--https-addr', `127.0.0.1:${apiPort}`, '--tls-verify-incoming')
      args.push('--tls-ca-file', tlsFiles.ca, '--tls-cert-file', tlsFiles.cert, '--tls-key-file', tlsFiles.key)
    }
    const agent = await startAgent({ dev: false, dataDir: join(home, 'data'), keepDataDir: true, args: [...args, ...(options.args ?? [])] })
    agent.managementToken = MANAGEMENT_TOKEN
    const client = new WardenClient({
      address: pki === undefined ? `127.0.0.1:${apiPort}` : `https://127.0.0.1:${apiPort}`,
      token: MANAGEMENT_TOKEN,
      timeoutMs: 15_000,
      ...(pki === undefined ? {} : { tls: await clientTls(pki.ca, pki.client) }),
    })
    return { name, clusterPort, apiPort, agent, client, tlsFiles }
  }
  try {
    for (const from of names) {
      for (const to of names) {
        if (from !== to) links.push({ from, to, proxy: await startRecordingProxy(`127.0.0.1:${ports.get(to)!.cluster}`) })
      }
    }
    const started = await Promise.allSettled(names.map((name, position) => startNode(name, position)))
    for (const result of started) if (result.status === 'fulfilled') nodes.push(result.value)
    const failed = started.find((result) => result.status === 'rejected')
    if (failed !== undefined) throw failed.reason
    await agreedLeader(cluster, 20_000)
    return cluster
  } catch (error) {
    await cluster.stop()
    throw error
  }
}

async function raftState(node: Node): Promise<RaftState> {
  const answer = await node.client.request<RaftState>('GET', '/v1/operator/raft/state', { timeoutMs: 5_000 })
  if (answer.status !== 200) throw new Error(`${node.name}: raft state ${answer.status} ${answer.text}`)
  return answer.body
}

async function raftServers(node: Node): Promise<RaftServer[]> {
  const answer = await node.client.request<{ Servers: RaftServer[] }>('GET', '/v1/operator/raft/configuration', { timeoutMs: 5_000 })
  expect(answer.status, `${node.name}: ${answer.text}`).to.equal(200)
  return answer.body.Servers
}

/**
 * The node every node agrees leads. The raft state needs the management token, so an answer from every node also
 * means the built-in tokens have reached every node.
 */
async function agreedLeader(cluster: ProxiedCluster, timeoutMs = 15_000): Promise<Node> {
  let leader: Node | undefined
  await eventually(
    async () => {
      const states = await Promise.all(cluster.nodes.map((node) => raftState(node)))
      const leaders = states.filter((state) => state.Role === 'leader')
      if (leaders.length !== 1 || !states.every((state) => state.Leader === leaders[0]!.Node)) return false
      leader = cluster.node(leaders[0]!.Node)
      return true
    },
    'every node agrees on one leader',
    timeoutMs,
  )
  return leader!
}

/** A policy written through `node` (forwarded when it follows), then read on every node with `?stale`. */
async function expectWriteReplicates(cluster: ProxiedCluster, node: Node, name: string): Promise<void> {
  const write = await node.client.request('PUT', '/v1/acl/policy', { body: { Name: name } })
  expect(write.status, `${node.name}: ${write.text}`).to.equal(200)
  for (const reader of cluster.nodes) {
    await eventually(async () => (await reader.client.request('GET', `/v1/acl/policy/name/${name}`, { consistency: 'stale' })).status === 200, `${reader.name} has policy ${name}`)
  }
}

/**
 * `count` tokens with SecretIDs chosen here, created in turn through every node (so that forwarded writes carry
 * them both ways between followers and the leader), the last one then read on every node.
 */
async function createTokens(cluster: ProxiedCluster, count: number): Promise<string[]> {
  const secrets: string[] = []
  let last = ''
  for (let n = 0; n < count; n += 1) {
    const secret = randomUUID()
    const node = cluster.nodes[n % cluster.nodes.length]!
    const created = await node.client.request<{ AccessorID: string; SecretID: string }>('PUT', '/v1/acl/token', { body: { SecretID: secret, Description: `capture ${n}` } })
    expect(created.status, `${node.name}: ${created.text}`).to.equal(200)
    expect(created.body.SecretID).to.equal(secret)
    secrets.push(secret)
    last = created.body.AccessorID
  }
  for (const node of cluster.nodes) {
    await eventually(async () => (await node.client.request('GET', `/v1/acl/token/${last}`, { consistency: 'stale' })).status === 200, `${node.name} has the last token`)
  }
  return secrets
}

/** The middle of the base64 of `bytes` placed after 0, 1 or 2 other bytes: what a base64 of a larger buffer holds. */
function base64Forms(bytes: Buffer): Buffer[] {
  return [0, 1, 2].map((shift) => {
    const text = Buffer.concat([Buffer.alloc(shift), bytes]).toString('base64')
    return Buffer.from(text.slice(shift === 0 ? 0 : 4, -4))
  })
}

/** Every form in which a secret could cross readable: its text, hex and base64 of it, and of a UUID's 16 bytes. */
function secretForms(secret: string): Array<{ form: string; bytes: Buffer }> {
  const text = Buffer.from(secret, 'utf8')
  const forms = [
    { form: 'text', bytes: text },
    { form: 'hex of its text', bytes: Buffer.from(text.toString('hex')) },
    ...base64Forms(text).map((bytes) => ({ form: 'base64 of its text', bytes })),
  ]
  if (/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(secret)) {
    const raw = Buffer.from(secret.replace(/-/g, ''), 'hex')
    forms.push({ form: 'its 16 bytes', bytes: raw }, { form: 'hex of its bytes', bytes: Buffer.from(raw.toString('hex')) })
    forms.push(...base64Forms(raw).map((bytes) => ({ form: 'base64 of its bytes', bytes })))
  }
  for (const form of [...forms]) if (/[a-f]/i.test(form.bytes.toString('latin1'))) forms.push({ form: `${form.form} (upper case)`, bytes: Buffer.from(form.bytes.toString('latin1').toUpperCase(), 'latin1') })
  return forms
}

/**
 * The payloads of the WebSocket frames in one direction of a connection, unmasked and joined (RFC 6455 §5.2-5.3),
 * after the HTTP upgrade: a dialer masks every frame it sends, which hides nothing from anyone who reads the mask key
 * in the frame's header. Undefined when the stream does not parse as an upgrade and frames.
 */
function webSocketPayloads(stream: Buffer): Buffer | undefined {
  const end = stream.indexOf('\r\n\r\n')
  if (end < 0) return undefined
  const payloads: Buffer[] = []
  let offset = end + 4
  while (offset + 2 <= stream.length) {
    const masked = (stream[offset + 1]! & 0x80) !== 0
    let length = stream[offset + 1]! & 0x7f
    let header = 2
    if (length === 126) {
      if (offset + 4 > stream.length) break
      length = stream.readUInt16BE(offset + 2)
      header = 4
    } else if (length === 127) {
      if (offset + 10 > stream.length) break
      length = Number(stream.readBigUInt64BE(offset + 2))
      header = 10
    }
    const mask = masked ? stream.subarray(offset + header, offset + header + 4) : Buffer.alloc(4)
    const start = offset + header + (masked ? 4 : 0)
    // A connection cut mid-frame: what arrived of the frame is searched too.
    const payload = Buffer.from(stream.subarray(start, Math.min(start + length, stream.length)))
    for (let index = 0; index < payload.length; index += 1) payload[index]! ^= mask[index % 4]!
    payloads.push(payload)
    offset = start + length
  }
  return Buffer.concat(payloads)
}

interface Captured {
  link: string
  stream: RecordedStream
}

function capturedStreams(cluster: ProxiedCluster): Captured[] {
  return cluster.links.flatMap((link) => link.proxy.streams().map((stream) => ({ link: `${link.from}→${link.to}`, stream })))
}

function capturedBytes(cluster: ProxiedCluster): number {
  return cluster.links.reduce((sum, link) => sum + link.proxy.capturedBytes(), 0)
}

/** Where any of `needles` shows in the streams (and, with `unmask`, in their unmasked WebSocket payloads). */
function findings(streams: Captured[], needles: Array<{ what: string; bytes: Buffer }>, unmask: boolean): string[] {
  const found: string[] = []
  for (const { link, stream } of streams) {
    const haystacks: Array<{ view: string; bytes: Buffer }> = [{ view: 'raw', bytes: stream.bytes }]
    if (unmask) {
      const payloads = webSocketPayloads(stream.bytes)
      if (payloads !== undefined) haystacks.push({ view: 'unmasked', bytes: payloads })
    }
    for (const haystack of haystacks) {
      for (const needle of needles) {
        if (haystack.bytes.includes(needle.bytes)) found.push(`${needle.what} in ${link} connection ${stream.connection} ${stream.direction} (${haystack.view})`)
      }
    }
  }
  return found
}

function secretNeedles(secrets: readonly string[]): Array<{ what: string; bytes: Buffer }> {
  return secrets.flatMap((secret, n) => secretForms(secret).map(({ form, bytes }) => ({ what: `secret ${n} (${secret}) as ${form}`, bytes })))
}

function clusterKeyNeedles(): Array<{ what: string; bytes: Buffer }> {
  return [
    { what: 'the cluster key as text', bytes: Buffer.from(CLUSTER_KEY) },
    { what: 'the cluster key as bytes', bytes: Buffer.from(CLUSTER_KEY, 'base64') },
  ]
}

/** The log records of `agent` from line `from` on whose message is `msg`. */
function logged(agent: AgentProcess, msg: string, from = 0): Array<Record<string, unknown>> {
  return agent.logs.slice(from).flatMap((line) => {
    try {
      const record = JSON.parse(line) as Record<string, unknown>
      return record !== null && typeof record === 'object' && record['msg'] === msg ? [record] : []
    } catch {
      return []
    }
  })
}

/** The fingerprint of the certificate a new TLS connection to `port` is shown (verified against `ca`). */
async function servedFingerprint(port: number, ca: string, client: FilePair): Promise<string> {
  const options = { host: '127.0.0.1', port, ...(await clientTls(ca, client)), rejectUnauthorized: true }
  return new Promise<string>((resolve, reject) => {
    const socket = tlsConnect(options, () => {
      const fingerprint = socket.getPeerCertificate().fingerprint256
      socket.destroy()
      resolve(fingerprint)
    })
    socket.setTimeout(5_000, () => socket.destroy(new Error(`no TLS handshake with 127.0.0.1:${port} within 5 s`)))
    socket.once('error', reject)
  })
}

/** A request on a new connection with `tls` gets no answer: a ConnectionError from the TLS handshake. */
async function expectRefused(address: string, tls: TlsOptions, what: string): Promise<void> {
  const client = new WardenClient({ address, tls, token: MANAGEMENT_TOKEN, keepAlive: false, timeoutMs: 5_000 })
  let answer: unknown
  let failure: unknown
  try {
    answer = (await client.request('GET', '/v1/status/leader')).status
  } catch (error) {
    failure = error
  } finally {
    client.close()
  }
  expect(answer, `${what}: answered`).to.equal(undefined)
  expect(failure, what).to.be.instanceOf(ConnectionError)
  // Refused in the handshake, not left hanging until the client gave up.
  expect((failure as ConnectionError).reason, `${what}: ${String(failure)}`).to.not.equal('timeout')
}

/** Cuts every open connection of every link from or to `node`, and waits until the node is linked with each peer again. */
async function relink(cluster: ProxiedCluster, node: Node): Promise<void> {
  const from = node.agent.logs.length
  for (const link of cluster.links) if (link.from === node.name || link.to === node.name) link.proxy.cut()
  const others = cluster.nodes.filter((other) => other !== node).map((other) => other.name)
  await eventually(
    async () => {
      const peers = new Set(logged(node.agent, 'peer connected', from).map((record) => record['peer']))
      return others.every((name) => peers.has(name))
    },
    `${node.name} is linked again with ${others.join(' and ')}`,
    15_000,
  )
}

describe('TLS on real processes: mutual TLS between peers, HTTPS with client certificates, reload, and what the wire shows', function () {
  this.timeout(60_000)
  let root: string
  let pki: Pki
  let otherPki: Pki

  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'warden-tls-cluster-'))
    // Servers 0-2 for the three nodes, 3 for the reload; another CA for the outsider and the foreign client.
    pki = await makePki(join(root, 'pki'), 4)
    otherPki = await makePki(join(root, 'other-pki'), 1)
  })
  after(async () => {
    await rm(root, { recursive: true, force: true })
  })

  describe('a three-node cluster over mutual TLS, HTTPS only, verify_incoming', function () {
    let cluster: ProxiedCluster | undefined
    const closers: Array<() => Promise<unknown> | unknown> = []

    before(async () => {
      cluster = await startCluster(join(root, 'tls'), TLS_NAMES, { pki })
    })
    after(async () => {
      for (const close of closers.splice(0).reverse()) await close()
      await cluster?.stop()
    })

    it('elects a leader; a token made on the leader over HTTPS is read on both followers (?stale); a write sent to a follower is forwarded', async () => {
      for (const node of cluster!.nodes) {
        const ready = JSON.parse(node.agent.logs.find((line) => line.includes('"agent ready"'))!) as Record<string, unknown>
        expect(ready, `${node.name}: plain HTTP is off`).to.not.have.property('http')
        expect(ready['https']).to.equal(`127.0.0.1:${node.apiPort}`)
      }
      const leader = await agreedLeader(cluster!)
      const followers = cluster!.nodes.filter((node) => node !== leader)
      expect(followers).to.have.length(2)
      const secret = randomUUID()
      const created = await leader.client.request<{ AccessorID: string }>('PUT', '/v1/acl/token', { body: { SecretID: secret, Description: 'made on the leader over HTTPS' } })
      expect(created.status, created.text).to.equal(200)
      for (const follower of followers) {
        await eventually(async () => (await follower.client.request('GET', `/v1/acl/token/${created.body.AccessorID}`, { consistency: 'stale' })).status === 200, `${follower.name} has the token`)
        const read = await follower.client.request<{ SecretID: string; Description: string }>('GET', `/v1/acl/token/${created.body.AccessorID}`, { consistency: 'stale' })
        expect(read.body.SecretID, follower.name).to.equal(secret)
        expect(read.body.Description).to.equal('made on the leader over HTTPS')
      }
      const follower = followers[0]!
      const forwardedBefore = (await raftState(follower)).ForwardedWrites
      await expectWriteReplicates(cluster!, follower, 'written-through-a-follower')
      expect((await raftState(follower)).ForwardedWrites, 'the follower forwarded the write to the leader').to.be.greaterThan(forwardedBefore)
      const consistent = await leader.client.request('GET', '/v1/acl/policy/name/written-through-a-follower', { consistency: 'consistent' })
      expect(consistent.status, consistent.text).to.equal(200)
    })

    it("refuses HTTPS clients without a certificate or with another CA's (a ConnectionError, no answer), and answers the right CA's client certificate", async () => {
      const node = cluster!.nodes[0]!
      const address = `https://127.0.0.1:${node.apiPort}`
      const attempts: Array<{ what: string; tls: TlsOptions }> = [
        { what: 'no client certificate', tls: await clientTls(pki.ca, undefined) },
        { what: "another CA's client certificate", tls: await clientTls(pki.ca, otherPki.client) },
        { what: "another CA's server certificate", tls: await clientTls(pki.ca, otherPki.servers[0]) },
      ]
      for (const { what, tls } of attempts) await expectRefused(address, tls, what)
      const right = new WardenClient({ address, tls: await clientTls(pki.ca, pki.client), token: MANAGEMENT_TOKEN, keepAlive: false, timeoutMs: 5_000 })
      closers.push(() => right.close())
      const answer = await right.request('GET', '/v1/status/leader')
      expect(answer.status, answer.text).to.equal(200)
      expect(answer.body).to.match(/^127\.0\.0\.1:\d+$/)
    })

    it("never lets a server with the cluster key but another CA's certificate join or vote, and the cluster keeps committing", async () => {
      const leader = await agreedLeader(cluster!)
      const home = join(root, OUTSIDER)
      await mkdir(home, { recursive: true })
      const clusterPort = await freePort()
      const outsider = await startAgent({
        dev: false,
        dataDir: join(home, 'data'),
        keepDataDir: true,
        args: [
          '--node-name', OUTSIDER,
          '--http-addr', 'off',
          '--https-addr', `127.0.0.1:${await freePort()}`,
          '--cluster-addr', `127.0.0.1:${clusterPort}`,
          '--cluster-key', CLUSTER_KEY,
          '--tls-ca-file', otherPki.ca,
          '--tls-cert-file', otherPki.servers[0]!.cert,
          '--tls-key-file', otherPki.servers[0]!.key,
          '--join', `https://127.0.0.1:${leader.apiPort}`,
        ],
      })
      closers.push(() => outsider.stop())
      // What the outsider's own --join cannot do (each side refuses the other's certificate), the test does for it
      // with the right client certificate: a valid proof of the cluster key, so the peer links are all that is left.
      const proposed = await leader.client.request('POST', '/v1/operator/raft/join', { token: null, body: makeJoinRequest(CLUSTER_KEY, OUTSIDER, `127.0.0.1:${clusterPort}`, Date.now()) })
      expect(proposed.status, proposed.text).to.equal(200)
      try {
        await eventually(async () => (await raftServers(leader)).some((server) => server.ID === OUTSIDER), 'the leader lists the outsider as a non-voter')
        const deadline = Date.now() + OUTSIDER_WATCH_MS
        let writes = 0
        while (Date.now() < deadline) {
          for (const node of cluster!.nodes) {
            const listed = (await raftServers(node)).find((server) => server.ID === OUTSIDER)
            expect(listed?.Voter ?? false, `${node.name} lists the outsider as a voter`).to.equal(false)
          }
          const write = await leader.client.request('PUT', '/v1/acl/policy', { body: { Name: `while-the-outsider-knocks-${writes}` } })
          expect(write.status, write.text).to.equal(200)
          writes += 1
          await new Promise((resolve) => setTimeout(resolve, 300))
        }
        expect(writes).to.be.greaterThan(5)
        for (const node of cluster!.nodes) {
          const linked = logged(node.agent, 'peer connected').filter((record) => record['peer'] === OUTSIDER)
          expect(linked, `${node.name} linked with the outsider`).to.deep.equal([])
        }
        // The leader did dial it (the test reached the TLS check rather than nothing at all), and was refused.
        expect(logged(outsider, 'peer TLS handshake refused'), 'the outsider refused a founder in the TLS handshake').to.not.deep.equal([])
        expect(logged(outsider, 'joined the cluster'), "the outsider's own join").to.deep.equal([])
        expect(logged(outsider, 'join attempt failed; retrying'), "the outsider's own join attempts").to.not.deep.equal([])
      } finally {
        const removed = await leader.client.request('DELETE', `/v1/operator/raft/peer?id=${OUTSIDER}`)
        expect(removed.status, removed.text).to.equal(200)
        await eventually(async () => !(await raftServers(leader)).some((server) => server.ID === OUTSIDER), 'the outsider is removed')
        await outsider.stop()
      }
    })

    /** The follower whose TLS files the SIGHUP tests replace, picked by the first of them to run. */
    let reloading: Node | undefined
    async function reloadingNode(): Promise<Node> {
      if (reloading === undefined) {
        const leader = await agreedLeader(cluster!)
        reloading = cluster!.nodes.find((candidate) => candidate !== leader)!
      }
      return reloading
    }

    it('SIGHUP on a follower with a new certificate of the same CA in place: new HTTPS and peer connections see it, and the node links again with it', async () => {
      const node = await reloadingNode()
      const files = node.tlsFiles!
      const old = await fingerprintOf(files.cert)
      const replacement = pki.servers[3]!
      const next = await fingerprintOf(replacement.cert)
      expect(next).to.not.equal(old)
      // What the node serves before, so that the check below cannot pass by reading something else.
      expect(await servedFingerprint(node.apiPort, pki.ca, pki.client)).to.equal(old)
      expect(await servedFingerprint(node.clusterPort, pki.ca, pki.client)).to.equal(old)
      await copyInto(replacement.cert, files.cert, 0o644)
      await copyInto(replacement.key, files.key, 0o600)
      const from = node.agent.logs.length
      node.agent.child.kill('SIGHUP')
      await eventually(async () => logged(node.agent, RELOADED, from).length > 0, `${node.name} logs "${RELOADED}"`)
      expect(logged(node.agent, RELOADED, from)[0]!['fingerprint256']).to.equal(next)
      expect(await servedFingerprint(node.apiPort, pki.ca, pki.client), 'HTTPS').to.equal(next)
      expect(await servedFingerprint(node.clusterPort, pki.ca, pki.client), 'peer port').to.equal(next)
      // The reload swapped the certificates, not the rule: a client without a certificate is still refused.
      await expectRefused(`https://127.0.0.1:${node.apiPort}`, await clientTls(pki.ca, undefined), 'no client certificate, after the reload')
      // Open links keep the TLS session they had: made again, every link of the node runs on the new certificate.
      await relink(cluster!, node)
      await expectWriteReplicates(cluster!, node, 'after-the-reload')
      expect(node.agent.child.exitCode).to.equal(null)
    })

    it('SIGHUP on that follower with a garbage certificate file: the error line, and the node keeps serving and linking with the certificate it had', async () => {
      const node = await reloadingNode()
      const files = node.tlsFiles!
      const served = await servedFingerprint(node.apiPort, pki.ca, pki.client)
      const good = await readFile(files.cert)
      try {
        await writeFile(files.cert, 'this is not a certificate\n')
        const from = node.agent.logs.length
        node.agent.child.kill('SIGHUP')
        await eventually(async () => logged(node.agent, NOT_RELOADED, from).length > 0, `${node.name} logs "${NOT_RELOADED}"`)
        const [line] = logged(node.agent, NOT_RELOADED, from)
        expect(line!['level'], 'an error line').to.equal(50)
        expect(String(line!['problem'])).to.include('--tls-cert-file')
        expect(logged(node.agent, RELOADED, from)).to.deep.equal([])
        expect(await servedFingerprint(node.apiPort, pki.ca, pki.client), 'HTTPS').to.equal(served)
        expect(await servedFingerprint(node.clusterPort, pki.ca, pki.client), 'peer port').to.equal(served)
        await relink(cluster!, node)
        await expectWriteReplicates(cluster!, node, 'after-the-refused-reload')
        expect(node.agent.child.exitCode).to.equal(null)
      } finally {
        await writeFile(files.cert, good)
      }
    })

    it(`shows the recorder on every peer link nothing readable: after ${TOKEN_CREATES} token creates, TLS records from the first byte, no SecretID, node name, certificate or WebSocket upgrade`, async () => {
      const secrets = await createTokens(cluster!, TOKEN_CREATES)
      const streams = capturedStreams(cluster!)
      expect(capturedBytes(cluster!), 'bytes recorded').to.be.greaterThan(CAPTURE_BYTES_MIN)
      for (const link of cluster!.links) expect(link.proxy.connections, `connections through ${link.from}→${link.to}`).to.be.greaterThan(0)
      // Every connection opens with a TLS handshake record from the dialer: nothing before it in clear.
      const notTls = streams.filter(({ stream }) => stream.direction === 'toAcceptor' && stream.bytes.length > 0 && !(stream.bytes[0] === 0x16 && stream.bytes[1] === 0x03))
      expect(notTls.map(({ link, stream }) => `${link} connection ${stream.connection}: ${stream.bytes.subarray(0, 16).toString('hex')}`)).to.deep.equal([])
      const certificates = await Promise.all([...pki.servers, pki.client].map(async (pair, n) => ({ what: `certificate ${n} (DER)`, bytes: new X509Certificate(await readFile(pair.cert)).raw })))
      const needles = [
        ...secretNeedles([MANAGEMENT_TOKEN, ...secrets]),
        ...[...TLS_NAMES, OUTSIDER].map((name) => ({ what: `node name ${name}`, bytes: Buffer.from(name) })),
        ...clusterKeyNeedles(),
        ...certificates,
        { what: 'an HTTP request line', bytes: Buffer.from('HTTP/1.1') },
        { what: 'the WebSocket upgrade', bytes: Buffer.from('websocket') },
        { what: 'the WebSocket upgrade', bytes: Buffer.from('Sec-WebSocket') },
      ]
      expect(findings(streams, needles, false)).to.deep.equal([])
    })
  })

  describe('a three-node cluster without TLS: frames sealed under keys derived from the cluster key', function () {
    let cluster: ProxiedCluster | undefined

    before(async () => {
      cluster = await startCluster(join(root, 'sealed'), SEALED_NAMES)
    })
    after(async () => {
      await cluster?.stop()
    })

    it(`shows the recorder on every peer link no SecretID in any form after ${TOKEN_CREATES} token creates, even with every WebSocket frame unmasked`, async () => {
      const secrets = await createTokens(cluster!, TOKEN_CREATES)
      expect(capturedBytes(cluster!), 'bytes recorded').to.be.greaterThan(CAPTURE_BYTES_MIN)
      for (const link of cluster!.links) expect(link.proxy.connections, `connections through ${link.from}→${link.to}`).to.be.greaterThan(0)
      const streams = capturedStreams(cluster!)
      // The recorder does parse what it saw: the upgrades in clear, then frames.
      expect(streams.filter(({ stream }) => stream.bytes.length > 0 && webSocketPayloads(stream.bytes) === undefined).map(({ link, stream }) => `${link} ${stream.connection} ${stream.direction}`)).to.deep.equal([])
      expect(findings(streams, [...secretNeedles([MANAGEMENT_TOKEN, ...secrets]), ...clusterKeyNeedles()], true)).to.deep.equal([])
    })

    it('(control) finds every SecretID the same way on links left unsealed by the benchmark flag: the search and the recorder do see the Raft traffic', async () => {
      const control = await startCluster(join(root, 'unsealed'), ['control-1', 'control-2', 'control-3'], { args: ['--unsealed-peer-links-for-benchmark'] })
      try {
        const secrets = await createTokens(control, 12)
        const streams = capturedStreams(control)
        const missing = secrets.filter((secret) => findings(streams, [{ what: secret, bytes: Buffer.from(secret) }], true).length === 0)
        expect(missing, 'SecretIDs the search did not find on unsealed links').to.deep.equal([])
        // Among them some sent by a dialer, masked on the wire: the unmasking works, so a dialer's leak would show.
        const dialerSent = findings(streams, secretNeedles(secrets), true).filter((finding) => finding.includes('toAcceptor (unmasked)'))
        expect(dialerSent, 'SecretIDs found in frames a dialer sent').to.not.deep.equal([])
      } finally {
        await control.stop()
      }
    })
  })
})
