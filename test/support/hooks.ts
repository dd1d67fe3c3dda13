/**
 * Root hooks for every suite: whatever agent process a test started and did not stop (because it failed, say) is
 * killed after the test, so no server outlives the run.
 */
import { stopAllAgents } from './agent.js'

export const mochaHooks = {
  async afterAll(): Promise<void> {
    await stopAllAgents()
  },
}
