/** Proposing a command and turning its apply result into a value or the operating error the state decided. */
import { WardenError } from '../lib/errors.js'
import type { Command } from '../state/commands.js'
import { COMMAND_VERSION, type ApplyResult } from '../state/commands.js'
import type { ApiContext } from './context.js'
import { auditBeforePropose, auditProposed } from './audit.js'

type Unversioned<C> = C extends { v: number } ? Omit<C, 'v'> : never

/**
 * Every write of the HTTP API is proposed here, so the audit log's request line is written here: after the routes
 * resolved and authorized the caller and read the body, before the command can reach the log (fail closed: when the
 * line cannot be written this throws audit_unavailable and nothing is proposed).
 */
export async function propose(ctx: ApiContext, command: Unversioned<Command>): Promise<unknown> {
  const versioned = { v: COMMAND_VERSION, ...command } as Command
  // Every request this node serves after the answer waits for its own apply of the write (app.ts catchUp).
  const options = { answerBeforeLocalApply: true }
  if (ctx.state.app.audit === undefined) return resultValue(await ctx.state.app.cluster.propose(versioned, options))
  await auditBeforePropose(ctx, versioned)
  const { result, index } = await ctx.state.app.cluster.proposeIndexed(versioned, options)
  auditProposed(ctx, index)
  return resultValue(result)
}

function resultValue(result: ApplyResult): unknown {
  if (!result.ok) throw new WardenError(result.error.code, result.error.message, result.error.field)
  return result.value
}
