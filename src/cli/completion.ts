/**
 * Shell completion the way Consul does it: bash (and zsh through bashcompinit) run `complete -C /path/to/warden
 * warden`, which starts warden with COMP_LINE and COMP_POINT set; warden prints the candidates, one per line.
 * `warden -autocomplete-install` adds that line to ~/.bashrc and ~/.zshrc (those that exist), and
 * `-autocomplete-uninstall` takes it out; `warden completion bash|zsh` prints it instead.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { homedir } from 'node:os'
import { join } from 'node:path'
import { complete } from './dispatch.js'
import type { CliIo } from './io.js'

export function completionScript(shell: string, binary: string): string | undefined {
  const quoted = `'${binary.replace(/'/g, `'\\''`)}'`
  if (shell === 'bash') return `complete -C ${quoted} warden\n`
  if (shell === 'zsh') return `autoload -U +X bashcompinit && bashcompinit\ncomplete -o nospace -C ${quoted} warden\n`
  return undefined
}

/** Answers a completion request; true when COMP_LINE was set (the process is a completion call). */
export function answerCompletion(io: CliIo): boolean {
  const line = io.env['COMP_LINE']
  if (line === undefined) return false
  const point = Number(io.env['COMP_POINT'] ?? line.length)
  for (const candidate of complete(line.slice(0, Number.isFinite(point) ? point : line.length))) io.stdout(`${candidate}\n`)
  return true
}

const MARKER = '# warden shell completion'

export function installCompletion(io: CliIo, binary: string, install: boolean): number {
  const home = io.env['HOME'] ?? homedir()
  let touched = 0
  for (const [file, shell] of [['.bashrc', 'bash'], ['.zshrc', 'zsh']] as const) {
    const path = join(home, file)
    if (!existsSync(path)) continue
    const text = readFileSync(path, 'utf8')
    const kept = text
      .split('\n')
      .filter((line, at, lines) => !line.startsWith(MARKER) && !(lines[at - 1]?.startsWith(MARKER) ?? false) && !/complete .*-C .* warden$/.test(line))
      .join('\n')
    const block = install ? `${MARKER}\n${completionScript(shell, binary)!.trimEnd().split('\n').join(` ${MARKER}\n`)}\n` : ''
    // The operator's lines stay as they were, blank ones at the end included; only a missing last newline is added.
    writeFileSync(path, `${kept === '' || kept.endsWith('\n') ? kept : `${kept}\n`}${block}`)
    io.stdout(`${install ? 'Installed' : 'Removed'} completion in ${path}\n`)
    touched += 1
  }
  if (touched === 0) {
    io.stderr(`Neither ${join(home, '.bashrc')} nor ${join(home, '.zshrc')} exists; add the line "warden completion bash" prints to your shell's startup file\n`)
    return 1
  }
  return 0
}
