/** Proposing a command and turning its apply result into a value or the operating error the state decided. */
import { WardenError } from '../lib/errors.js'
import type { Command } from '../state/commands.js'
import { COMMAND_VERSION } from '../state/commands.js'
import type { ApiContext } from './context.js'

type Unversioned<C> = C extends { v: number } ? Omit<C, 'v'> : never

export async function propose(ctx: ApiContext, command: Unversioned<Command>): Promise<unknown> {
  const result = await ctx.state.app.cluster.propose({ v: COMMAND_VERSION, ...command } as Command)
  if (!result.ok) throw new WardenError(result.error.code, result.error.message, result.error.field)
  return result.value
}
