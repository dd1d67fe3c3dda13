/**
 * Cluster membership and its changes, one server at a time (Thesis §4.1–§4.3).
 *
 * A configuration entry in the log holds the whole resulting configuration rather than the change (as hashicorp/raft
 * `configuration.go` does), so a server can read its membership from the latest such entry without replaying the
 * ones before it. Any two majorities of configurations that differ by one voter overlap, which is why one change at a
 * time is safe without joint consensus (Thesis §4.1, Figure 4.3).
 */
import type { Configuration, NodeId } from './types.js'

export type ConfChangeType =
  /** Add a new server as a learner (non-voter) so it can catch up before it counts (Thesis §4.2.1). */
  | 'addLearner'
  /** Promote a learner to voter, or add a new server directly as a voter. */
  | 'addVoter'
  /** Remove a voter or a learner (Thesis §4.2.2 when it is the leader). */
  | 'removeServer'

export interface ConfChange {
  readonly type: ConfChangeType
  readonly nodeId: NodeId
}

export function makeConfiguration(voters: Iterable<NodeId>, learners: Iterable<NodeId> = []): Configuration {
  const voterList = [...new Set(voters)].sort()
  const voterSet = new Set(voterList)
  const learnerList = [...new Set(learners)].filter((id) => !voterSet.has(id)).sort()
  return Object.freeze({ voters: Object.freeze(voterList), learners: Object.freeze(learnerList) })
}

export const EMPTY_CONFIGURATION: Configuration = makeConfiguration([])

export function isVoter(configuration: Configuration, id: NodeId): boolean {
  return configuration.voters.includes(id)
}

export function isLearner(configuration: Configuration, id: NodeId): boolean {
  return configuration.learners.includes(id)
}

export function isMember(configuration: Configuration, id: NodeId): boolean {
  return isVoter(configuration, id) || isLearner(configuration, id)
}

/** Every member, voters first. */
export function members(configuration: Configuration): NodeId[] {
  return [...configuration.voters, ...configuration.learners]
}

/**
 * The configuration after `change`, or a sentence saying why the change is refused. Refused: adding a server that is
 * already what it would become, promoting nobody, removing a stranger, and removing the last voter (a cluster with
 * no voters can never elect a leader again).
 */
export function applyConfChange(configuration: Configuration, change: ConfChange): Configuration | string {
  const id = change.nodeId
  if (id.length === 0) return 'nodeId must not be empty'
  switch (change.type) {
    case 'addLearner':
      if (isVoter(configuration, id)) return `${id} is already a voter`
      if (isLearner(configuration, id)) return `${id} is already a learner`
      return makeConfiguration(configuration.voters, [...configuration.learners, id])
    case 'addVoter':
      if (isVoter(configuration, id)) return `${id} is already a voter`
      return makeConfiguration(
        [...configuration.voters, id],
        configuration.learners.filter((learner) => learner !== id),
      )
    case 'removeServer':
      if (!isMember(configuration, id)) return `${id} is not a member`
      if (configuration.voters.length === 1 && isVoter(configuration, id)) return `${id} is the last voter`
      return makeConfiguration(
        configuration.voters.filter((voter) => voter !== id),
        configuration.learners.filter((learner) => learner !== id),
      )
  }
}

const textEncoder = new TextEncoder()
const textDecoder = new TextDecoder('utf-8', { fatal: true })

/** The data of a `configuration` entry: UTF-8 JSON `{"voters":[...],"learners":[...]}`, stable for a given value. */
export function encodeConfiguration(configuration: Configuration): Uint8Array {
  return textEncoder.encode(JSON.stringify({ voters: configuration.voters, learners: configuration.learners }))
}

export function decodeConfiguration(data: Uint8Array): Configuration {
  const parsed = JSON.parse(textDecoder.decode(data)) as { voters?: unknown; learners?: unknown }
  if (!isStringArray(parsed.voters) || !isStringArray(parsed.learners)) {
    throw new Error('configuration entry: expected {"voters": string[], "learners": string[]}')
  }
  return makeConfiguration(parsed.voters, parsed.learners)
}

function isStringArray(value: unknown): value is string[] {
  return Array.isArray(value) && value.every((item) => typeof item === 'string')
}

