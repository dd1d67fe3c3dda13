/**
 * Stand-ins for the identity services auth methods talk to (a JWKS or OIDC provider, the Kubernetes TokenReview API):
 * real HTTPS servers on 127.0.0.1 with a self-signed certificate, answering what each test tells them to.
 */
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse, type Server as HttpServer } from 'node:http'
import { createServer, type Server } from 'node:https'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { exportJWK, generateKeyPair, type CryptoKey, type JWK } from 'jose'

export interface KeyPair {
  publicKey: CryptoKey
  privateKey: CryptoKey
  jwk: JWK
}

export interface Double {
  url: string
  server: Server | HttpServer
  close(): Promise<void>
}

/** A self-signed certificate for 127.0.0.1, valid for a day: the CA the auth methods trust. */
export function makeCertificate(): { cert: string; key: string } {
  const directory = mkdtempSync(join(tmpdir(), 'warden-login-tls-'))
  try {
    execFileSync(
      'openssl',
      ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1', '-subj', '/CN=127.0.0.1',
        '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', join(directory, 'key.pem'), '-out', join(directory, 'cert.pem')],
      { stdio: 'ignore' },
    )
    return { cert: readFileSync(join(directory, 'cert.pem'), 'utf8'), key: readFileSync(join(directory, 'key.pem'), 'utf8') }
  } finally {
    rmSync(directory, { recursive: true, force: true })
  }
}

/**
 * An HTTPS server whose every answer `handle` decides. The body reaches it parsed: JSON as a value, a form as a
 * record of its fields, nothing as undefined. The answer is JSON, or with `contentType` the body's text as it is.
 */
export async function startDouble(
  /** Without a certificate, plain HTTP. */
  tls: { cert: string; key: string } | undefined,
  handle: (method: string, path: string, body: any, headers: Record<string, unknown>) => { status: number; body: unknown; contentType?: string; delayMs?: number },
): Promise<Double> {
  const serve = (request: IncomingMessage, response: ServerResponse): void => {
    const chunks: Buffer[] = []
    request.on('data', (chunk: Buffer) => chunks.push(chunk))
    request.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8')
      const form = String(request.headers['content-type'] ?? '').startsWith('application/x-www-form-urlencoded')
      const body = text === '' ? undefined : form ? Object.fromEntries(new URLSearchParams(text)) : JSON.parse(text)
      const answer = handle(request.method ?? 'GET', request.url ?? '/', body, request.headers)
      // JSON unless the handler names another type, for which its body is the text as sent (STS answers XML).
      const send = (): void => {
        response.writeHead(answer.status, { 'Content-Type': answer.contentType ?? 'application/json' })
        response.end(answer.contentType === undefined ? JSON.stringify(answer.body) : String(answer.body))
      }
      // A slow service: the answer leaves after delayMs (closeAllConnections at close ends any still waiting).
      if (answer.delayMs === undefined) send()
      else setTimeout(send, answer.delayMs).unref()
    })
  }
  const server = tls === undefined ? createHttpServer(serve) : createServer(tls, serve)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `${tls === undefined ? 'http' : 'https'}://127.0.0.1:${port}`,
    server,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}

export async function keyPair(kid: string): Promise<KeyPair> {
  const { publicKey, privateKey } = await generateKeyPair('RS256', { extractable: true })
  return { publicKey, privateKey, jwk: { ...(await exportJWK(publicKey)), kid, alg: 'RS256', use: 'sig' } }
}
