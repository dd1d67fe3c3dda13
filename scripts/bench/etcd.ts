/**
 * A three-member etcd on loopback for `--compare etcd`: Debian's etcd-server binary, temporary data dirs on the same
 * disk as warden's, free ports, etcd's default settings (100 ms heartbeat, 1 s election timeout, WAL fsync on).
 * Loads go through its JSON gateway (POST /v3/kv/put, /v3/kv/range with base64 keys), the HTTP+JSON path closest to
 * warden's API.
 */
import { execFileSync, type ChildProcess } from 'node:child_process'
import { mkdir, mkdtemp, rm } from 'node:fs/promises'
import { openSync, closeSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { freePort } from '../../cluster/lib.js'
import { registerCleanup, signalIfOurs, spawnTracked, stopChild } from './children.js'
import { httpCall, keepAliveClients } from './http-client.js'
import type { Watched } from './procfs.js'

const READY_MS = 20_000

interface Member {
  name: string
  clientAddress: string
  peerAddress: string
  dataDir: string
  child: ChildProcess | undefined
}

/** The etcd binary and its version, or undefined when it is not installed. */
export function findEtcd(): { path: string; version: string } | undefined {
  try {
    const path = execFileSync('sh', ['-c', 'command -v etcd'], { encoding: 'utf8' }).trim()
    if (path === '') return undefined
    const version = /etcd Version: (\S+)/.exec(execFileSync(path, ['--version'], { encoding: 'utf8' }))?.[1] ?? 'unknown'
    return { path, version }
  } catch {
    return undefined // `command -v` exits 1 when there is no etcd.
  }
}

export function base64(text: string): string {
  return Buffer.from(text).toString('base64')
}

export class EtcdCluster {
  readonly label = 'etcd ×3'
  /** 64 keep-alive sockets to each member at most. */
  readonly clients = keepAliveClients(64)
  private readonly members: Member[]
  private readonly unregister: () => void

  private constructor(
    private readonly binary: string,
    private readonly root: string,
    members: Member[],
  ) {
    this.members = members
    this.unregister = registerCleanup({ stop: () => this.stop(), killNow: () => this.killNow() })
  }

  static async start(binary: string, size = 3): Promise<EtcdCluster> {
    const root = await mkdtemp(join(tmpdir(), 'etcd-bench-'))
    await mkdir(join(root, 'logs'))
    const members: Member[] = []
    for (let n = 1; n <= size; n++) {
      members.push({ name: `e${n}`, clientAddress: `127.0.0.1:${await freePort()}`, peerAddress: `127.0.0.1:${await freePort()}`, dataDir: join(root, `e${n}`), child: undefined })
    }
    const cluster = new EtcdCluster(binary, root, members)
    try {
      for (const member of members) cluster.spawnMember(member)
      await cluster.waitHealthy()
    } catch (error) {
      await cluster.stop().catch(() => undefined) // The start error is the one worth reporting.
      throw error
    }
    return cluster
  }

  nodes(): string[] {
    return this.members.map((member) => member.name)
  }

  address(name: string): string {
    return this.member(name).clientAddress
  }

  origin(name: string): string {
    return `http://${this.address(name)}`
  }

  pid(name: string): number {
    return this.member(name).child?.pid ?? 0
  }

  watched(leader: string): Watched[] {
    return this.members.map((member) => ({ label: member.name, role: member.name === leader ? 'leader' : 'follower', pid: member.child?.pid ?? 0 }))
  }

  /** JSON POST to a member's gateway. */
  async post<T>(name: string, path: string, body: unknown, timeoutMs = 10_000): Promise<T> {
    const answer = await httpCall(this.clients, this.address(name), 'POST', path, { body, timeoutMs })
    if (answer.status !== 200) throw new Error(`etcd ${name} ${path}: ${answer.status} ${answer.text.slice(0, 200)}`)
    return JSON.parse(answer.text) as T
  }

  /** The member every running member names as leader. */
  async leader(timeoutMs = 20_000): Promise<string> {
    const deadline = Date.now() + timeoutMs
    for (;;) {
      const running = this.members.filter((member) => member.child !== undefined)
      const answers = await Promise.all(
        running.map((member) =>
          this.post<{ leader: string; header: { member_id: string } }>(member.name, '/v3/maintenance/status', {}, 2_000).catch(() => undefined),
        ),
      )
      const leaderId = answers[0]?.leader
      if (leaderId !== undefined && leaderId !== '0' && answers.every((answer) => answer?.leader === leaderId)) {
        const position = answers.findIndex((answer) => answer?.header.member_id === leaderId)
        const member = running[position]
        if (member !== undefined) return member.name
      }
      if (Date.now() > deadline) throw new Error(`etcd: no agreed leader within ${timeoutMs} ms`)
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
  }

  /** The member's applied index and the raft index it knows of. */
  async indexes(name: string): Promise<{ applied: number; raft: number }> {
    const status = await this.post<{ raftIndex: string; raftAppliedIndex: string }>(name, '/v3/maintenance/status', {}, 2_000)
    return { applied: Number(status.raftAppliedIndex), raft: Number(status.raftIndex) }
  }

  /** SIGKILL, sent synchronously (before the returned promise exists), then waits for the exit. */
  kill(name: string): Promise<void> {
    const member = this.member(name)
    const child = member.child
    if (child === undefined) return Promise.reject(new Error(`etcd ${name} is not running`))
    const exited = new Promise<void>((resolve) => (child.exitCode !== null || child.signalCode !== null ? resolve() : child.once('exit', () => resolve())))
    signalIfOurs(child.pid ?? 0, member.dataDir, 'SIGKILL')
    return exited.then(() => {
      member.child = undefined
    })
  }

  /** Starts a killed member again on its data dir (etcd ignores the --initial-cluster flags once it has data). */
  async restart(name: string): Promise<void> {
    const member = this.member(name)
    if (member.child !== undefined) throw new Error(`etcd ${name} is running`)
    this.spawnMember(member)
    await this.waitHealthy()
  }

  async stop(): Promise<void> {
    this.unregister()
    this.clients.close()
    await Promise.all(
      this.members.map(async (member) => {
        if (member.child !== undefined) await stopChild(member.child, 10_000)
        member.child = undefined
      }),
    )
    await rm(this.root, { recursive: true, force: true })
  }

  private member(name: string): Member {
    const member = this.members.find((candidate) => candidate.name === name)
    if (member === undefined) throw new Error(`no etcd member ${name}`)
    return member
  }

  private spawnMember(member: Member): void {
    const initialCluster = this.members.map((other) => `${other.name}=http://${other.peerAddress}`).join(',')
    const log = openSync(join(this.root, 'logs', `${member.name}.log`), 'a')
    // The data dir is the marker: it names this member's process and no one else's.
    member.child = spawnTracked(
      this.binary,
      [
        '--name', member.name,
        '--listen-client-urls', `http://${member.clientAddress}`,
        '--advertise-client-urls', `http://${member.clientAddress}`,
        '--listen-peer-urls', `http://${member.peerAddress}`,
        '--initial-advertise-peer-urls', `http://${member.peerAddress}`,
        '--initial-cluster', initialCluster,
        '--initial-cluster-token', 'warden-bench',
        '--initial-cluster-state', 'new',
        '--data-dir', member.dataDir,
      ],
      { stdio: ['ignore', log, log] },
      member.dataDir,
    )
    closeSync(log)
    const child = member.child
    child.once('exit', () => {
      if (member.child === child) member.child = undefined
    })
  }

  private async waitHealthy(): Promise<void> {
    const deadline = Date.now() + READY_MS
    for (const member of this.members) {
      if (member.child === undefined) continue
      for (;;) {
        const health = await httpCall(this.clients, member.clientAddress, 'GET', '/health', { timeoutMs: 1_000 }).catch(() => undefined)
        if (health?.status === 200 && health.text.includes('"true"')) break
        if (member.child === undefined) throw new Error(`etcd ${member.name} exited (log: ${join(this.root, 'logs', `${member.name}.log`)})`)
        if (Date.now() > deadline) throw new Error(`etcd ${member.name} was not healthy within ${READY_MS} ms`)
        await new Promise((resolve) => setTimeout(resolve, 100))
      }
    }
  }

  private killNow(): void {
    for (const member of this.members) if (member.child?.pid !== undefined) signalIfOurs(member.child.pid, member.dataDir, 'SIGKILL')
  }
}
