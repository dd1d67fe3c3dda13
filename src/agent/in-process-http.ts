/**
 * Serves requests forwarded from another datacenter (rpc/dc-forward.ts) through this agent's own HTTP stack, in
 * process: an http.Server that never listens gets one end of an in-memory connection per request, and the API
 * client sends the request over the other end. So a forwarded request meets exactly what a local one meets (routes,
 * ACLs, consistency, blocking queries, errors, the audit log), without a port another local user could reach and
 * without TLS settings that would otherwise have to admit it.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import { Client } from '../api/client.js'
import { ConnectionError } from '../api/errors.js'
import { duplexPair } from '../lib/duplex-pair.js'
import { WardenError } from '../lib/errors.js'
import { ANSWER_BYTES_MAX, type ForwardedAnswer, type ForwardedRequest } from '../rpc/dc-forward.js'
import { answerClientError, answerExpectation } from '../http/client-errors.js'

/** Beyond a blocking query's longest wait (10 min and its jitter): the exchange's own deadline. */
const EXCHANGE_TIMEOUT_MS = 11 * 60_000

export function inProcessHttp(handler: (request: IncomingMessage, response: ServerResponse) => void): (request: ForwardedRequest, from: string) => Promise<ForwardedAnswer> {
  const server = createServer({ requestTimeout: 0, headersTimeout: 60_000, maxHeaderSize: 64 * 1024, requireHostHeader: false }, handler)
  server.on('clientError', answerClientError)
  server.on('checkExpectation', answerExpectation)
  return async (request, from) => {
    // The connection's remote address names the server that forwarded it (`wan:n1.dc2`): what the audit log records.
    const client = new Client({
      // Names the server in messages only: createConnection opens every connection.
      address: 'localhost:1',
      keepAlive: false,
      responseBytesMax: ANSWER_BYTES_MAX,
      createConnection: () => {
        const [clientEnd, serverEnd] = duplexPair(`wan:${from}`)
        server.emit('connection', serverEnd)
        return clientEnd
      },
    })
    try {
      const answer = await client.request(request.method, request.path, {
        token: null,
        headers: request.headers,
        ...(request.body === undefined ? {} : { raw: request.body }),
        timeoutMs: EXCHANGE_TIMEOUT_MS,
      })
      const headers: Record<string, string> = {}
      for (const [name, value] of Object.entries(answer.headers)) if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(', ') : value
      return { status: answer.status, headers, body: Buffer.from(answer.text, 'utf8') }
    } catch (error) {
      if (error instanceof ConnectionError && error.reason === 'too_large') {
        const text = JSON.stringify({ Error: `the answer is over ${ANSWER_BYTES_MAX} bytes, more than a request forwarded between datacenters carries; narrow it (filter, a smaller list)`, Code: 'payload_too_large' })
        return { status: 413, headers: { 'content-type': 'application/json' }, body: Buffer.from(text) }
      }
      // A write may have been applied before the exchange failed: its outcome is unknown, never a plain failure.
      const write = request.method !== 'GET' && request.method !== 'HEAD'
      throw new WardenError(write ? 'outcome_unknown' : 'internal', `a forwarded request could not be served: ${(error as Error).message}`)
    }
  }
}
