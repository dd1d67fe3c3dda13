/**
 * A build of an earlier release of warden, for the upgrade test (test/upgrade/upgrade.test.ts): the tree of a commit,
 * taken with `git archive` (the main worktree is never touched), installed with `npm ci` and built with
 * `npm run build` in a directory of its own under the OS temporary directory, keyed by the full commit hash.
 *
 * The build is made once and reused by every later run: it is assembled in a private directory and renamed into place
 * only when complete, so an interrupted build is never taken for a finished one, and two runs building at once both
 * end with the same finished directory.
 *
 * From a shell: `npx tsx scripts/upgrade/old-release.ts [COMMIT]` prints the path of the built CLI.
 */
import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { access, mkdir, rename, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'

export const REPO_ROOT = resolve(import.meta.dirname, '../..')

/** The release before the Raft refactor (one Raft path, founding record, rebuilt servers). */
export const PREVIOUS_RELEASE = '8239138'

const COMPLETE = '.warden-release-complete'

export interface ReleaseBuild {
  /** The full hash of the commit built. */
  commit: string
  /** The directory holding the tree, its node_modules and dist/. */
  root: string
  /** dist/cli/main.js of that build. */
  cli: string
  /** Whether this call built it (false: a finished build was found and reused). */
  built: boolean
}

async function exists(path: string): Promise<boolean> {
  return access(path).then(
    () => true,
    () => false,
  )
}

/** Runs a command to completion; rejects with the tail of its output if it fails. */
function run(command: string, args: string[], cwd: string): Promise<string> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(command, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, npm_config_fund: 'false', npm_config_audit: 'false' } })
    let output = ''
    const keep = (chunk: Buffer): void => {
      output = (output + chunk.toString()).slice(-8_000)
    }
    child.stdout.on('data', keep)
    child.stderr.on('data', keep)
    child.once('error', reject)
    child.once('close', (code, signal) => {
      if (code === 0) resolvePromise(output)
      else reject(new Error(`${command} ${args.join(' ')} (in ${cwd}) failed with ${code ?? signal}:\n${output}`))
    })
  })
}

/** The cache directory of a commit's build. */
export function releaseDirectory(fullCommit: string): string {
  return join(tmpdir(), `warden-release-${fullCommit}`)
}

/**
 * Builds `commit` of the repository at `repo` (or reuses the finished build of an earlier run) and returns where its
 * CLI is. `progress` hears one line per step.
 */
export async function buildRelease(commit: string = PREVIOUS_RELEASE, options: { repo?: string; progress?: (line: string) => void } = {}): Promise<ReleaseBuild> {
  const repo = options.repo ?? REPO_ROOT
  const progress = options.progress ?? (() => undefined)
  const full = (await run('git', ['-C', repo, 'rev-parse', '--verify', `${commit}^{commit}`], repo)).trim()
  const root = releaseDirectory(full)
  const cli = join(root, 'dist', 'cli', 'main.js')
  if ((await exists(join(root, COMPLETE))) && (await exists(cli))) return { commit: full, root, cli, built: false }

  const building = `${root}.building-${process.pid}-${randomBytes(4).toString('hex')}`
  try {
    await mkdir(building, { recursive: true })
    progress(`extracting ${full.slice(0, 12)} into ${building}`)
    // `git archive | tar -x`, with a failure of either side reported.
    await run('bash', ['-o', 'pipefail', '-c', 'git -C "$1" archive "$2" | tar -x -C "$3"', 'bash', repo, full, building], repo)
    progress('npm ci')
    await run('npm', ['ci', '--no-audit', '--no-fund'], building)
    progress('npm run build')
    await run('npm', ['run', 'build'], building)
    if (!(await exists(join(building, 'dist', 'cli', 'main.js')))) throw new Error(`the build of ${full} has no dist/cli/main.js`)
    await writeFile(join(building, COMPLETE), `${full}\n`)
    // A finished build may have appeared meanwhile (another run): keep it and drop ours.
    if (await exists(join(root, COMPLETE))) {
      await rm(building, { recursive: true, force: true })
    } else {
      await rm(root, { recursive: true, force: true })
      await rename(building, root).catch(async (error: unknown) => {
        if (!(await exists(join(root, COMPLETE)))) throw error
        await rm(building, { recursive: true, force: true })
      })
    }
    progress(`built ${cli}`)
    return { commit: full, root, cli, built: true }
  } catch (error) {
    await rm(building, { recursive: true, force: true })
    throw error
  }
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === resolve(import.meta.filename)) {
  buildRelease(process.argv[2] ?? PREVIOUS_RELEASE, { progress: (line) => process.stderr.write(`${line}\n`) }).then(
    (build) => process.stdout.write(`${build.cli}\n`),
    (error: unknown) => {
      process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`)
      process.exit(1)
    },
  )
}
