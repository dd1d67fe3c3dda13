#!/usr/bin/env node
// The npm registry this project installs from lacks the non-Linux builds of msgpackr-extract (an optional native
// speed-up of msgpackr), so `npm install` writes a lock without them and `npm ci` then refuses the lock as out of sync.
// This re-adds their entries (optional, for other platforms: never fetched here). Run it after `npm install`.
import { readFileSync, writeFileSync } from 'node:fs'

const path = new URL('../package-lock.json', import.meta.url)
const lock = JSON.parse(readFileSync(path, 'utf8'))
const extract = lock.packages['node_modules/msgpackr-extract']
if (extract === undefined) process.exit(0)
for (const name of Object.keys(extract.optionalDependencies ?? {})) {
  const key = `node_modules/${name}`
  if (lock.packages[key] !== undefined) continue
  const [, platform, cpu] = /msgpackr-extract-(\w+)-(\w+)$/.exec(name) ?? []
  lock.packages[key] = { version: extract.optionalDependencies[name], cpu: [cpu], license: 'MIT', optional: true, os: [platform] }
}
lock.packages = Object.fromEntries(Object.entries(lock.packages).sort(([a], [b]) => (a === '' ? -1 : b === '' ? 1 : a < b ? -1 : 1)))
writeFileSync(path, `${JSON.stringify(lock, null, 2)}\n`)
