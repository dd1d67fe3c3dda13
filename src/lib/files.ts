/** Small file-system helpers shared by the parts that own files on disk (the state's databases, the agent's data dir). */
import { open, stat } from 'node:fs/promises'

export async function pathExists(path: string): Promise<boolean> {
  try {
    await stat(path)
    return true
  } catch {
    // Missing, or unreadable: either way there is nothing here to use.
    return false
  }
}

/** Flushes a file or a directory to disk (a directory's fsync makes the renames and removals in it durable). */
export async function fsyncPath(path: string): Promise<void> {
  const handle = await open(path, 'r')
  try {
    await handle.sync()
  } finally {
    await handle.close()
  }
}
