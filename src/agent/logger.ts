/**
 * The root logger: JSON lines on stdout with the node's name, and secrets redacted by path so that a SecretID, the
 * cluster key or a link's clientSecret never reaches a log even when a record is logged whole.
 */
import { pino, type Logger } from 'pino'

export const REDACTED_PATHS = [
  'SecretID',
  '*.SecretID',
  'token.SecretID',
  'clusterKey',
  '*.clusterKey',
  'initialManagementToken',
  '*.initialManagementToken',
  'clientSecret',
  '*.clientSecret',
  'data.clientSecret',
  'req.headers["x-service-token"]',
  // Consul's name for the same header, which warden accepts as an alias (src/http/headers.ts).
  'req.headers["x-consul-token"]',
  'req.headers.authorization',
]

export function createLogger(nodeName: string, level: string): Logger {
  return pino({
    level,
    base: { node: nodeName },
    redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
    timestamp: pino.stdTimeFunctions.isoTime,
  })
}
