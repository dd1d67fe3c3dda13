/**
 * States of a known shape on real LevelDB stores, for the tests of snapshots and their switch: a shape is an applied
 * index and the policies created on the way (each at its own index, noops everywhere else), so a test can tell which
 * state is live by its applied index and by the records only it holds.
 */
import { expect } from 'chai'
import { join } from 'node:path'
import { COMMAND_VERSION, type Command } from '../../src/state/commands.js'
import { StateStore } from '../../src/state/store.js'
import { listRecords, policySpec } from '../../src/state/tables.js'
import type { TempDirs } from './temp-dir.js'

export interface StateShape {
  appliedTo: number
  /** Policy name → the index of the command that creates it (at most appliedTo). */
  policies: Record<string, number>
}

function policyCommand(name: string, index: number): Command {
  const id = `00000000-0000-4000-8000-${index.toString(16).padStart(12, '0')}`
  return { v: COMMAND_VERSION, type: 'acl.policy.create', policy: { ID: id, Name: name, Description: '', Rules: 'acl = "read"', Datacenters: [], Namespace: 'default' } }
}

/** The commands 1..appliedTo of a state of `shape`. */
export function commandsOf(shape: StateShape): Array<{ command: Command; index: number }> {
  const byIndex = new Map(Object.entries(shape.policies).map(([name, index]) => [index, name]))
  return Array.from({ length: shape.appliedTo }, (_, offset) => {
    const index = offset + 1
    const name = byIndex.get(index)
    return { index, command: name === undefined ? { v: COMMAND_VERSION, type: 'noop' } : policyCommand(name, index) }
  })
}

/** Applies the commands of `shape` to an empty store; every one must succeed. */
export async function applyShape(store: StateStore, shape: StateShape): Promise<void> {
  const results = await store.applyBatch(commandsOf(shape))
  expect(results.every((result) => result.ok), JSON.stringify(results.filter((result) => !result.ok))).to.equal(true)
}

/** Creates a state of `shape` in `directory` (a live state's directory) and closes it. */
export async function writeState(dirs: TempDirs, directory: string, shape: StateShape): Promise<void> {
  const store = await StateStore.open(directory)
  dirs.defer(() => store.close())
  try {
    await applyShape(store, shape)
  } finally {
    await store.close()
  }
}

/** Every key and value of a state of `shape` (built in a directory of its own), as a leader streams them. */
export async function pairsOf(dirs: TempDirs, shape: StateShape): Promise<Array<[string, Uint8Array]>> {
  const directory = join(await dirs.make('warden-source-'), 'state')
  await writeState(dirs, directory, shape)
  const store = await StateStore.open(directory)
  dirs.defer(() => store.close())
  try {
    const pairs: Array<[string, Uint8Array]> = []
    for await (const [key, value] of store.db.iterator()) pairs.push([key, Buffer.from(value)])
    return pairs
  } finally {
    await store.close()
  }
}

/** An open store's applied index and its policies' names, sorted. */
export async function contentsOf(store: StateStore): Promise<{ applied: number; policies: string[] }> {
  const policies = (await listRecords(store.reader, policySpec)).map((policy) => policy.Name).sort()
  return { applied: store.lastApplied, policies }
}

/** The same, of the state in `directory`, opened and closed again. */
export async function stateContents(dirs: TempDirs, directory: string): Promise<{ applied: number; policies: string[] }> {
  const store = await StateStore.open(directory)
  dirs.defer(() => store.close())
  try {
    return await contentsOf(store)
  } finally {
    await store.close()
  }
}
