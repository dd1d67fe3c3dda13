/**
 * The HTTP layer and the controllers reach the cluster only through this module: writes and reads go through
 * ClusterNode, which forwards to the Raft leader what only the leader can do.
 */
export type { Cluster, RaftState, ServerView } from './cluster.js'
export { ClusterNode } from './cluster-node.js'
export type { ClusterAnswer, ClusterQuery, ClusterView, ReplicationDetail, ServerStatus, StatusDetail } from './cluster-status.js'
