/**
 * What the client library's unit tests share: clients made during a test are closed after it (each suite closes its
 * own loopback server after them), and a wait for what the server's side shows.
 */
import { Client } from '../../../src/api/index.js'

/**
 * A maker of clients that are all closed after each test. Call it inside the suite, before the suite's own afterEach,
 * so that the clients close before the server they talk to.
 */
export function madeClients(): (options: ConstructorParameters<typeof Client>[0]) => Client {
  const clients: Client[] = []
  afterEach(function () {
    for (const made of clients.splice(0)) made.close()
  })
  return (options) => {
    const made = new Client(options)
    clients.push(made)
    return made
  }
}

/** Resolves once `condition` holds, checked every 10 ms; fails after `timeoutMs` naming `what`. */
export async function until(condition: () => boolean, what: string, timeoutMs = 2_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`not within ${timeoutMs} ms: ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}
