/**
 * Requests Node's HTTP parser refuses before Koa sees them (a malformed request line or header, headers over the
 * limit, a request that did not arrive in time) are answered in the one JSON error shape, as every other error is,
 * instead of Node's bare status line. No request object exists then, so the answer is written to the socket.
 */
import { STATUS_CODES } from 'node:http'
import type { Duplex } from 'node:stream'

export function answerClientError(error: Error & { code?: string }, socket: Duplex): void {
  // A client that is gone, or a socket that already carries an answer, gets nothing more.
  if (error.code === 'ECONNRESET' || !socket.writable) {
    socket.destroy()
    return
  }
  const [status, message] =
    error.code === 'HPE_HEADER_OVERFLOW'
      ? [431, 'headers: must be at most 64 KiB together, the request line included']
      : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, 'request: its headers did not arrive in time']
        : [400, `request: is not valid HTTP/1.1 (${error.code ?? 'parse error'})`]
  const body = JSON.stringify({ Error: message, Code: 'invalid_input' })
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  )
}
