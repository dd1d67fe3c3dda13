/**
 * The cluster, from GET /v1/operator/cluster (one blocking query: it wakes when a server's role, liveness or term, the
 * leader or the membership changes, and at most once a second as indexes move): every server of this datacenter as
 * the leader sees it (role, alive or failed, its own term, commit, applied and last index, the leader's match index and
 * last contact), the leader, the datacenters, ACL replication and its lag in a secondary, and the cloud link.
 *
 * An agent without that endpoint (an older one) gets the servers (GET /v1/operator/servers) and its own Raft state,
 * asked again every 2 s with one round in flight, and ACL replication and the link once.
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

interface ClusterServer {
  Name: string
  Address: string
  Role: string
  Voter: boolean
  Leader: boolean
  Status: string
  Term: number | null
  CommitIndex: number | null
  AppliedIndex: number | null
  LastIndex: number | null
  MatchIndex: number | null
  LastContactMs: number | null
  Error?: string
}

interface ClusterStatus {
  Datacenter: string
  PrimaryDatacenter: string
  Datacenters: string[]
  AnsweredBy: string
  Leader: string
  LeaderAddress: string
  Term: number
  Servers: ClusterServer[]
  Replication: (Replication & { ReplicatedTokenIndex?: number; ReplicatedRoleIndex?: number; ReplicatedConfigEntryIndex?: number; ReplicationLagSeconds?: number }) | null
  CloudLink: { ResourceID: string; Linked: boolean | null; Status: LinkEnvelope['status'] | null } | null
}

/** Go's zero time, which Consul's replication status uses for "never". */
const NEVER = '0001-01-01T00:00:00Z'

function when(time: string | undefined): string {
  return time === undefined || time === '' || time === NEVER ? 'never' : formatTime(time)
}

function count(value: number | null): string {
  return value === null ? '' : String(value)
}

export function ClusterPage(): JSX.Element {
  const cluster = useLive<ClusterStatus>('/v1/operator/cluster')
  if (cluster.error?.status === 404 && cluster.error.message.startsWith('Invalid URL path')) return <LegacyCluster />
  const data = cluster.data
  return (
    <Page title="Cluster">
      <ErrorMessage error={cluster.error} prefix="Could not read the cluster" polite />
      {data === undefined ? (
        cluster.loading ? <Loading what="the cluster" /> : null
      ) : (
        <>
          <p>
            Leader: <strong>{data.Leader === '' ? 'none known (an election may be under way)' : `${data.Leader} (${data.LeaderAddress})`}</strong>, term {data.Term}. Datacenter{' '}
            {data.Datacenter}
            {data.Datacenter === data.PrimaryDatacenter ? ' (the primary)' : `, replicating from ${data.PrimaryDatacenter}`}; as {data.AnsweredBy} sees it.
          </p>
          <Table
            caption={`Servers of this datacenter (${data.Datacenter})`}
            rows={data.Servers}
            rowKey={(server) => server.Name}
            empty="No servers."
            columns={[
              ['Server', (server) => server.Name],
              ['Role', (server) => server.Role],
              ['Status', (server) => (server.Status === 'alive' ? 'alive' : <strong>✖ {server.Status}</strong>)],
              ['Term', (server) => count(server.Term)],
              ['Commit index', (server) => count(server.CommitIndex)],
              ['Applied index', (server) => count(server.AppliedIndex)],
              ['Last index', (server) => count(server.LastIndex)],
              ['Match index', (server) => count(server.MatchIndex)],
              ['Last contact', (server) => (server.Leader ? 'leader' : server.LastContactMs === null ? '' : `${server.LastContactMs} ms ago`)],
              ['Address', (server) => <code>{server.Address}</code>],
              ['Note', (server) => server.Error ?? ''],
            ]}
          />
          <h2>Datacenters</h2>
          <p>{data.Datacenters.join(', ')}</p>
          <h2>ACL replication</h2>
          {data.Replication === null ? (
            <p>Not replicating: {data.Datacenter === data.PrimaryDatacenter ? 'this is the primary datacenter' : 'replication is off'}.</p>
          ) : (
            <Fields
              rows={[
                ['Running', data.Replication.Running ? 'yes' : 'no'],
                ['From', data.Replication.SourceDatacenter],
                ['Type', data.Replication.ReplicationType],
                ['Lag', data.Replication.ReplicationLagSeconds === undefined ? '' : `${data.Replication.ReplicationLagSeconds} s`],
                [
                  'Replicated indexes',
                  `policies ${data.Replication.ReplicatedIndex}, roles ${data.Replication.ReplicatedRoleIndex ?? 0}, tokens ${data.Replication.ReplicatedTokenIndex ?? 0}, config ${data.Replication.ReplicatedConfigEntryIndex ?? 0}`,
                ],
                ['Last success', when(data.Replication.LastSuccess)],
                ['Last error', data.Replication.LastErrorMessage === '' ? '' : `${when(data.Replication.LastError)}: ${data.Replication.LastErrorMessage}`],
              ]}
            />
          )}
          <h2>Cloud link</h2>
          {data.CloudLink === null ? (
            <p>Not linked.</p>
          ) : (
            <Fields
              rows={[
                ['Resource', data.CloudLink.ResourceID],
                ['Linked', data.CloudLink.Linked === null ? 'not tried yet' : data.CloudLink.Linked ? 'yes' : '✖ no'],
                [
                  'Conditions',
                  Object.values(data.CloudLink.Status ?? {})
                    .flatMap((status) => status.conditions ?? [])
                    .map((condition) => `${condition.type}: ${condition.state} (${condition.reason})${condition.message ? `: ${condition.message}` : ''}`)
                    .join('; '),
                ],
              ]}
            />
          )}
        </>
      )}
    </Page>
  )
}

function LegacyCluster(): JSX.Element {
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
      <ErrorMessage error={view.error} prefix="Could not read the servers" polite />
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
      <ErrorMessage error={replication.error} prefix="Could not read the replication status" polite />
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
  if (error !== undefined) return error.status === 404 ? <p>Not linked.</p> : <ErrorMessage error={error} prefix="Could not read the link" polite />
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
