#!/usr/bin/env node
// Bundles the web UI (ui/src) into dist/ui, which every agent serves at /ui/ (src/http/routes/ui.ts): index.html,
// and under assets/ the script, the style sheet and the icon, each named by a hash of its content so the agent can
// tell browsers to keep them for a year. Run by `npm run build` (and so by `npm ci`). Plain JavaScript, so that it
// needs nothing but esbuild. Type checking is `npm run typecheck`'s job (ui/tsconfig.json); esbuild only strips types.
import { createHash } from 'node:crypto'
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { basename, join } from 'node:path'
import { gzipSync } from 'node:zlib'
import { build } from 'esbuild'

const root = new URL('..', import.meta.url).pathname
const source = join(root, 'ui')
const out = join(root, 'dist/ui')
const assets = join(out, 'assets')

/** The whole UI, gzipped, must stay under this (issue 21). */
const BUDGET_GZIP_BYTES = 200 * 1024

rmSync(out, { recursive: true, force: true })
mkdirSync(assets, { recursive: true })

const result = await build({
  entryPoints: { app: join(source, 'src/main.tsx') },
  bundle: true,
  minify: true,
  format: 'esm',
  target: ['es2022', 'chrome100', 'firefox100', 'safari15'],
  jsx: 'automatic',
  jsxImportSource: 'preact',
  outdir: assets,
  entryNames: '[name]-[hash]',
  assetNames: '[name]-[hash]',
  legalComments: 'none',
  metafile: true,
  logLevel: 'warning',
  // The UI talks only to the agent that served it; nothing may be fetched from elsewhere at run time.
  platform: 'browser',
})

const outputs = Object.keys(result.metafile.outputs).map((path) => basename(path))
const script = outputs.find((name) => name.endsWith('.js'))
const style = outputs.find((name) => name.endsWith('.css'))
if (script === undefined || style === undefined) throw new Error(`ui build: expected a .js and a .css output, got ${outputs.join(', ')}`)

const icon = readFileSync(join(source, 'src/icon.svg'))
const iconName = `icon-${createHash('sha256').update(icon).digest('hex').slice(0, 8).toUpperCase()}.svg`
writeFileSync(join(assets, iconName), icon)

const html = readFileSync(join(source, 'index.html'), 'utf8')
  .replace('{{script}}', `/ui/assets/${script}`)
  .replace('{{style}}', `/ui/assets/${style}`)
  .replace('{{icon}}', `/ui/assets/${iconName}`)
if (html.includes('{{')) throw new Error('ui build: index.html has a placeholder left')
writeFileSync(join(out, 'index.html'), html)

let gzipBytes = gzipSync(html).length
for (const name of [script, style, iconName]) gzipBytes += gzipSync(readFileSync(join(assets, name))).length
if (gzipBytes > BUDGET_GZIP_BYTES) throw new Error(`ui build: ${gzipBytes} bytes gzipped, over the budget of ${BUDGET_GZIP_BYTES}`)
if (process.argv.includes('--size')) process.stdout.write(`ui: ${(gzipBytes / 1024).toFixed(1)} KiB gzipped (${script}, ${style}, ${iconName}, index.html)\n`)
