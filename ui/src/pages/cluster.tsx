/**
 * The cluster: this datacenter's servers (role, status, address), the leader, this agent's own Raft state, the
 * datacenters it knows, ACL replication and the cloud link. The server list and Raft state cannot be waited on, so
 * they are asked again every 2 s (one round in flight); the rest once.
 */
import type { JSX } from 'preact'
import { ApiError, request } from '../api.js'
import { ErrorMessage, Fields, formatTime, Loading, Page, Table } from '../components.js'
import { useLive, usePoll, useSession } from '../live.js'

interface Server {
  Name: string
  Datacenter: string
  Address: string
  Role: string
  Voter: boolean
  Status: string
}

interface RaftState {
  Node: string
  Role: string
  Term: number
  Leader: string
  CommitIndex: number
  AppliedIndex: number
  LastIndex: number
  LastContactMs: number
}

interface Replication {
  Enabled: boolean
  Running: boolean
  SourceDatacenter: string
  ReplicationType: string
  ReplicatedIndex: number
  LastSuccess: string
  LastError: string
  LastErrorMessage: string
}

interface LinkEnvelope {
  data?: { resourceId?: string; cloudClusterUrl?: string }
  status?: Record<string, { conditions?: Array<{ type: string; state: string; reason: string; message: string }> }>
}

const EVERY_MS = 2_000

export function ClusterPage(): JSX.Element {
  const { datacenters } = useSession()
  const view = usePoll(
    async (signal) => {
      const [servers, state] = await Promise.all([request<Server[]>('GET', '/v1/operator/servers', { signal }), request<RaftState>('GET', '/v1/operator/raft/state', { signal })])
      return { servers: servers.body, state: state.body }
    },
    EVERY_MS,
    'cluster',
  )
  const replication = useLive<Replication>('/v1/acl/replication', {}, { live: false })
  const link = useLive<LinkEnvelope>('/api/cloud/v2/link/global', {}, { live: false })
  const servers = view.data?.servers ?? []
  const leader = servers.find((server) => server.Role === 'leader')
  return (
    <Page title="Cluster">
      <ErrorMessage error={view.error} prefix="Could not read the servers" />
      {view.data === undefined ? (
        view.loading ? <Loading what="the servers" /> : null
      ) : (
        <>
          <p>
            Leader: <strong>{leader === undefined ? 'none known (an election may be under way)' : `${leader.Name} (${leader.Address})`}</strong>
          </p>
          <Table
            caption="Servers of this datacenter"
            rows={servers}
            rowKey={(server) => server.Name}
            empty="No servers."
            columns={[
              ['Server', (server) => server.Name],
              ['Role', (server) => server.Role],
              ['Status', (server) => (server.Status === 'alive' ? 'alive' : <strong>✖ {server.Status}</strong>)],
              ['Voter', (server) => (server.Voter ? 'yes' : 'no')],
              ['Address', (server) => <code>{server.Address}</code>],
            ]}
          />
          <h2>This agent</h2>
          <Fields
            rows={[
              ['Node', view.data.state.Node],
              ['Role', view.data.state.Role],
              ['Term', String(view.data.state.Term)],
              ['Commit index', String(view.data.state.CommitIndex)],
              ['Applied index', String(view.data.state.AppliedIndex)],
              ['Last log index', String(view.data.state.LastIndex)],
              ['Last contact with the leader', view.data.state.Role === 'leader' ? 'is the leader' : `${view.data.state.LastContactMs} ms ago`],
            ]}
          />
        </>
      )}
      <h2>Datacenters</h2>
      <p>{datacenters.length === 0 ? 'This one only.' : datacenters.join(', ')}</p>
      <h2>ACL replication</h2>
      <ErrorMessage error={replication.error} prefix="Could not read the replication status" />
      {replication.data === undefined ? null : replication.data.Enabled ? (
        <Fields
          rows={[
            ['Running', replication.data.Running ? 'yes' : 'no'],
            ['From', replication.data.SourceDatacenter],
            ['Type', replication.data.ReplicationType],
            ['Replicated index', String(replication.data.ReplicatedIndex)],
            ['Last success', formatTime(replication.data.LastSuccess)],
            ['Last error', replication.data.LastErrorMessage === '' ? '' : `${formatTime(replication.data.LastError)}: ${replication.data.LastErrorMessage}`],
          ]}
        />
      ) : (
        <p>Not replicating: this is the primary datacenter.</p>
      )}
      <h2>Cloud link</h2>
      <LinkStatus link={link.data} error={link.error} />
    </Page>
  )
}

function LinkStatus({ link, error }: { link: LinkEnvelope | undefined; error: ApiError | undefined }): JSX.Element | null {
  if (error !== undefined) return error.status === 404 ? <p>Not linked.</p> : <ErrorMessage error={error} prefix="Could not read the link" />
  if (link === undefined) return null
  const conditions = Object.values(link.status ?? {}).flatMap((status) => status.conditions ?? [])
  return (
    <Fields
      rows={[
        ['Resource', link.data?.resourceId ?? ''],
        ['Conditions', conditions.map((condition) => `${condition.type}: ${condition.state} (${condition.reason})${condition.message ? `: ${condition.message}` : ''}`).join('; ')],
      ]}
    />
  )
}
