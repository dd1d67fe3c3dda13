/**
 * The cluster, from GET /v1/operator/cluster (one blocking query: it wakes when a server's role, liveness or term, the
 * leader or the membership changes, and at most once a second as indexes move): every server of this datacenter as
 * the leader sees it (role, alive or failed, its own term, commit, applied and last index, the leader's match index and
 * last contact), the leader, the datacenters, ACL replication and its lag in a secondary, and the cloud link.
 */
import type { JSX } from 'preact'
import { ErrorMessage, Fields, formatTime, Loading, Page, Table } from '../components.js'
import { useLive } from '../live.js'

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
