/**
 * The web UI: the files `npm run build` bundles from ui/ into dist/ui (ui/build.mjs), served at /ui/ by every agent,
 * with no token (the page holds none until the user signs in, and the files are the same for everyone). `/`
 * redirects to `/ui/`, and any other path under /ui/ answers index.html, so that the app's own addresses
 * (/ui/tokens/<id>) can be reloaded and shared.
 *
 * The files are read once, on the first request that finds them, and kept in memory with their gzipped form (the
 * whole UI is some tens of kilobytes): a rebuild under a running agent is not seen until it restarts, and the agent
 * never serves an index.html naming assets it no longer has. Asset names carry a hash of their content, so browsers
 * may keep them a year; index.html is revalidated on every load (no-cache, with an ETag).
 *
 * Every answer under /ui/ carries a content security policy that allows nothing but this agent: no inline script or
 * style, no eval, no other origin to fetch from, and no framing (clickjacking).
 */
import { createHash } from 'node:crypto'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { gzipSync } from 'node:zlib'
import Router from '@koa/router'
import type { Context } from 'koa'
import { WardenError } from '../../lib/errors.js'

/** dist/ui at the package's root: three levels up from src/http/routes (tsx) and from dist/http/routes alike. */
export const UI_DIRECTORY = fileURLToPath(new URL('../../../dist/ui/', import.meta.url))

export const CONTENT_SECURITY_POLICY = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ')

const IMMUTABLE = 'public, max-age=31536000, immutable'
const REVALIDATE = 'no-cache'

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.woff2': 'font/woff2',
}

interface StaticFile {
  body: Buffer
  gzipped: Buffer | undefined
  type: string
  etag: string
}

interface Bundle {
  index: StaticFile
  /** By file name: assets/ is flat, so a name is never a path (nothing outside it can be named). */
  assets: Map<string, StaticFile>
}

function staticFile(body: Buffer, name: string): StaticFile {
  const extension = /\.[a-z0-9]+$/.exec(name)?.[0] ?? ''
  const type = TYPES[extension] ?? 'application/octet-stream'
  const gzipped = type.startsWith('text/') || type === 'image/svg+xml' ? gzipSync(body, { level: 9 }) : undefined
  return { body, gzipped: gzipped !== undefined && gzipped.length < body.length ? gzipped : undefined, type, etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"` }
}

function load(directory: string): Bundle | undefined {
  const indexPath = join(directory, 'index.html')
  if (!existsSync(indexPath)) return undefined
  const assets = new Map<string, StaticFile>()
  const assetDirectory = join(directory, 'assets')
  if (existsSync(assetDirectory)) {
    for (const entry of readdirSync(assetDirectory, { withFileTypes: true })) {
      if (entry.isFile()) assets.set(entry.name, staticFile(readFileSync(join(assetDirectory, entry.name)), entry.name))
    }
  }
  return { index: staticFile(readFileSync(indexPath), 'index.html'), assets }
}

function securityHeaders(ctx: Context): void {
  ctx.set('Content-Security-Policy', CONTENT_SECURITY_POLICY)
  ctx.set('X-Content-Type-Options', 'nosniff')
  ctx.set('X-Frame-Options', 'DENY')
  ctx.set('Referrer-Policy', 'no-referrer')
  ctx.set('Cross-Origin-Opener-Policy', 'same-origin')
  ctx.set('Cross-Origin-Resource-Policy', 'same-origin')
}

function send(ctx: Context, file: StaticFile, cacheControl: string): void {
  ctx.set('Cache-Control', cacheControl)
  ctx.set('Vary', 'Accept-Encoding')
  ctx.etag = file.etag
  ctx.type = file.type
  ctx.status = 200
  if (ctx.fresh) {
    ctx.status = 304
    return
  }
  if (file.gzipped !== undefined && ctx.acceptsEncodings('gzip', 'identity') === 'gzip') {
    ctx.set('Content-Encoding', 'gzip')
    ctx.body = file.gzipped
  } else {
    ctx.body = file.body
  }
}

export function uiRoutes(router: Router, directory = UI_DIRECTORY): void {
  let bundle: Bundle | undefined
  const loaded = (): Bundle => {
    bundle ??= load(directory)
    if (bundle === undefined) throw new WardenError('not_found', `the web UI is not built (no ${join(directory, 'index.html')}): run npm run build`)
    return bundle
  }
  const index = (ctx: Context): void => {
    securityHeaders(ctx)
    send(ctx, loaded().index, REVALIDATE)
  }
  router.get('/', (ctx) => {
    ctx.redirect('/ui/')
  })
  // The app's relative addresses resolve against /ui/, not /ui.
  router.get('/ui', (ctx) => {
    if (ctx.path === '/ui') ctx.redirect('/ui/')
    else index(ctx)
  })
  router.get('/ui/', index)
  router.get('/ui/assets/:name', (ctx) => {
    securityHeaders(ctx)
    const file = loaded().assets.get(ctx.params.name ?? '')
    if (file === undefined) throw new WardenError('not_found', `no web UI asset ${ctx.path}`)
    send(ctx, file, IMMUTABLE)
  })
  router.get('/ui/*path', index)
}
