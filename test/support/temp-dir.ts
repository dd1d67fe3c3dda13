/**
 * Temporary directories and the resources opened inside them, cleaned up after every test even when it fails.
 *
 * A suite calls `useTempDirs()` once at the top of its `describe`; each test then asks for directories with
 * `dirs.make()` and registers closers (a LevelDB to close, a child process to kill) with `dirs.defer()`. After each
 * test the closers run in reverse order, then the directories are removed, and `afterEach` fails the test if any of
 * that went wrong: a test leaves nothing behind.
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

export class TempDirs {
  private readonly directories: string[] = []
  private readonly closers: Array<() => unknown> = []

  /** A fresh, empty directory under the OS temporary directory. */
  async make(prefix = 'warden-unit-'): Promise<string> {
    const directory = await mkdtemp(join(tmpdir(), prefix))
    this.directories.push(directory)
    return directory
  }

  /** Runs `closer` at cleanup, before the directories are removed (last registered, first run). */
  defer(closer: () => unknown): void {
    this.closers.push(closer)
  }

  /** Closes everything deferred, then removes every directory; rethrows the first failure after trying them all. */
  async cleanup(): Promise<void> {
    const failures: unknown[] = []
    for (const closer of this.closers.splice(0).reverse()) {
      try {
        await closer()
      } catch (error) {
        failures.push(error)
      }
    }
    for (const directory of this.directories.splice(0)) {
      try {
        await rm(directory, { recursive: true, force: true })
      } catch (error) {
        failures.push(error)
      }
    }
    if (failures.length > 0) throw new Error(`cleanup failed ${failures.length} time(s)`, { cause: failures[0] })
  }

  /** How many directories and closers are still registered (0 after cleanup). */
  get pending(): number {
    return this.directories.length + this.closers.length
  }
}

/** Registers an `afterEach` in the calling suite that cleans up whatever the test made. */
export function useTempDirs(): TempDirs {
  const dirs = new TempDirs()
  afterEach(async () => {
    await dirs.cleanup()
  })
  return dirs
}
