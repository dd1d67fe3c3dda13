/**
 * The Raft core's public surface, for the driver (src/replica) and the transport (message types).
 */
export { RaftCore, validateRaftConfig } from './raft-core.js'
export type { ProgressStatus, ProposalResult, RaftConfig, RaftStatus, RequestError, RequestResult } from './raft-core.js'
export type { Ready, ReadState, SoftState } from './ready.js'
export type { LogReader } from './log-reader.js'
export type * from './messages.js'
export type { Configuration, Entry, EntryType, HardState, NodeId, Role, SnapshotMetadata } from './types.js'
export { EMPTY_HARD_STATE } from './types.js'
export {
  applyConfChange,
  decodeConfiguration,
  encodeConfiguration,
  isLearner,
  isMember,
  isVoter,
  makeConfiguration,
} from './configuration.js'
export type { ConfChange, ConfChangeType } from './configuration.js'
