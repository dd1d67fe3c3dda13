/**
 * Opening a server on its data: the start sequence the agent runs, and the simulator too (one copy, so the simulator
 * tests this ordering): decide or read how the server entered its cluster (founding.ts) and save it, finish or discard
 * a snapshot switch a crash interrupted, open the state, build the replica, refuse --peer flags that name other
 * members, and wrap the replica in the ClusterNode the HTTP layer uses. Nothing is started; the caller starts the
 * replica, and closes the storage and the links it opened if this refuses.
 */
import { changeFeedOf } from '../state/change-feed.js'
import { peerFlagsProblem, planMembership, type FoundingFlags, type FoundingPlan } from '../replica/founding.js'
import type { PeerLinks } from '../replica/peer-links.js'
import { RaftReplica, type RaftReplicaOptions } from '../replica/raft-replica.js'
import type { StateFiles } from '../state/files.js'
import { finishStateSwitch } from '../state/snapshot.js'
import { StateStore } from '../state/store.js'
import { ClusterNode } from './cluster-node.js'

export interface OpenNodeOptions {
  storage: RaftReplicaOptions['storage']
  files: StateFiles
  flags: FoundingFlags
  /** Already listening: `dialAddresses` names this server at the address they bound. */
  links: PeerLinks
  dialAddresses: Map<string, string>
  /** Proves joining servers (ClusterNode); none: nobody may join. */
  clusterKey: string | undefined
  /** The rest of the replica's options (timing, environment, log, onFatal, address check). */
  settings: Omit<RaftReplicaOptions, 'nodeName' | 'dialAddresses' | 'membership' | 'storage' | 'state' | 'links'>
}

export type OpenedNode =
  | { ok: true; next: Extract<FoundingPlan, { ok: true }>['next']; state: StateStore; replica: RaftReplica; cluster: ClusterNode }
  | { ok: false; problem: string }

export async function openNode(options: OpenNodeOptions): Promise<OpenedNode> {
  const { storage, files, flags } = options
  const plan = planMembership(storage, flags)
  if (!plan.ok) return plan
  if (plan.save) await storage.saveMembershipRecord(plan.record)
  // A snapshot install that a crash interrupted is finished (or discarded) before the state is opened.
  await finishStateSwitch(files, storage.snapshot()?.index ?? 0)
  const state = await StateStore.openFiles(files)
  // Before the replica replays its log: the feed a secondary datacenter's replication reads reaches back to here.
  changeFeedOf(state)
  const replica = new RaftReplica({
    ...options.settings,
    nodeName: flags.nodeName,
    dialAddresses: options.dialAddresses,
    membership: storage.membershipRecord() ?? plan.record,
    storage,
    state,
    links: options.links,
  })
  const configuration = replica.status().configuration
  const problem = plan.save ? undefined : peerFlagsProblem(plan.record, [...configuration.voters, ...configuration.learners], flags)
  if (problem !== undefined) {
    await state.close()
    return { ok: false, problem }
  }
  return { ok: true, next: plan.next, state, replica, cluster: new ClusterNode(replica, options.clusterKey) }
}
