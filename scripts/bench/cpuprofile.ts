/**
 * Reading V8 .cpuprofile files: the shapes, a frame's printable name, and each sampled node's weight, for
 * profile-top.ts (hot spots) and stage-budget.ts (a write's CPU by stage).
 */
import { readFileSync } from 'node:fs'
import { relative, resolve } from 'node:path'

export interface CallFrame {
  functionName: string
  url: string
  lineNumber: number
}

export interface ProfileNode {
  id: number
  callFrame: CallFrame
  children?: number[]
}

export interface CpuProfile {
  nodes: ProfileNode[]
  samples: number[]
  timeDeltas: number[]
  startTime: number
  endTime: number
}

export const REPO_ROOT = resolve(import.meta.dirname, '..', '..')

export function readProfile(file: string): CpuProfile {
  return JSON.parse(readFileSync(file, 'utf8')) as CpuProfile
}

/** A frame's file as a path under the repository (or under node_modules/), without file://. */
export function frameFile(frame: CallFrame): string {
  const url = frame.url.replace(/^file:\/\//, '')
  if (url === '') return ''
  return url.startsWith(REPO_ROOT) ? relative(REPO_ROOT, url) : url.replace(/^.*node_modules\//, 'node_modules/')
}

export function frameName(frame: CallFrame): string {
  const file = frameFile(frame)
  return `${frame.functionName === '' ? '(anonymous)' : frame.functionName}${file === '' ? '' : ` ${file}:${frame.lineNumber + 1}`}`
}

/** The profile's nodes by id, and each node's parent. */
export function profileTree(profile: CpuProfile): { byId: Map<number, ProfileNode>; parent: Map<number, number> } {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]))
  const parent = new Map<number, number>()
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id)
  return { byId, parent }
}

/**
 * Each sampled node's weight: the wall time (µs) the samples that ended in it stand for (`time`), or their number
 * (`samples`). A thread that was preempted between two samples gets one long time delta, so sample counts overstate
 * preempted code less than times do.
 */
export function sampledWeights(profile: CpuProfile, by: 'time' | 'samples' = 'time'): Map<number, number> {
  const weights = new Map<number, number>()
  profile.samples.forEach((id, position) => weights.set(id, (weights.get(id) ?? 0) + (by === 'time' ? (profile.timeDeltas[position] ?? 0) : 1)))
  return weights
}
