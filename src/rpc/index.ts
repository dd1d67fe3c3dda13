/**
 * The HTTP layer reaches the cluster only through this module: today the single-node replica, later forwarding to
 * the Raft leader (writes, default and consistent reads).
 */
export type { Cluster } from '../replica/cluster.js'
