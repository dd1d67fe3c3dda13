/**
 * Requests Node's HTTP parser refuses before Koa sees them (a malformed request line or header, headers over the
 * limit, a request that did not arrive in time) are answered in the one JSON error shape, as every other error is,
 * instead of Node's bare status line. No request object exists then, so the answer is written to the socket.
 */
import { STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http'
import type { Duplex } from 'node:stream'
import { errorBody } from './errors.js'

export function answerClientError(error: Error & { code?: string }, socket: Duplex): void {
  // A client that is gone gets nothing more; nor does a socket whose current request (a blocking query before a
  // pipelined bad one) is still being answered, since this answer would read as that request's (below).
  const inProgress = (socket as Duplex & { _httpMessage?: ServerResponse | null })._httpMessage
  if (error.code === 'ECONNRESET' || !socket.writable) {
    socket.destroy()
    return
  }
  if (inProgress !== undefined && inProgress !== null) {
    // The bad bytes are the current request's own (the connection ended in the middle of its body): that body will
    // never arrive, so nothing waits for it, and the body budget it holds (body.ts) is released now rather than when
    // its 30 s run out. Destroying the socket aborts the request, which is what its reader waits for.
    if (!inProgress.req.complete) {
      socket.destroy()
      return
    }
    // The request before the bad bytes may already have been acted on (a write applied): its answer still goes out,
    // then the connection closes. Nothing more is read meanwhile.
    socket.pause()
    if (inProgress.writableFinished) socket.destroy()
    else inProgress.once('close', () => socket.destroy())
    return
  }
  const [status, message] =
    error.code === 'HPE_HEADER_OVERFLOW'
      ? [431, 'headers: must be at most 64 KiB together, the request line included']
      : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, 'request: its headers did not arrive in time']
        : [400, `request: is not valid HTTP/1.1 (${error.code ?? 'parse error'})`]
  const body = JSON.stringify(errorBody('invalid_input', message))
  // Closed once written, whether or not the client closes its side.
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    () => socket.destroy(),
  )
}

/**
 * `Expect` other than `100-continue`: Node would answer a bare 417. The same JSON shape instead, and the connection
 * is kept (the request was well formed).
 */
export function answerExpectation(request: IncomingMessage, response: ServerResponse): void {
  const expectation = String(request.headers.expect ?? '').slice(0, 64)
  const body = JSON.stringify(errorBody('invalid_input', `Expect: ${JSON.stringify(expectation)} is not supported (only 100-continue)`, 'Expect'))
  response.writeHead(417, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) }).end(body)
}
