/**
 * Assertions guard invariants. A failed assertion is a bug: the process should stop rather than
 * continue in a state nobody reasoned about (TigerBeetle's "Safety" section).
 */
export class AssertionError extends Error {
  override readonly name = 'AssertionError'
}

export function assert(condition: unknown, message: string): asserts condition {
  if (!condition) throw new AssertionError(message)
}

export function unreachable(value: never, message = 'unreachable'): never {
  throw new AssertionError(`${message}: ${JSON.stringify(value)}`)
}
