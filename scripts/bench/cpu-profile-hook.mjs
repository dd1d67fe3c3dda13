/**
 * Loaded into every warden agent with `NODE_OPTIONS=--import <this file>` when the benchmark runs with --profile: it
 * starts V8's sampling profiler at once and writes CPU.<pid>.cpuprofile into $WARDEN_BENCH_PROFILE_DIR when the
 * process exits (after SIGTERM; a SIGKILLed node leaves none). The same as `node --cpu-prof`, which Node refuses in
 * NODE_OPTIONS, and NODE_OPTIONS is the one way into processes that cluster/lib.ts spawns.
 */
import { writeFileSync } from 'node:fs'
import { Session } from 'node:inspector'
import { join } from 'node:path'

const directory = process.env.WARDEN_BENCH_PROFILE_DIR
if (directory !== undefined && directory !== '') {
  const session = new Session()
  session.connect()
  session.post('Profiler.enable')
  session.post('Profiler.start')
  // A session connected in-process answers synchronously, so this works in an 'exit' listener, where nothing async runs.
  process.on('exit', () => {
    session.post('Profiler.stop', (error, result) => {
      if (error === null && result !== undefined) writeFileSync(join(directory, `CPU.${process.pid}.cpuprofile`), JSON.stringify(result.profile))
    })
  })
}
