/** An in-memory CliIo for the CLI's unit tests: what a command writes is kept in `out` and `err`, stdin is a string. */
import type { CliIo } from '../../../src/cli/io.js'

export class MemoryIo implements CliIo {
  out = ''
  err = ''
  isTty = false

  constructor(
    public env: Record<string, string | undefined> = {},
    private readonly input = '',
  ) {}

  stdout = (text: string): void => {
    this.out += text
  }

  stderr = (text: string): void => {
    this.err += text
  }

  readStdin = async (): Promise<string> => this.input
}
