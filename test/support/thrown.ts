/** The error of type `type` that `run` throws; any other error is thrown on, and no error at all fails the test. */
export function thrown<E extends Error>(run: () => unknown, type: abstract new (...args: never[]) => E): E {
  try {
    run()
  } catch (error) {
    if (error instanceof type) return error
    throw error
  }
  throw new Error(`expected ${type.name} to be thrown`)
}

/** The error of type `type` that `promise` rejects with; any other error, or an answer, fails the test. */
export async function rejection<E extends Error>(promise: Promise<unknown>, type: abstract new (...args: never[]) => E): Promise<E> {
  const outcome = await promise.then(
    () => undefined,
    (error: unknown) => error,
  )
  if (outcome instanceof type) return outcome
  throw new Error(`expected a rejection with ${type.name}, got ${outcome === undefined ? 'an answer' : String(outcome)}`)
}
