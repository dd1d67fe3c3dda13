/**
 * The agent: opens the data dir, recovers the state from the log, writes the built-ins on a new cluster, binds the
 * cluster and HTTP listeners, and stops in the reverse order. Start and stop are the only places that know the order
 * of the parts.
 */
import { mkdtemp, mkdir, readFile, rm, writeFile } from 'node:fs/promises'
import { createServer as createHttpServer, type Server } from 'node:http'
import { createServer as createTcpServer, type AddressInfo, type Server as TcpServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Logger } from 'pino'
import { newUuid, formatTime } from '../lib/ids.js'
import { LogStore } from '../raft/storage/log-store.js'
import { SingleNodeReplica } from '../replica/single-node.js'
import { StateStore } from '../state/store.js'
export { UnknownCommandError } from '../state/store.js'
import { COMMAND_VERSION, type TokenCreate } from '../state/commands.js'
import { DEFAULT_NAMESPACE } from '../state/records.js'
import { getByUnique, secretDigest, tokenSpec } from '../state/tables.js'
import { TokenResolver } from '../acl/resolver.js'
import { createApp } from '../http/app.js'
import { cloudSettingsProblem, LinkController, linkFromSettings } from '../controllers/link-controller.js'
import { TokenReaper } from '../controllers/token-reaper.js'
import { ConfigError, formatAddress, type AgentConfig } from './config.js'

export interface RunningAgent {
  httpAddress: string
  clusterAddress: string
  dataDir: string
  managementToken: string | undefined
  stop(): Promise<void>
}

function managementTokenRecord(secret: string, description: string, nowMs: number): TokenCreate {
  return {
    AccessorID: newUuid(),
    SecretID: secret,
    Description: description,
    Policies: [],
    Roles: [],
    TemplatedPolicies: [],
    ServiceIdentities: [],
    NodeIdentities: [],
    Local: false,
    AuthMethod: '',
    CreateTime: formatTime(nowMs),
    Namespace: DEFAULT_NAMESPACE,
  }
}

async function prepareDataDir(config: AgentConfig): Promise<{ dataDir: string; temporary: boolean }> {
  if (config.dataDir !== undefined) {
    await mkdir(config.dataDir, { recursive: true, mode: 0o700 })
    return { dataDir: config.dataDir, temporary: false }
  }
  return { dataDir: await mkdtemp(join(tmpdir(), 'warden-dev-')), temporary: true }
}

/** In --dev without a configured token, the token of an earlier run of the same data dir, or a new one. */
async function devManagementToken(dataDir: string): Promise<string> {
  const path = join(dataDir, 'management-token')
  try {
    const existing = (await readFile(path, 'utf8')).trim()
    if (existing !== '') return existing
  } catch {
    // No earlier token: generate one below.
  }
  const secret = newUuid()
  await writeFile(path, `${secret}\n`, { mode: 0o600 })
  return secret
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

export async function startAgent(config: AgentConfig, log: Logger, onFatal: (error: unknown) => void): Promise<RunningAgent> {
  if (Object.keys(config.peers).length > 0 || config.join.length > 0) {
    throw new ConfigError('--peer/--join: multi-node clusters need the Raft replica, which this version does not have yet')
  }
  const cloudProblem = cloudSettingsProblem(config.cloud)
  if (cloudProblem !== undefined) throw new ConfigError(cloudProblem)
  const { dataDir, temporary } = await prepareDataDir(config)
  const managementToken = config.initialManagementToken ?? (config.dev ? await devManagementToken(dataDir) : undefined)
  const log_ = await LogStore.open(join(dataDir, 'log'))
  const state = await StateStore.open(join(dataDir, 'state'))

  // The cluster listener: peers will speak Raft here. Until then it accepts no peer: every connection is closed.
  const clusterServer = createTcpServer((socket) => socket.destroy())
  const clusterBound = await listen(clusterServer, config.clusterAddr.host, config.clusterAddr.port)
  const clusterAddress = formatAddress({ host: config.clusterAddr.host, port: clusterBound.port })

  const replica = new SingleNodeReplica(log_, state, config.nodeName, clusterAddress, onFatal)
  await replica.recover()
  const now = Date.now
  if (replica.logIsEmpty) {
    const bootstrapToken = managementToken === undefined ? undefined : managementTokenRecord(managementToken, 'Initial Management Token', now())
    await replica.propose({ v: COMMAND_VERSION, type: 'acl.init', ...(bootstrapToken === undefined ? {} : { bootstrapToken }) })
  } else if (managementToken !== undefined && (await getByUnique(state.reader, tokenSpec, 'secret', secretDigest(managementToken))) === undefined) {
    // A management token configured after the cluster was created is added, as Consul's leader does.
    await replica.propose({ v: COMMAND_VERSION, type: 'acl.token.ensure', token: managementTokenRecord(managementToken, 'Initial Management Token', now()) })
  }
  // The cloud settings are written as the link at every start, over a link written earlier through the API (api.md).
  const configuredLink = linkFromSettings(config.cloud, now())
  if (configuredLink !== undefined) await replica.propose({ v: COMMAND_VERSION, type: 'link.set', link: configuredLink })

  const closing = new AbortController()
  const app = createApp({
    state,
    cluster: replica,
    resolver: new TokenResolver(state, { datacenter: config.datacenter, defaultPolicy: config.defaultPolicy }),
    settings: {
      nodeName: config.nodeName,
      datacenter: config.datacenter,
      primaryDatacenter: config.primaryDatacenter,
      defaultPolicy: config.defaultPolicy,
      downPolicy: config.downPolicy,
      tokenMinExpirationTtlMs: config.tokenMinExpirationTtlMs,
      tokenMaxExpirationTtlMs: config.tokenMaxExpirationTtlMs,
      blockingQueriesMax: 20_000,
    },
    log: log.child({ module: 'http' }),
    now,
    closing: closing.signal,
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
  const httpServer = createHttpServer({ requestTimeout: 15 * 60_000, headersTimeout: 60_000, maxHeaderSize: 64 * 1024 }, app.callback())
  httpServer.keepAliveTimeout = 30_000
  // Bounded like everything else: enough for the blocking queries the node allows, and then some.
  httpServer.maxConnections = 32_768
  const httpBound = await listen(httpServer, config.httpAddr.host, config.httpAddr.port)
  const httpAddress = formatAddress({ host: config.httpAddr.host, port: httpBound.port })

  let stopping: Promise<void> | undefined
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      // Stop accepting, release blocking queries, let requests in flight finish, then close the stores.
      closing.abort()
      const httpClosed = new Promise<void>((resolve) => httpServer.close(() => resolve()))
      httpServer.closeIdleConnections()
      const forced = setTimeout(() => httpServer.closeAllConnections(), 5_000)
      await httpClosed
      clearTimeout(forced)
      await new Promise<void>((resolve) => clusterServer.close(() => resolve()))
      await reaper.stop()
      await linkController.stop()
      await replica.stop()
      await state.close()
      await log_.close()
      if (temporary) await rm(dataDir, { recursive: true, force: true })
    })()
    return stopping
  }
  return { httpAddress, clusterAddress, dataDir, managementToken, stop }
}
