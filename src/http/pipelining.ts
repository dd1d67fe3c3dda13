/**
 * A bound on pipelined requests per connection. HTTP/1.1 lets a client send requests without reading the answers,
 * and Node parses every request that arrived in one read and queues their answers: 500 GETs of a large list in one
 * write held megabytes per connection until the client read them. Clients do not pipeline in practice (browsers,
 * Go's and Node's clients wait for each answer), so past PIPELINED_MAX unanswered requests on one connection the
 * next is answered 429 in the one JSON shape, and the connection is closed after it.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import { errorBody, STATUS_BY_CODE } from './errors.js'

export const PIPELINED_MAX = 16

/** Unanswered requests on a socket, kept on the socket itself (cheaper than a WeakMap lookup per request). */
const UNANSWERED = Symbol('warden.unanswered')
type Counted = { [UNANSWERED]?: number }

export function boundPipelining(handler: (request: IncomingMessage, response: ServerResponse) => unknown): (request: IncomingMessage, response: ServerResponse) => void {
  return (request, response) => {
    const socket = request.socket as IncomingMessage['socket'] & Counted
    const unanswered = (socket[UNANSWERED] ?? 0) + 1
    socket[UNANSWERED] = unanswered
    response.once('close', () => {
      socket[UNANSWERED] = (socket[UNANSWERED] ?? 1) - 1
    })
    if (unanswered > PIPELINED_MAX) {
      const body = JSON.stringify(errorBody('rate_limited', `request: more than ${PIPELINED_MAX} requests are waiting for their answers on this connection; read them first`))
      response.writeHead(STATUS_BY_CODE.rate_limited, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body), Connection: 'close' }).end(body)
      return
    }
    void handler(request, response)
  }
}
