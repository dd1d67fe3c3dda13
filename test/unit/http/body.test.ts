/**
 * readBody (src/http/body.ts) against real streams: it must settle in every case, since a handler waiting on a body
 * that never comes would hang for good. A request destroyed or already read before the call, one that errors or
 * closes midway, and one over the limit are each refused with the one error shape; a whole body arrives whole.
 */
import { expect } from 'chai'
import { rejection } from '../../support/thrown.js'
import { PassThrough } from 'node:stream'
import type { Context } from 'koa'
import { ANONYMOUS_BODY, bodiesInFlight, readBody, readJson } from '../../../src/http/body.js'
import { WardenError } from '../../../src/lib/errors.js'

function contextOf(request: PassThrough, headers: Record<string, string> = {}): { ctx: Context; set: Record<string, string> } {
  const set: Record<string, string> = {}
  const ctx = { req: request, get: (name: string) => headers[name.toLowerCase()] ?? '', set: (name: string, value: string) => (set[name] = value) }
  return { ctx: ctx as unknown as Context, set }
}

const refusal = (promise: Promise<unknown>): Promise<WardenError> => rejection(promise, WardenError)

describe('readBody', () => {
  it('returns the whole body, however it was split', async () => {
    const request = new PassThrough()
    const reading = readBody(contextOf(request).ctx)
    request.write('{"Na')
    request.end('me":"x"}')
    expect((await reading).toString()).to.equal('{"Name":"x"}')
  })

  it('refuses at once a request destroyed before the call (the client hung up while the caller was checked)', async () => {
    const request = new PassThrough()
    request.destroy()
    const error = await refusal(readBody(contextOf(request).ctx))
    expect(error.code).to.equal('invalid_input')
    expect(error.field).to.equal('body')
  })

  it('refuses at once a request whose body was already read', async () => {
    const request = new PassThrough()
    const first = readBody(contextOf(request).ctx)
    request.end('{}')
    await first
    const error = await refusal(readBody(contextOf(request).ctx))
    expect(error.field).to.equal('body')
  })

  it('refuses a body that ends in an error (the client aborted) as ended early', async () => {
    const request = new PassThrough()
    const reading = readBody(contextOf(request).ctx)
    request.write('{"Name":')
    request.destroy(Object.assign(new Error('aborted'), { code: 'ECONNRESET' }))
    const error = await refusal(reading)
    expect(error.code).to.equal('invalid_input')
    expect(error.message).to.include('ended early')
  })

  it('refuses a body over the limit, declared or sent, and asks for the connection to close', async () => {
    const declared = await refusal(readBody(contextOf(new PassThrough(), { 'content-length': '11' }).ctx, { limit: 10 }))
    expect(declared.code).to.equal('payload_too_large')
    const request = new PassThrough()
    const { ctx, set } = contextOf(request)
    const reading = readBody(ctx, { limit: 10 })
    request.write('0123456789ab')
    const sent = await refusal(reading)
    expect(sent.code).to.equal('payload_too_large')
    expect(set.Connection).to.equal('close')
    request.destroy()
  })

  it('refuses a body that does not arrive within its time, and closes the connection after the reply', async () => {
    const request = new PassThrough()
    const { ctx, set } = contextOf(request, { 'content-length': '100' })
    const reading = readBody(ctx, { timeoutMs: 50 })
    request.write('{"Name":')
    const error = await refusal(reading)
    expect([error.code, error.field]).to.deep.equal(['invalid_input', 'body'])
    expect(error.message).to.include('did not arrive within')
    expect(set['Connection']).to.equal('close')
    expect(bodiesInFlight()).to.equal(0)
    request.destroy()
  })

  it('refuses with 429 a body that would take the bytes of all bodies being read past their bound, and frees them after', async () => {
    const first = new PassThrough()
    const second = new PassThrough()
    const holding = readBody(contextOf(first).ctx, { inFlightMax: 100 })
    first.write(Buffer.alloc(80))
    await new Promise((resolve) => setImmediate(resolve))
    expect(bodiesInFlight()).to.equal(80)
    const refused = readBody(contextOf(second).ctx, { inFlightMax: 100 })
    second.write(Buffer.alloc(30))
    const error = await refusal(refused)
    expect([error.code, error.field]).to.deep.equal(['rate_limited', 'body'])
    first.end(Buffer.alloc(10))
    expect((await holding).length).to.equal(90)
    expect(bodiesInFlight()).to.equal(0)
    second.destroy()
  })

  it('counts the bodies of anonymous routes against their own budget: a full one refuses logins, not writes', async () => {
    const anonymous = { ...ANONYMOUS_BODY, inFlightMax: 100 }
    const login = new PassThrough()
    const write = new PassThrough()
    const nextLogin = new PassThrough()
    const holding = readBody(contextOf(login).ctx, anonymous)
    login.write(Buffer.alloc(90))
    await new Promise((resolve) => setImmediate(resolve))
    // The shared budget is untouched: a write's body of the same size is read.
    const writing = readBody(contextOf(write).ctx, { inFlightMax: 100 })
    write.end(Buffer.alloc(90))
    expect((await writing).length).to.equal(90)
    const refused = readBody(contextOf(nextLogin).ctx, anonymous)
    nextLogin.write(Buffer.alloc(20))
    expect((await refusal(refused)).code).to.equal('rate_limited')
    login.end()
    expect((await holding).length).to.equal(90)
    expect(bodiesInFlight()).to.equal(0)
    nextLogin.destroy()
  })

  it('holds an anonymous body to 64 KiB', async () => {
    const request = new PassThrough()
    const reading = readBody(contextOf(request).ctx, ANONYMOUS_BODY)
    request.write(Buffer.alloc(64 * 1024 + 1))
    expect((await refusal(reading)).code).to.equal('payload_too_large')
    request.destroy()
  })

  describe('readJson', () => {
    async function parsed(bytes: Buffer | string): Promise<unknown> {
      const request = new PassThrough()
      const reading = readJson(contextOf(request).ctx)
      request.end(bytes)
      return reading
    }

    it('keeps valid Unicode, surrogate pairs written as escapes included', async () => {
      expect(await parsed('{"Name":"\\ud83d\\ude00 ok","Meta":{"é":"ü"}}')).to.deep.equal({ Name: '\u{1F600} ok', Meta: { é: 'ü' } })
    })

    it('refuses a lone surrogate in a value or a key, naming where it is', async () => {
      for (const [body, field] of [
        ['{"Description":"a\\udbffb"}', 'Description'],
        ['{"Meta":{"k":["x","\\udc00"]}}', 'Meta.k[1]'],
        ['{"Meta":{"\\ud800":"x"}}', 'Meta.\ud800'],
        ['"\\ud800"', 'body'],
      ] as const) {
        const error = await refusal(parsed(body))
        expect([error.code, error.field], body).to.deep.equal(['invalid_input', field])
        expect(error.message).to.include('valid Unicode')
      }
    })

    it('checks a deeply nested body without overflowing the stack', async () => {
      const depth = 100_000
      const error = await refusal(parsed(`${'['.repeat(depth)}"\\ud800"${']'.repeat(depth)}`))
      expect(error.code).to.equal('invalid_input')
      // The field names where it is, cut short.
      expect(error.field).to.match(/^\[0\]\[0\]\[0\].*…$/).and.have.length.below(300)
      expect(error.message).to.include('lone surrogate')
    })

    it('refuses a body that is not UTF-8', async () => {
      const error = await refusal(parsed(Buffer.from([0x7b, 0x22, 0x4e, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d])))
      expect([error.code, error.field, error.message]).to.deep.equal(['invalid_input', 'body', 'body: is not valid UTF-8'])
    })
  })
})
