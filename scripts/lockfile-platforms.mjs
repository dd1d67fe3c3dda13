#!/usr/bin/env node
// The npm registry this project installs from may lack some platforms' builds of a package's native optional
// dependencies, so `npm install` writes a lock without them and `npm ci` then refuses the lock as out of sync. This
// re-adds their entries (optional, for other platforms: never fetched here). Run it after `npm install`.
// - msgpackr-extract (an optional native speed-up of msgpackr): msgpackr-extract-<os>-<cpu>, the non-Linux ones lacking.
// - esbuild (the UI's bundler, and tsx's): @esbuild/<os>-<cpu>, one binary per platform; all present today.
import { readFileSync, writeFileSync } from 'node:fs'

const parents = [
  { name: 'msgpackr-extract', pattern: /msgpackr-extract-(\w+)-(\w+)$/, license: 'MIT', engines: undefined },
  { name: 'esbuild', pattern: /^@esbuild\/(\w+)-(\w+)$/, license: 'MIT', engines: { node: '>=18' } },
]

const path = new URL('../package-lock.json', import.meta.url)
const lock = JSON.parse(readFileSync(path, 'utf8'))
for (const { name: parent, pattern, license, engines } of parents) {
  const entry = lock.packages[`node_modules/${parent}`]
  if (entry === undefined) continue
  for (const name of Object.keys(entry.optionalDependencies ?? {})) {
    const key = `node_modules/${name}`
    if (lock.packages[key] !== undefined) continue
    const [, platform, cpu] = pattern.exec(name) ?? []
    if (platform === undefined) {
      process.stderr.write(`lockfile-platforms: ${name} (of ${parent}) names no <os>-<cpu>: left out\n`)
      continue
    }
    lock.packages[key] = {
      version: entry.optionalDependencies[name],
      cpu: [cpu],
      ...(entry.dev === true ? { dev: true } : {}),
      license,
      optional: true,
      os: [platform],
      ...(engines === undefined ? {} : { engines }),
    }
  }
}
lock.packages = Object.fromEntries(Object.entries(lock.packages).sort(([a], [b]) => (a === '' ? -1 : b === '' ? 1 : a < b ? -1 : 1)))
writeFileSync(path, `${JSON.stringify(lock, null, 2)}\n`)
