/**
 * LevelDB options every warden database shares.
 *
 * The write buffer (memtable) is 16 MiB rather than LevelDB's 4 MiB. Every write of a token lands in two databases
 * on each node (the Raft log, then the state), and a small memtable turns into level-0 files and compactions four
 * times as often; the Raft log's entries are also deleted again after each snapshot, so fewer flushes means less data
 * compacted only to be dropped. Measured with `npx tsx scripts/bench/thread-cpu.ts 12 leader` (token creates at 64
 * connections to a three-node cluster), runs interleaved with the default: 2,557 / 2,216 / 2,651 / 3,527 writes/s
 * against 2,520 / 2,025 / 2,529 / 2,966 and 3,245 of the neighbouring default runs, the leader's CPU per write 3-10%
 * lower, LevelDB's compaction and pool threads 1-2 points of a core lower. 32 MiB measured no better. The price is
 * up to 12 MiB more memory per database and a longer write-ahead log to replay at start.
 */
export const LEVEL_WRITE_BUFFER_BYTES = 16 * 1024 * 1024
