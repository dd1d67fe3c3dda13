/**
 * Request bodies: read with a hard limit (1 MiB) before anything is parsed, so a large or endless body costs at most
 * the limit in memory, and parsed as JSON with an error that says what is wrong.
 */
import type { Context } from 'koa'
import { InvalidInputError, WardenError } from '../lib/errors.js'

export const BODY_BYTES_MAX = 1024 * 1024

export function readBody(ctx: Context, limit = BODY_BYTES_MAX): Promise<Buffer> {
  const declared = Number(ctx.get('content-length') || '0')
  if (declared > limit) return Promise.reject(tooLarge(limit))
  const request = ctx.req
  // A request destroyed (the client hung up) or read before this call would never emit another event.
  if (request.destroyed || request.readableEnded) return Promise.reject(endedEarly())
  // Listeners rather than an async iterator: this runs on every write, and the iterator's machinery cost several
  // times the read itself for the small bodies writes have.
  return new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = []
    let size = 0
    const cleanup = (): void => {
      request.off('data', onData)
      request.off('end', onEnd)
      request.off('error', onError)
      request.off('close', onClose)
    }
    const onData = (chunk: Buffer): void => {
      size += chunk.length
      if (size > limit) {
        cleanup()
        // Stop reading; the connection is closed after the reply so the rest of the body is never buffered.
        request.pause()
        ctx.set('Connection', 'close')
        reject(tooLarge(limit))
        return
      }
      chunks.push(chunk)
    }
    const onEnd = (): void => {
      cleanup()
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size))
    }
    // The client went away before the body ended: an 'aborted' error, or a close without one.
    const onError = (): void => {
      cleanup()
      reject(endedEarly())
    }
    const onClose = onError
    request.on('data', onData)
    request.once('end', onEnd)
    request.once('error', onError)
    request.once('close', onClose)
  })
}

function endedEarly(): WardenError {
  return new InvalidInputError('body', 'ended early: the connection closed before the whole body arrived')
}

function tooLarge(limit: number): WardenError {
  return new WardenError('payload_too_large', `body: must be at most ${limit} bytes`, 'body')
}

/** The parsed JSON body; an empty body reads as `undefined`. */
export async function readJson(ctx: Context): Promise<unknown> {
  const bytes = await readBody(ctx)
  const text = bytes.toString('utf8').trim()
  if (text === '') return undefined
  try {
    return JSON.parse(text) as unknown
  } catch (error) {
    throw new InvalidInputError('body', `is not valid JSON (${(error as Error).message})`)
  }
}

/** The body as a JSON object; empty means `{}`. */
export async function readJsonObject(ctx: Context): Promise<Record<string, unknown>> {
  const value = await readJson(ctx)
  if (value === undefined) return {}
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new InvalidInputError('body', 'must be a JSON object')
  }
  return value as Record<string, unknown>
}
