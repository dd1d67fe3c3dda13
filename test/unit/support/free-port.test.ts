/**
 * freePort (cluster/lib.ts), which every multi-node test, the chaos runner and the benchmark use to give nodes ports
 * they keep across restarts: it must hand out ports outside the kernel's ephemeral range (an ephemeral port can be
 * taken meanwhile as the local end of any outgoing connection), that can be bound, and never the same one twice.
 */
import { expect } from 'chai'
import { readFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { freePort } from '../../../cluster/lib.js'

describe('cluster tool: freePort', function () {
  it('hands out distinct ports outside the ephemeral range that can be bound', async function () {
    const [ephemeralLow, ephemeralHigh] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number) as [number, number]
    const ports: number[] = []
    for (let n = 0; n < 20; n++) ports.push(await freePort())
    expect(new Set(ports).size).to.equal(ports.length)
    // Outside the ephemeral range, when the machine leaves room for that (Linux's default leaves 10000-32767).
    if (ephemeralLow > 11_000 || ephemeralHigh < 64_000) {
      for (const port of ports) expect(port < ephemeralLow || port > ephemeralHigh, `port ${port}`).to.equal(true)
    }
    const server = createServer()
    try {
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject)
        server.listen(ports[0], '127.0.0.1', resolve)
      })
      expect((server.address() as { port: number }).port).to.equal(ports[0])
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()))
    }
  })
})
