/**
 * The agent: opens the data dir, recovers the state from the log, writes the built-ins on a new cluster, binds the
 * cluster and HTTP listeners, and stops in the reverse order. Start and stop are the only places that know the order
 * of the parts.
 */
import { mkdtemp, mkdir, readFile, rm, writeFile } from 'node:fs/promises'
import { createServer as createHttpServer, type Server } from 'node:http'
import { createServer as createHttpsServer, type ServerOptions as HttpsServerOptions } from 'node:https'
import type { AddressInfo, Server as TcpServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Logger } from 'pino'
import { newOrderedUuid, newUuid, formatTime } from '../lib/ids.js'
export { UnknownCommandError } from '../state/store.js'
import { bareToken, COMMAND_VERSION, type TokenCreate } from '../state/commands.js'
import { getRecord, policySpec, tokenBySecret } from '../state/tables.js'
import { GLOBAL_MANAGEMENT_POLICY_ID } from '../state/builtins.js'
import { startReplica } from './replicas.js'
import { httpConnectionsFor, openFilesLimit } from './limits.js'
import { TokenResolver } from '../acl/resolver.js'
import { answerClientError, answerExpectation } from '../http/client-errors.js'
import { boundPipelining } from '../http/pipelining.js'
import { limitConnectionsPerClient, skipRefusedConnections } from '../http/connection-limit.js'
import { createApp } from '../http/app.js'
import { AuditLog } from '../http/audit-log.js'
import { auditRefusedConnection } from '../http/audit.js'
import { RateLimiter } from '../http/rate-limit.js'
import { OidcStateSealer } from '../acl/auth/oidc-state.js'
import { cloudSettingsProblem, LinkController, linkFromSettings } from '../controllers/link-controller.js'
import { TokenReaper } from '../controllers/token-reaper.js'
import { SnapshotRestorer } from '../controllers/snapshot-restore.js'
import { ConfigError, formatAddress, type AgentConfig, type ConfigWarning } from './config.js'
import { loadTlsFiles, type TlsMaterial } from './tls-files.js'
import { inProcessHttp } from './in-process-http.js'
import { DatacenterForwarder } from '../rpc/dc-forward.js'
import { AclReplicator } from '../controllers/acl-replication.js'
import { tokenAtPrimary } from '../rpc/remote-tokens.js'
import { randomInt } from 'node:crypto'
import { AgentMetrics } from '../metrics/registry.js'
import { agentMetricSources } from './metric-sources.js'

export interface RunningAgent {
  /** HOST:PORT of plain HTTP; undefined when http_addr is off. */
  httpAddress: string | undefined
  /** HOST:PORT of HTTPS; undefined unless https_addr is set. */
  httpsAddress: string | undefined
  clusterAddress: string
  dataDir: string
  managementToken: string | undefined
  /** Whether this start generated the --dev management token (a restart reads it back from the data dir). */
  managementTokenGenerated: boolean
  /**
   * Reads the TLS files again (SIGHUP) and uses them for the HTTPS and peer connections made from now on. Throws a
   * ConfigError, and keeps the files in use, when the new ones fail a check; false when the agent has no TLS files.
   */
  reloadTls(): boolean
  stop(): Promise<void>
}

/**
 * HTTPS: TLS 1.2 or later, as Consul's default tls_min_version, for the clients operators already have. With
 * verify_incoming, a client must present a certificate the CA signed; any certificate of that CA will do (its name
 * is the client's business, as in Consul).
 */
function httpsOptions(material: TlsMaterial, verifyIncoming: boolean): HttpsServerOptions {
  // A connection that never finishes its TLS handshake is dropped after 10 s (Node's default is 120 s).
  return { ca: material.ca, cert: material.cert, key: material.key, minVersion: 'TLSv1.2', requestCert: verifyIncoming, rejectUnauthorized: verifyIncoming, handshakeTimeout: 10_000 }
}

function loadTls(config: AgentConfig, warnings: ConfigWarning[]): TlsMaterial | undefined {
  return config.tls === undefined ? undefined : loadTlsFiles(config.tls, config.datacenter, new Date(), warnings)
}

function managementTokenRecord(secret: string, description: string, nowMs: number): TokenCreate {
  return bareToken({ AccessorID: newOrderedUuid(nowMs), SecretID: secret, Description: description, CreateTime: formatTime(nowMs) })
}

async function prepareDataDir(config: AgentConfig): Promise<{ dataDir: string; temporary: boolean }> {
  if (config.dataDir !== undefined) {
    await mkdir(config.dataDir, { recursive: true, mode: 0o700 })
    return { dataDir: config.dataDir, temporary: false }
  }
  return { dataDir: await mkdtemp(join(tmpdir(), 'warden-dev-')), temporary: true }
}

/** In --dev without a configured token, the token of an earlier run of the same data dir, or a new one. */
async function devManagementToken(dataDir: string): Promise<{ secret: string; generated: boolean }> {
  const path = join(dataDir, 'management-token')
  try {
    const existing = (await readFile(path, 'utf8')).trim()
    if (existing !== '') return { secret: existing, generated: false }
  } catch {
    // No earlier token: generate one below.
  }
  const secret = newUuid()
  await writeFile(path, `${secret}\n`, { mode: 0o600 })
  return { secret, generated: true }
}

/** Retries a write until it succeeds, with a growing pause, for writes no request is waiting on. */
async function retryInBackground(write: () => Promise<unknown>, log: Logger): Promise<void> {
  for (let attempt = 0; attempt < 20; attempt += 1) {
    try {
      await write()
      return
    } catch (error) {
      log.debug({ err: error, attempt }, 'background write failed; retrying')
      await new Promise((resolve) => setTimeout(resolve, Math.min(5_000, 200 * 2 ** attempt)))
    }
  }
  log.warn('a background write kept failing; giving up until the next start')
}

function listen(server: Server | TcpServer, host: string, port: number): Promise<AddressInfo> {
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, host, () => {
      server.off('error', reject)
      resolve(server.address() as AddressInfo)
    })
  })
}

async function openAuditLog(config: AgentConfig, log: Logger): Promise<AuditLog | undefined> {
  if (config.audit === undefined) return undefined
  const { path, rotateBytes, rotateKeep, setting } = config.audit
  try {
    return await AuditLog.open({ path, rotateBytes, rotateKeep, log: log.child({ module: 'audit' }) })
  } catch (error) {
    throw new ConfigError(`${setting}: cannot open ${path} for appending: ${(error as Error).message}`)
  }
}

export async function startAgent(config: AgentConfig, log: Logger, onFatal: (error: unknown) => void): Promise<RunningAgent> {
  const cloudProblem = cloudSettingsProblem(config.cloud)
  if (cloudProblem !== undefined) throw new ConfigError(cloudProblem)
  // Checked before anything opens: a certificate that would fail on every connection stops the start (exit 2).
  const tlsWarnings: ConfigWarning[] = []
  let tls = loadTls(config, tlsWarnings)
  // Settings that work but expose a secret (config.ts): said once, at start, naming the setting and never the secret.
  for (const warning of [...config.warnings, ...tlsWarnings]) log.warn({ setting: warning.setting }, warning.message)
  if (tls !== undefined) log.info(tls.summary, 'TLS certificate loaded')
  // Before anything else: an agent that cannot keep its audit log must not serve (fail closed, issue 18).
  const audit = await openAuditLog(config, log)
  const { dataDir, temporary } = await prepareDataDir(config)
  // A secondary datacenter has no management token of its own: the primary's reaches it (issue 19).
  const secondary = config.datacenter !== config.primaryDatacenter
  if (secondary && config.initialManagementToken !== undefined) {
    throw new ConfigError(`--initial-management-token: a secondary datacenter (${config.datacenter}; the primary is ${config.primaryDatacenter}) takes the primary's management token and has none of its own`)
  }
  const devToken = config.initialManagementToken === undefined && config.dev && !secondary ? await devManagementToken(dataDir) : undefined
  const managementToken = config.initialManagementToken ?? devToken?.secret
  // Made first: the Raft driver reports its timings into it from its first Ready. Its own registry, never the global
  // one, so that agents sharing a process (tests) keep their metrics apart.
  const metrics = new AgentMetrics()
  const started = await startReplica(config, dataDir, log, onFatal, tls, metrics.raftTimings)
  const state = started.state
  const replica = started.cluster
  const clusterAddress = started.clusterAddress
  const now = Date.now
  const bootstrapWrites = async (): Promise<void> => {
    if ((await getRecord(state.reader, policySpec, GLOBAL_MANAGEMENT_POLICY_ID)) === undefined) {
      const bootstrapToken = managementToken === undefined ? undefined : managementTokenRecord(managementToken, 'Initial Management Token', now())
      await replica.propose({ v: COMMAND_VERSION, type: 'acl.init', ...(bootstrapToken === undefined ? {} : { bootstrapToken }) })
    } else if (managementToken !== undefined && (await tokenBySecret(state.reader, managementToken)) === undefined) {
      // A management token configured after the cluster was created is added, as Consul's leader does.
      await replica.propose({ v: COMMAND_VERSION, type: 'acl.token.ensure', token: managementTokenRecord(managementToken, 'Initial Management Token', now()) })
    }
  }
  // The cloud settings are written as the link at every start, over a link written earlier through the API (api.md).
  const configuredLink = linkFromSettings(config.cloud, now())
  // No write before a leader exists, and a founding member may start before its peers: the leader writes the
  // built-ins once its first entry commits (the command is idempotent), and this node writes its link settings once
  // there is a leader, retrying in the background. A server alone leads at once: it serves nothing before both are in.
  const raftLog = log.child({ module: 'bootstrap' })
  const leading = new Promise<void>((resolve, reject) => {
    started.onLeadership(() => {
      replica
        .readBarrier('consistent')
        .then(bootstrapWrites)
        .then(resolve, (error: unknown) => {
          raftLog.warn({ err: error }, 'bootstrap writes failed; the next leader retries')
          reject(error)
        })
    })
  })
  if (started.alone) {
    // Alone, no other leader will retry: a start that cannot write the built-ins fails, as it did before one path.
    await leading
    if (configuredLink !== undefined) await replica.propose({ v: COMMAND_VERSION, type: 'link.set', link: configuredLink })
  } else {
    // Logged above; a later leadership writes them again.
    leading.catch(() => undefined)
    if (configuredLink !== undefined) void retryInBackground(() => replica.propose({ v: COMMAND_VERSION, type: 'link.set', link: configuredLink }), raftLog)
  }

  // ?dc for another datacenter goes there over WAN links (rpc/dc-forward.ts); those of others are served here.
  const forwarder =
    started.wan === undefined
      ? undefined
      : new DatacenterForwarder(started.wan.transport, started.wan.membership, log.child({ module: 'wan' }), undefined, [config.primaryDatacenter])
  // A secondary datacenter replicates policies and roles from the primary, on its leader (controllers/acl-replication.ts).
  const replicator =
    forwarder === undefined || config.datacenter === config.primaryDatacenter
      ? undefined
      : new AclReplicator(
          state,
          replica,
          forwarder,
          { primary: config.primaryDatacenter, token: config.replication.token, applyRate: config.replication.applyRate, rate: config.replication.rate, burst: config.replication.burst, tokens: config.replication.tokens },
          log.child({ module: 'acl-replication' }),
          now,
          () => randomInt(2 ** 32) / 2 ** 32,
        )
  const closing = new AbortController()
  // Bounded like everything else, and below the open-file limit so that the stores can always open their files.
  const httpConnections = httpConnectionsFor(openFilesLimit())
  const resolver = new TokenResolver(state, {
    datacenter: config.datacenter,
    defaultPolicy: config.defaultPolicy,
    // A secondary resolves the primary's tokens there (rpc/remote-tokens.ts), each answer held 30 s (acl.token_ttl).
    ...(replicator === undefined || forwarder === undefined
      ? {}
      : {
          remote: {
            lookup: (secret: string) => tokenAtPrimary(forwarder, config.primaryDatacenter, secret),
            ttlMs: 30_000,
            downPolicy: config.downPolicy,
            globalTokensFromPrimary: !config.replication.tokens,
          },
        }),
  })
  metrics.readFrom(agentMetricSources({ started, state, resolver, replicator }))
  // Archives being restored are spooled here; what a crash left behind is of no use.
  const spoolDirectory = join(dataDir, 'restore-spool')
  await rm(spoolDirectory, { recursive: true, force: true })
  const restorer = new SnapshotRestorer(state, replica, { spoolDirectory, log: log.child({ module: 'snapshot-restore' }), now })
  restorer.start()
  const app = createApp({
    state,
    cluster: replica,
    resolver,
    settings: {
      nodeName: config.nodeName,
      datacenter: config.datacenter,
      primaryDatacenter: config.primaryDatacenter,
      defaultPolicy: config.defaultPolicy,
      downPolicy: config.downPolicy,
      tokenMinExpirationTtlMs: config.tokenMinExpirationTtlMs,
      tokenMaxExpirationTtlMs: config.tokenMaxExpirationTtlMs,
      replicationReadYourWritesWaitMs: config.replication.readYourWritesWaitMs,
      // Fewer than the connections, so held queries never take the last ones.
      blockingQueriesMax: Math.min(20_000, Math.max(1, httpConnections - 64)),
    },
    log: log.child({ module: 'http' }),
    now,
    closing: closing.signal,
    oidcStates: OidcStateSealer.create(config.clusterKey),
    audit,
    rateLimiter: new RateLimiter(config.limits.rates, log.child({ module: 'http', limiter: 'rate' })),
    datacenters: () => started.datacenters(),
    forwarder,
    replication: replicator,
    metrics,
    restorer,
  })
  const reaper = new TokenReaper(state, replica, { intervalMs: 1_000, batchSizeMax: 4_096, now, log: log.child({ module: 'token-reaper' }) })
  reaper.start()
  const linkController = new LinkController({
    state,
    cluster: replica,
    log: log.child({ module: 'link-controller' }),
    now,
    check: { managementPlaneUrl: config.cloud.managementPlaneUrl },
  })
  linkController.start()
  replicator?.start()
  // requestTimeout bounds the arrival of a whole request, headers and body, not its answer: a blocking query is
  // complete with its headers and may then wait its 10 minutes. A body a route never reads (a GET with a trickling
  // Content-Length) would otherwise hold its connection for as long as this allows. Bodies a route reads have their
  // own 30 s (body.ts). No Host header is needed: nothing here routes by host, and Node's refusal was not JSON.
  const serverOptions = { requestTimeout: 60_000, headersTimeout: 60_000, maxHeaderSize: 64 * 1024, requireHostHeader: false }
  const handler = skipRefusedConnections(boundPipelining(app.callback()))
  forwarder?.serve(inProcessHttp(handler))
  const httpLog = log.child({ module: 'http' })
  const listeners = [config.httpAddr, config.httpsAddr].filter((address) => address !== undefined).length
  /** Plain HTTP and HTTPS are configured alike, and share the node's bound on connections. */
  const prepare = (server: Server, secure: boolean): Server => {
    server.keepAliveTimeout = 30_000
    server.on('clientError', answerClientError)
    server.on('checkExpectation', answerExpectation)
    server.maxConnections = Math.max(1, Math.floor(httpConnections / listeners))
    // Within that, a share per client address (limits.http_max_conns_per_client; loopback included).
    const refused = (client: string): void => auditRefusedConnection(audit, { nodeName: config.nodeName, now, log: httpLog }, client)
    limitConnectionsPerClient(server, config.limits.httpMaxConnsPerClient, httpLog, refused, secure)
    return server
  }
  const servers: Server[] = []
  let httpAddress: string | undefined
  let httpsAddress: string | undefined
  let httpsServer: ReturnType<typeof createHttpsServer> | undefined
  try {
    if (config.httpAddr !== undefined) {
      const server = prepare(createHttpServer(serverOptions, handler), false)
      const bound = await listen(server, config.httpAddr.host, config.httpAddr.port)
      servers.push(server)
      httpAddress = formatAddress({ host: config.httpAddr.host, port: bound.port })
    }
    if (config.httpsAddr !== undefined && tls !== undefined && config.tls !== undefined) {
      httpsServer = createHttpsServer({ ...serverOptions, ...httpsOptions(tls, config.tls.verifyIncoming) }, handler)
      // A failed TLS handshake (no client certificate under verify_incoming, another CA) is the client's problem.
      httpsServer.on('tlsClientError', (error: Error & { code?: string }) => httpLog.debug({ err: error.message, code: error.code }, 'HTTPS handshake failed'))
      prepare(httpsServer, true)
      const bound = await listen(httpsServer, config.httpsAddr.host, config.httpsAddr.port)
      servers.push(httpsServer)
      httpsAddress = formatAddress({ host: config.httpsAddr.host, port: bound.port })
    }
  } catch (error) {
    // A port in use: close what was bound and the rest of the agent, then report.
    for (const server of servers) server.close()
    closing.abort()
    restorer.stop()
    await reaper.stop()
    await linkController.stop()
    const replicating = replicator?.stop()
    await started.stop()
    await replicating
    await state.close()
    await audit?.close()
    throw error
  }

  const reloadTls = (): boolean => {
    if (config.tls === undefined || tls === undefined) return false
    const warnings: ConfigWarning[] = []
    const next = loadTls(config, warnings)
    if (next === undefined) return false
    for (const warning of warnings) log.warn({ setting: warning.setting }, warning.message)
    httpsServer?.setSecureContext(httpsOptions(next, config.tls.verifyIncoming))
    started.reloadTls(next)
    tls = next
    log.info(next.summary, 'TLS certificates reloaded')
    return true
  }

  let stopping: Promise<void> | undefined
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      // Stop accepting, release blocking queries, let requests in flight finish, then close the stores.
      closing.abort()
      const httpClosed = Promise.all(servers.map((server) => new Promise<void>((resolve) => server.close(() => resolve()))))
      // Connections become idle as their last request is answered (blocking queries answer at once now): close each
      // as soon as it is idle, and whatever is still busy after five seconds.
      const closeIdle = (): void => servers.forEach((server) => server.closeIdleConnections())
      closeIdle()
      const idleSweep = setInterval(closeIdle, 50)
      const forced = setTimeout(() => servers.forEach((server) => server.closeAllConnections()), 5_000)
      await httpClosed
      clearInterval(idleSweep)
      clearTimeout(forced)
      restorer.stop()
      await reaper.stop()
      await linkController.stop()
      // The replication loop may be waiting on the primary's blocking query (minutes): stopping the WAN links below
      // ends that wait, so the loop is told to stop first and awaited after.
      const replicating = replicator?.stop()
      await started.stop()
      await replicating
      await state.close()
      // Last: the outcome lines of the requests answered above are written before the file closes.
      await audit?.close()
      if (temporary) await rm(dataDir, { recursive: true, force: true })
    })()
    return stopping
  }
  return { httpAddress, httpsAddress, clusterAddress, dataDir, managementToken, managementTokenGenerated: devToken?.generated === true, reloadTls, stop }
}
