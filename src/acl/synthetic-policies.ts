/**
 * Synthetic policies: the policies Consul generates on the fly for service identities, node identities and templated
 * policies (agent/structs/acl.go, acl_ce.go, acl_templated_policy.go). They are never stored; a token's effective
 * policy set includes them at resolution time, and the templated-policy preview endpoint returns one.
 *
 * Every field is byte-for-byte what Consul produces, because clients and replication compare IDs and hashes:
 * - the rules text is a fixed template with the name substituted (leading newline, tab indentation, no final newline);
 * - the ID is `hex(rules)` followed by the FNV-128a hash of nothing, see `syntheticPolicyId`;
 * - the Hash is Consul's ACLPolicy.SetHash, see `policyHash`.
 */
import { blake2b } from '@noble/hashes/blake2.js'

export interface SyntheticPolicy {
  ID: string
  Name: string
  Description: string
  Rules: string
  /** Empty means valid in every datacenter. Consul omits the field from JSON when it is empty. */
  Datacenters: string[]
  Hash: string
  CreateIndex: 0
  ModifyIndex: 0
}

// The FNV-128a offset basis, i.e. the digest of an empty input. Consul computes the ID as
// `fmt.Sprintf("%x", fnv.New128a().Sum([]byte(rules)))`: Go's Hash.Sum(b) appends the current digest to b rather than
// hashing b, so the "hash" is the rules bytes themselves followed by the digest of nothing.
const FNV128A_EMPTY_DIGEST_HEX = '6c62272e07bb014262b821756295c58d'

// Consul's aclPolicyTemplateServiceIdentity (acl_ce.go). The service may register itself and its sidecar proxy, and
// discover every other service and node.
function serviceIdentityRules(serviceName: string): string {
  return (
    `\nservice "${serviceName}" {\n\tpolicy = "write"\n}\n` +
    `service "${serviceName}-sidecar-proxy" {\n\tpolicy = "write"\n}\n` +
    `service_prefix "" {\n\tpolicy = "read"\n}\n` +
    `node_prefix "" {\n\tpolicy = "read"\n}`
  )
}

// Consul's aclPolicyTemplateNodeIdentity (acl_ce.go). A node needs node:write on itself to register and update its
// coordinates, and service:read everywhere so anti-entropy can see what is registered on it.
function nodeIdentityRules(nodeName: string): string {
  return `\nnode "${nodeName}" {\n\tpolicy = "write"\n}\n` + `service_prefix "" {\n\tpolicy = "read"\n}`
}

/** Consul's synthetic policy ID: the lowercase hex of the rules text followed by the FNV-128a offset basis. */
export function syntheticPolicyId(rules: string): string {
  return Buffer.from(rules, 'utf8').toString('hex') + FNV128A_EMPTY_DIGEST_HEX
}

/**
 * Consul's ACLPolicy.SetHash: BLAKE2b-256 over Name, Description, Rules and then each datacenter, written one after
 * another with no separators, encoded as standard padded base64 (how Go's JSON encodes a []byte). The ID and the raft
 * indexes are not part of the hash.
 */
export function policyHash(fields: { Name: string; Description: string; Rules: string; Datacenters: string[] }): string {
  const hash = blake2b.create({ dkLen: 32 })
  const encoder = new TextEncoder()
  hash.update(encoder.encode(fields.Name))
  hash.update(encoder.encode(fields.Description))
  hash.update(encoder.encode(fields.Rules))
  for (const datacenter of fields.Datacenters) hash.update(encoder.encode(datacenter))
  return Buffer.from(hash.digest()).toString('base64')
}

/**
 * Builds the synthetic policy for a rules text. Shared by identities and templated policies, which differ only in
 * their rules, description and datacenters.
 */
export function syntheticPolicyFromRules(rules: string, description: string, datacenters: string[]): SyntheticPolicy {
  const id = syntheticPolicyId(rules)
  const name = `synthetic-policy-${id}`
  const ownDatacenters = [...datacenters]
  return {
    ID: id,
    Name: name,
    Description: description,
    Rules: rules,
    Datacenters: ownDatacenters,
    Hash: policyHash({ Name: name, Description: description, Rules: rules, Datacenters: ownDatacenters }),
    CreateIndex: 0,
    ModifyIndex: 0,
  }
}

/**
 * The synthetic policy of a service identity. `datacenters` is the identity's list as given (empty: everywhere); the
 * caller deduplicates and sorts identities first, as Consul does, since the order feeds the Hash.
 */
export function serviceIdentityPolicy(serviceName: string, datacenters: string[]): SyntheticPolicy {
  return syntheticPolicyFromRules(
    serviceIdentityRules(serviceName),
    `synthetic policy for service identity ${goQuote(serviceName)}`,
    datacenters,
  )
}

/** The synthetic policy of a node identity, valid only in the node's own datacenter. */
export function nodeIdentityPolicy(nodeName: string, datacenter: string): SyntheticPolicy {
  return syntheticPolicyFromRules(nodeIdentityRules(nodeName), `synthetic policy for node identity ${goQuote(nodeName)}`, [
    datacenter,
  ])
}

// Consul formats the description with Go's %q. Identity names are validated to lowercase alphanumerics, '-' and '_'
// before they are stored, and for those characters JSON string quoting gives the same bytes as %q.
function goQuote(text: string): string {
  return JSON.stringify(text)
}
