/**
 * Polling for the cluster tests: a check against real processes comes true some time after the action that causes
 * it (an election, a heartbeat, a restart). A check that throws (a node not answering yet) counts as not yet true.
 */
export async function eventually(check: () => Promise<boolean>, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!(await check().catch(() => false))) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting until ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}
