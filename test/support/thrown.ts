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
