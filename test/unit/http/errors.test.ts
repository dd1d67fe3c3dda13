/**
 * Tests for the error mapper (src/http/errors.ts) with a stand-in context: it is a plain function over `next`, not
 * an async one (so a held request keeps no frame of it), and must still map every way an error can leave `next`.
 */
import { Writable } from 'node:stream'
import { expect } from 'chai'
import type { Context } from 'koa'
import pino from 'pino'
import { errorMiddleware } from '../../../src/http/errors.js'
import { InvalidInputError } from '../../../src/lib/errors.js'

function logged(): { log: pino.Logger; lines: string[] } {
  const lines: string[] = []
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(chunk.toString('utf8'))
      done()
    },
  })
  return { log: pino({ level: 'debug' }, sink), lines }
}

function context(): Context & { status: number; body: unknown } {
  return { status: 404, body: undefined, method: 'GET', path: '/v1/acl/policy/x' } as unknown as Context & { status: number; body: unknown }
}

describe('errorMiddleware', () => {
  it('maps a rejected next to the status and JSON shape of its code, naming the field', async () => {
    const ctx = context()
    await errorMiddleware(logged().log)(ctx, () => Promise.reject(new InvalidInputError('Name', 'must not be empty')))
    expect(ctx.status).to.equal(400)
    expect(ctx.body).to.deep.equal({ Error: 'Name: must not be empty', Code: 'invalid_input', Field: 'Name' })
  })

  it('maps an error thrown synchronously by next the same way', async () => {
    const ctx = context()
    const next = (): Promise<void> => {
      throw new InvalidInputError('id', 'must be a UUID')
    }
    await errorMiddleware(logged().log)(ctx, next)
    expect(ctx.status).to.equal(400)
    expect(ctx.body).to.include({ Code: 'invalid_input', Field: 'id' })
  })

  it('turns anything else into a 500 with a generic message, the details in the log only', async () => {
    const ctx = context()
    const { log, lines } = logged()
    await errorMiddleware(log)(ctx, () => Promise.reject(new Error('disk on fire at /var/lib/warden')))
    expect(ctx.status).to.equal(500)
    expect(ctx.body).to.deep.equal({ Error: 'internal error; see the agent log', Code: 'internal' })
    expect(lines.join('')).to.include('disk on fire')
  })

  it('leaves a successful answer alone', async () => {
    const ctx = context()
    await errorMiddleware(logged().log)(ctx, async () => {
      ctx.status = 200
      ctx.body = { ok: true }
    })
    expect(ctx.status).to.equal(200)
    expect(ctx.body).to.deep.equal({ ok: true })
  })
})
