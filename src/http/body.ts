/**
 * Request bodies: read with a hard limit (1 MiB) before anything is parsed, so a large or endless body costs at most
 * the limit in memory, and parsed as JSON with an error that says what is wrong.
 */
import type { Context } from 'koa'
import { InvalidInputError, WardenError } from '../lib/errors.js'

export const BODY_BYTES_MAX = 1024 * 1024

export async function readBody(ctx: Context, limit = BODY_BYTES_MAX): Promise<Buffer> {
  const declared = Number(ctx.get('content-length') || '0')
  if (declared > limit) throw tooLarge(limit)
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of ctx.req as AsyncIterable<Buffer>) {
    size += chunk.length
    if (size > limit) {
      // Stop reading; the connection is closed after the reply so the rest of the body is never buffered.
      ctx.set('Connection', 'close')
      throw tooLarge(limit)
    }
    chunks.push(chunk)
  }
  return Buffer.concat(chunks)
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
