/** What a command may touch of the process, so tests can run commands in-process and read what they wrote. */
import { readFile } from 'node:fs/promises'

export interface CliIo {
  stdout(text: string): void
  stderr(text: string): void
  /** All of standard input, for `-rules -` and `config write -`. */
  readStdin(): Promise<string>
  env: Record<string, string | undefined>
  /** Whether standard output is a terminal (progress lines, colours). */
  isTty: boolean
}

export function processCliIo(): CliIo {
  return {
    stdout: (text) => process.stdout.write(text),
    stderr: (text) => process.stderr.write(text),
    readStdin: async () => {
      const chunks: Buffer[] = []
      for await (const chunk of process.stdin) chunks.push(chunk as Buffer)
      return Buffer.concat(chunks).toString('utf8')
    },
    env: process.env,
    isTty: process.stdout.isTTY === true,
  }
}

/**
 * Consul's value forms for files: `@path` reads the file, `-` reads standard input, anything else is the value
 * itself. Used by -rules, -config, -bearer-token-file and config write.
 */
export async function valueOrFile(io: CliIo, value: string): Promise<string> {
  if (value === '-') return io.readStdin()
  if (!value.startsWith('@')) return value
  const path = value.slice(1)
  try {
    return await readFile(path, 'utf8')
  } catch (error) {
    throw new FileError(path, (error as NodeJS.ErrnoException).code ?? (error as Error).message)
  }
}

/** A file named on the command line that cannot be read: the path and the system's reason. */
export class FileError extends Error {
  override readonly name = 'FileError'
  constructor(
    readonly path: string,
    readonly reason: string,
    /** The flag that named the file, when the message should say which. */
    flag?: string,
  ) {
    const why = reason === 'ENOENT' ? 'no such file' : reason === 'EACCES' ? 'permission denied' : reason
    super(`${flag === undefined ? '' : `${flag}: `}cannot read ${path}: ${why}`)
  }
}
