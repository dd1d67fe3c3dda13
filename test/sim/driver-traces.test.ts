/**
 * Golden interaction traces of the production driver (RaftReplica, ClusterNode, LevelRaftStorage, StateStore) in the
 * simulated world, after etcd-io/raft's datadriven tests: each test/sim/testdata/*.txt is a script of commands
 * (driver/script.ts lists them) with the output each one printed. The test runs the script, twice, to check that the
 * transcript is byte-identical from one run to the next, and compares it with the file; `REWRITE=1 npx mocha ...`
 * writes the transcripts back instead (review the diff). The scripts walk through the edge cases of issue 16: a join
 * interrupted and restarted, a wiped voter rebuilt, a snapshot refused at the end of its stream, a membership change
 * overwritten by a new leader; and of issue 22: a leader that sends before its own write, a former leader whose
 * own write commits under its successor (it runs the command instead of taking the shipped writes), and the shipped
 * writes riding on every message that tells a follower a commit index.
 */
import { expect } from 'chai'
import { readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { runScript } from './driver/script.js'

const TESTDATA = fileURLToPath(new URL('./testdata/', import.meta.url))
const REWRITE = process.env['REWRITE'] === '1'

describe('raft driver: golden interaction traces (test/sim/testdata)', function () {
  this.timeout(120_000)

  for (const file of readdirSync(TESTDATA).filter((name) => name.endsWith('.txt')).sort()) {
    it(file.replace(/\.txt$/, ''), async function () {
      const path = TESTDATA + file
      const text = readFileSync(path, 'utf8')
      const first = await runScript(text)
      const second = await runScript(text)
      expect(second, 'the same script gave two different transcripts: the world is not deterministic').to.equal(first)
      if (REWRITE) {
        writeFileSync(path, first)
        return
      }
      expect(first, `${file} differs from its transcript (REWRITE=1 rewrites it)`).to.equal(text)
    })
  }
})
