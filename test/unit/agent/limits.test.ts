/**
 * How many HTTP connections a node accepts: below the open-file limit by a reserve for the stores' own files (a
 * quarter of a small limit, 1,024 of a large one), never above 32,768, and 32,768 where the limit cannot be read.
 */
import { expect } from 'chai'
import { HTTP_CONNECTIONS_MAX, httpConnectionsFor, openFilesLimit } from '../../../src/agent/limits.js'

describe('agent/limits: HTTP connections from the open-file limit', () => {
  it('keeps a reserve of descriptors for the stores below the limit', () => {
    expect(httpConnectionsFor(20_000)).to.equal(18_976)
    expect(httpConnectionsFor(1_024)).to.equal(768)
    expect(httpConnectionsFor(65_536)).to.equal(HTTP_CONNECTIONS_MAX)
    expect(httpConnectionsFor(undefined)).to.equal(HTTP_CONNECTIONS_MAX)
    expect(httpConnectionsFor(2)).to.equal(2)
  })

  it('reads the soft limit from /proc/self/limits, and nothing from a line it does not understand', () => {
    const limits = (soft: string): string =>
      `Limit                     Soft Limit           Hard Limit           Units     \nMax open files            ${soft}                20000                files     \n`
    expect(openFilesLimit(() => limits('4096'))).to.equal(4096)
    expect(openFilesLimit(() => limits('unlimited'))).to.equal(undefined)
    expect(openFilesLimit(() => 'Max processes 100\n')).to.equal(undefined)
    expect(
      openFilesLimit(() => {
        throw new Error('no /proc here')
      }),
    ).to.equal(undefined)
    // This process has one (Linux).
    expect(openFilesLimit()).to.be.a('number').above(0)
  })
})
