/**
 * The knobs of one simulated schedule. Each seed draws its own mix of faults ("swarm testing": some schedules are
 * calm, some lose a fifth of all messages, some crash nodes all the time), after tigerbeetle/tigerbeetle
 * `src/testing/packet_simulator.zig` (PacketSimulatorOptions) and the VOPR's randomized options.
 *
 * Time is counted in abstract units; a node ticks about every TICK_UNITS units.
 */
import type { SeededRng } from '../../src/lib/rng.js'

export const TICK_UNITS = 100

export interface NetworkOptions {
  /** One-way delay of a message, drawn uniformly in [delayMinUnits, delayMaxUnits]. */
  readonly delayMinUnits: number
  readonly delayMaxUnits: number
  readonly lossProbability: number
  readonly duplicateProbability: number
  /** A message is sometimes held back much longer, which reorders it behind later ones. */
  readonly spikeProbability: number
  readonly spikeMaxUnits: number
}

export interface SimulationOptions {
  /** Processes in the simulation: founders, then servers that may join later. */
  readonly nodeCount: number
  /** The first founderCount nodes form the bootstrap configuration; the others start outside the cluster. */
  readonly founderCount: number
  readonly electionTimeoutTicks: number
  readonly heartbeatIntervalTicks: number
  readonly preVote: boolean
  readonly checkQuorum: boolean
  /** RaftConfig.announceAppliedCommit: followers learn a commit index once the leader applied it. */
  readonly announceAppliedCommit: boolean
  readonly maxInflightMessages: number
  readonly maxEntriesPerMessage: number
  readonly maxBytesPerMessage: number
  readonly trailingEntries: number
  /** The leader's backpressure bound: beyond it proposals are refused, so a backlog cannot outgrow replication. */
  readonly maxUncommittedEntries: number
  /** A node snapshots its state machine once this many entries were applied since its last snapshot; 0: never. */
  readonly snapshotThresholdEntries: number
  /** Each node's tick period in units: TICK_UNITS give or take 2%, so clocks drift apart. */
  readonly tickPeriodUnits: readonly number[]
  readonly network: NetworkOptions
  /** Per chaos event (about one per tick), the chance to start a partition when none is active. */
  readonly partitionProbability: number
  /** Of partitions, the share that is asymmetric (some directed links cut, the reverse ones working). */
  readonly asymmetricPartitionShare: number
  readonly partitionDurationMaxTicks: number
  /** Per chaos event, the chance to crash one running node. */
  readonly crashProbability: number
  /** The chance that a node crashes right after sending a Ready's messages: the window where an unsynced write shows. */
  readonly crashAfterSendProbability: number
  readonly restartDelayMaxTicks: number
  /** Disk write latency in units, and how slow a slow disk gets. */
  readonly diskLatencyMaxUnits: number
  readonly slowDiskProbability: number
  readonly slowDiskLatencyMaxUnits: number
  readonly snapshotFailureProbability: number
  /** Mean interval between client actions (propose, read, ...). */
  readonly clientIntervalUnits: number
  readonly readProbability: number
  readonly membershipChangeProbability: number
  readonly transferProbability: number
  /** Chance per client action that a random follower is told to campaign (as a driver does on losing its leader). */
  readonly campaignHintProbability: number
  /** How long faults are injected before everything heals. */
  readonly chaosDurationUnits: number
  /** After healing, a post-heal command must be committed within this long... */
  readonly livenessBoundUnits: number
  /** ...and every member must then apply it within this long. */
  readonly convergenceBoundUnits: number
}

/** Draws the options of one schedule. */
export function drawOptions(rng: SeededRng): SimulationOptions {
  const nodeCount = rng.between(3, 5)
  const founderCount = rng.chance(0.7) ? nodeCount : rng.between(Math.min(3, nodeCount), nodeCount)
  const electionTimeoutTicks = 10
  const faulty = (probability: number, max: number): number => (rng.chance(probability) ? rng.nextInt(1000) / 1000 * max : 0)
  const snapshotting = rng.chance(0.6)
  // Drawn in the order the fields were drawn before (see announceAppliedCommit).
  const heartbeatIntervalTicks = rng.between(1, 3)
  const preVote = rng.chance(0.8)
  const checkQuorum = rng.chance(0.8)
  const maxInflightMessages = rng.between(1, 8)
  const maxEntriesPerMessage = rng.between(1, 16)
  const maxBytesPerMessage = rng.between(32, 2048)
  return {
    nodeCount,
    founderCount,
    electionTimeoutTicks,
    heartbeatIntervalTicks,
    preVote,
    checkQuorum,
    maxInflightMessages,
    maxEntriesPerMessage,
    maxBytesPerMessage,
    // Read off a value already drawn, not drawn itself: every earlier seed (the regression seeds) keeps its schedule.
    announceAppliedCommit: maxBytesPerMessage % 2 === 1,
    trailingEntries: rng.between(0, 20),
    maxUncommittedEntries: rng.between(8, 300),
    snapshotThresholdEntries: snapshotting ? rng.between(4, 60) : 0,
    tickPeriodUnits: Array.from({ length: nodeCount }, () => TICK_UNITS + rng.between(-2, 2)),
    network: {
      delayMinUnits: 1,
      delayMaxUnits: rng.between(5, 60),
      lossProbability: faulty(0.6, 0.25),
      duplicateProbability: faulty(0.4, 0.15),
      spikeProbability: faulty(0.5, 0.1),
      spikeMaxUnits: rng.between(200, 3000),
    },
    partitionProbability: faulty(0.7, 0.1),
    asymmetricPartitionShare: rng.nextInt(1001) / 1000,
    partitionDurationMaxTicks: rng.between(10, 80),
    crashProbability: faulty(0.6, 0.03),
    crashAfterSendProbability: faulty(0.4, 0.01),
    restartDelayMaxTicks: rng.between(1, 60),
    diskLatencyMaxUnits: rng.between(1, 30),
    slowDiskProbability: faulty(0.4, 0.03),
    slowDiskLatencyMaxUnits: rng.between(100, 2500),
    snapshotFailureProbability: faulty(0.5, 0.5),
    clientIntervalUnits: rng.between(20, 300),
    readProbability: rng.chance(0.7) ? rng.nextInt(500) / 1000 : 0,
    membershipChangeProbability: rng.chance(0.5) ? rng.nextInt(100) / 1000 : 0,
    transferProbability: rng.chance(0.4) ? rng.nextInt(30) / 1000 : 0,
    campaignHintProbability: rng.chance(0.3) ? rng.nextInt(30) / 1000 : 0,
    chaosDurationUnits: rng.between(40, 160) * electionTimeoutTicks * TICK_UNITS,
    livenessBoundUnits: 60 * electionTimeoutTicks * TICK_UNITS,
    convergenceBoundUnits: 60 * electionTimeoutTicks * TICK_UNITS,
  }
}
