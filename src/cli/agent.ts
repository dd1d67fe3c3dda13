/**
 * `warden agent [flags]`: runs a server until SIGTERM or SIGINT; SIGHUP reloads the TLS certificate files. Exit codes: 0 after a clean stop, 1 when the agent
 * fails while running or cannot start, 2 for a bad flag or config value (one line naming it), 3 when the log holds a
 * command this version cannot apply (upgrade the node; restarting it will not help).
 */
import { loadConfig, ConfigError } from '../agent/config.js'
import type { RunningAgent } from '../agent/agent.js'
import { createLogger } from '../agent/logger.js'
import { startAgent, UnknownCommandError } from '../agent/agent.js'

/** Exit code when the log holds a command newer than this build: restarting will not help, upgrading will. */
const EXIT_UNKNOWN_COMMAND = 3

export const AGENT_USAGE = `usage: warden agent [--dev] [--config-file FILE] [--node-name NAME] [--datacenter DC]
                    [--primary-datacenter DC] [--data-dir DIR] [--http-addr HOST:PORT|off]
                    [--https-addr HOST:PORT] [--tls-ca-file FILE --tls-cert-file FILE --tls-key-file FILE]
                    [--tls-verify-incoming] [--cluster-addr HOST:PORT] [--peer NAME=HOST:PORT ...] [--join HOST:PORT ...]
                    [--cluster-key SECRET | --cluster-key-file FILE]
                    [--cluster-key-accept SECRET ... | --cluster-key-accept-file FILE]
                    [--http-max-conns-per-client N] [--audit-log FILE]
                    [--initial-management-token SECRET | --initial-management-token-file FILE]
                    [--default-policy allow|deny] [--down-policy POLICY] [--log-level LEVEL]`

export async function runAgent(rest: string[]): Promise<number> {
  if (rest.some((word) => /^--?(h|help)$/.test(word))) {
    process.stdout.write(`${AGENT_USAGE}\n`)
    return 0
  }
  let config
  try {
    config = loadConfig(rest, process.env)
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`warden: ${error.message}\n`)
      return 2
    }
    throw error
  }
  const log = createLogger(config.nodeName, config.logLevel)
  const fatal = (error: unknown): void => {
    if (error instanceof UnknownCommandError) {
      // Met while applying the log, at start or later: a distinct exit code, so a supervisor can tell "upgrade this
      // node" from a failure worth retrying.
      log.fatal({ err: error }, 'the log holds a command this version cannot apply')
      process.stderr.write(`warden: ${error.message}\n`)
      process.exit(EXIT_UNKNOWN_COMMAND)
    }
    log.fatal({ err: error }, 'the agent cannot continue')
    process.exit(1)
  }
  // Signals are caught from the start: one that arrives while the agent is starting stops it once it has started.
  let signalled: string | undefined
  let onSignal: (signal: string) => void = (signal) => {
    signalled ??= signal
  }
  process.on('SIGTERM', () => onSignal('SIGTERM'))
  process.on('SIGINT', () => onSignal('SIGINT'))
  // SIGHUP would otherwise end the process; before the agent is up there is nothing to reload (it reads the files).
  let onHangup: () => void = () => undefined
  process.on('SIGHUP', () => onHangup())
  let agent
  try {
    agent = await startAgent(config, log, fatal)
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`warden: ${error.message}\n`)
      return 2
    }
    if (error instanceof UnknownCommandError) {
      // A distinct exit code, so a supervisor can tell "upgrade this node" from a failure worth retrying.
      log.fatal({ err: error }, 'the log holds a command this version cannot apply')
      process.stderr.write(`warden: ${error.message}\n`)
      return EXIT_UNKNOWN_COMMAND
    }
    log.fatal({ err: error }, 'the agent could not start')
    process.stderr.write(`warden: could not start: ${(error as Error).message}\n`)
    return 1
  }
  if (agent.managementTokenGenerated && agent.managementToken !== undefined) {
    // Printed once, when generated, for the operator, never into the log; a restart finds it in the data dir.
    process.stdout.write(`Management token: ${agent.managementToken}\n`)
  }
  log.info(
    { http: agent.httpAddress, https: agent.httpsAddress, cluster: agent.clusterAddress, datacenter: config.datacenter, dataDir: agent.dataDir },
    'agent ready',
  )
  const running = agent
  onHangup = () => reloadOnHangup(running, log)
  return new Promise<number>((resolve) => {
    let stopping = false
    onSignal = (signal) => {
      if (stopping) return
      stopping = true
      log.info({ signal }, 'stopping')
      running.stop().then(
        () => {
          log.info('stopped')
          resolve(0)
        },
        (error: unknown) => {
          log.error({ err: error }, 'unclean stop')
          resolve(1)
        },
      )
    }
    if (signalled !== undefined) onSignal(signalled)
  })
}

/** SIGHUP: the TLS files again. A bad new file is logged with its problem, and the files in use stay in use. */
function reloadOnHangup(agent: RunningAgent, log: ReturnType<typeof createLogger>): void {
  try {
    if (!agent.reloadTls()) log.info('SIGHUP: nothing to reload (no TLS files are configured)')
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error
    log.error({ problem: error.message }, 'SIGHUP: the TLS files were not reloaded; the ones in use stay in use')
  }
}
