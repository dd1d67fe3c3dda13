/**
 * Loaded into warden agents with `NODE_OPTIONS=--import <this file>` by stage-profile.ts: V8's sampling profiler over
 * a window that the driver chooses, not over the whole life of the process (start-up, elections, warm-up). The first
 * SIGUSR2 starts the profiler, the next stops it and writes CPU.<pid>.cpuprofile into $WARDEN_STAGE_PROFILE_DIR
 * (synchronously, as an in-process inspector session answers), and so on. Sampling interval:
 * $WARDEN_STAGE_PROFILE_INTERVAL_US (default 500 µs).
 */
import { writeFileSync } from 'node:fs'
import { Session } from 'node:inspector'
import { join } from 'node:path'

const directory = process.env.WARDEN_STAGE_PROFILE_DIR
if (directory !== undefined && directory !== '') {
  const session = new Session()
  session.connect()
  session.post('Profiler.enable')
  session.post('Profiler.setSamplingInterval', { interval: Number(process.env.WARDEN_STAGE_PROFILE_INTERVAL_US ?? 500) })
  let running = false
  process.on('SIGUSR2', () => {
    if (!running) {
      session.post('Profiler.start')
      running = true
      return
    }
    running = false
    session.post('Profiler.stop', (error, result) => {
      if (error === null && result !== undefined) writeFileSync(join(directory, `CPU.${process.pid}.cpuprofile`), JSON.stringify(result.profile))
    })
  })
}
