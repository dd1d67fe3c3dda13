/**
 * The built-in records every cluster starts with (readings.md): the global-management policy and the anonymous
 * token, with fixed IDs, written by the first command of a new cluster's log.
 */
export const GLOBAL_MANAGEMENT_POLICY_ID = '00000000-0000-0000-0000-000000000001'
export const GLOBAL_MANAGEMENT_POLICY_NAME = 'global-management'
export const ANONYMOUS_TOKEN_ID = '00000000-0000-0000-0000-000000000002'
export const ANONYMOUS_TOKEN_SECRET = 'anonymous'
/** IDs beginning with this are reserved for built-in records and cannot be claimed by a create. */
export const RESERVED_ID_PREFIX = '00000000-0000-0000-0000-0000000000'

export const GLOBAL_MANAGEMENT_RULES = `
acl = "write"
agent_prefix "" {
	policy = "write"
}
event_prefix "" {
	policy = "write"
}
key_prefix "" {
	policy = "write"
}
keyring = "write"
node_prefix "" {
	policy = "write"
}
operator = "write"
mesh = "write"
peering = "write"
query_prefix "" {
	policy = "write"
}
service_prefix "" {
	policy = "write"
	intentions = "write"
}
session_prefix "" {
	policy = "write"
}`

export const GLOBAL_MANAGEMENT_DESCRIPTION = 'Builtin Policy that grants unlimited access'
