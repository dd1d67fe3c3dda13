/**
 * The one deterministic function that turns a command into writes. A table maps each command type to its apply
 * function (as Consul's fsm registerCommand does). Apply never reads the clock or randomness: time-dependent inputs
 * travel in the command.
 */
import { assert } from '../lib/assert.js'
import { applyError, bareToken, type ApplyResult, type Command, type TokenCreate } from './commands.js'
import {
  ANONYMOUS_TOKEN_ID,
  ANONYMOUS_TOKEN_SECRET,
  GLOBAL_MANAGEMENT_DESCRIPTION,
  GLOBAL_MANAGEMENT_POLICY_ID,
  GLOBAL_MANAGEMENT_POLICY_NAME,
  GLOBAL_MANAGEMENT_RULES,
} from './builtins.js'
import { BOOTSTRAP_KEY } from './keys.js'
import { DEFAULT_NAMESPACE } from './records.js'
import { encode, decode } from './codec.js'
import { getRecord, policySpec, tokenBySecret, tokenSpec } from './tables.js'
import { cloneToken, createToken, deleteExpiredTokens, deleteToken, updateToken } from './acl-tokens.js'
import { deletePolicy, deleteRole, setPolicy, setRole } from './acl-policies.js'
import { createLoginToken } from './acl-login.js'
import { deleteAuthMethod, deleteBindingRule, setAuthMethod, setBindingRule } from './acl-auth-methods.js'
import { applyConfigEntry, deleteConfigEntry } from './config-entries.js'
import { deleteLink, setLink, setLinkStatus } from './link.js'
import type { Txn } from './txn.js'
import { deleteMember, setMember } from './members.js'
import { replicate } from './replication.js'

type Handler<T extends Command['type']> = (txn: Txn, command: Extract<Command, { type: T }>, index: number) => Promise<ApplyResult>

const handlers: { [T in Command['type']]: Handler<T> } = {
  'acl.init': (txn, command, index) => initAcl(txn, command.bootstrapToken, index),
  'acl.bootstrap': (txn, command, index) => bootstrap(txn, command.token, index),
  'acl.token.ensure': (txn, command, index) => ensureToken(txn, command.token, index),
  'acl.token.create': (txn, command, index) => createToken(txn, command.token, index),
  'acl.token.update': (txn, command, index) => updateToken(txn, command.token, index),
  'acl.token.clone': (txn, command, index) => cloneToken(txn, command.sourceAccessorID, command.token, index),
  'acl.token.delete': (txn, command) => deleteToken(txn, command.AccessorID),
  'acl.login': (txn, command, index) => createLoginToken(txn, command.login, index),
  'acl.token.delete-expired': (txn, command) => deleteExpiredTokens(txn, command.AccessorIDs, command.now),
  'acl.policy.create': (txn, command, index) => setPolicy(txn, command.policy, index, 'create'),
  'acl.policy.update': (txn, command, index) => setPolicy(txn, command.policy, index, 'update'),
  'acl.policy.delete': (txn, command) => deletePolicy(txn, command.ID),
  'acl.role.create': (txn, command, index) => setRole(txn, command.role, index, 'create'),
  'acl.role.update': (txn, command, index) => setRole(txn, command.role, index, 'update'),
  'acl.role.delete': (txn, command) => deleteRole(txn, command.ID),
  'acl.auth-method.create': (txn, command, index) => setAuthMethod(txn, command.method, index, 'create'),
  'acl.auth-method.update': (txn, command, index) => setAuthMethod(txn, command.method, index, 'update'),
  'acl.auth-method.delete': (txn, command) => deleteAuthMethod(txn, command.Namespace, command.Name),
  'acl.binding-rule.create': (txn, command, index) => setBindingRule(txn, command.rule, index, 'create'),
  'acl.binding-rule.update': (txn, command, index) => setBindingRule(txn, command.rule, index, 'update'),
  'acl.binding-rule.delete': (txn, command) => deleteBindingRule(txn, command.ID),
  'config.apply': (txn, command, index) => applyConfigEntry(txn, command.entry, command.cas, index),
  'config.delete': (txn, command) => deleteConfigEntry(txn, command, command.cas),
  'link.set': (txn, command, index) => setLink(txn, command.link, command.version, index),
  'link.delete': (txn, command) => deleteLink(txn, command.version),
  'link.status': (txn, command, index) => setLinkStatus(txn, command.status, index),
  'raft.member.set': (txn, command, index) => setMember(txn, command.Node, command.Address, index, command.Incarnation),
  'raft.member.delete': (txn, command) => deleteMember(txn, command.Node),
  'acl.replicate': (txn, command, index) => replicate(txn, command, index),
  // A restore's commands change the state beyond one batch: StateStore applies them itself (restore.ts).
  'restore.begin': restoreNotHere,
  'restore.chunk': restoreNotHere,
  'restore.commit': restoreNotHere,
  'restore.abort': restoreNotHere,
  noop: async () => ({ ok: true }),
}

function restoreNotHere(_txn: Txn, command: Command): Promise<ApplyResult> {
  throw new Error(`${command.type} is applied by the state store, never dispatched`)
}

export function dispatch(txn: Txn, command: Command, index: number): Promise<ApplyResult> {
  const handler = handlers[command.type] as Handler<typeof command.type> | undefined
  assert(handler !== undefined, `no apply function for command type ${command.type}`)
  return handler(txn, command as never, index)
}

async function initAcl(txn: Txn, bootstrapToken: TokenCreate | undefined, index: number): Promise<ApplyResult> {
  if ((await getRecord(txn, policySpec, GLOBAL_MANAGEMENT_POLICY_ID)) === undefined) {
    const result = await setPolicy(
      txn,
      {
        ID: GLOBAL_MANAGEMENT_POLICY_ID,
        Name: GLOBAL_MANAGEMENT_POLICY_NAME,
        Description: GLOBAL_MANAGEMENT_DESCRIPTION,
        Rules: GLOBAL_MANAGEMENT_RULES,
        Datacenters: [],
        Namespace: DEFAULT_NAMESPACE,
      },
      index,
      'create',
    )
    if (!result.ok) return result
  }
  if ((await getRecord(txn, tokenSpec, ANONYMOUS_TOKEN_ID)) === undefined) {
    const result = await createToken(
      txn,
      bareToken({
        AccessorID: ANONYMOUS_TOKEN_ID,
        SecretID: ANONYMOUS_TOKEN_SECRET,
        Description: 'Anonymous Token',
        // The anonymous token predates every request; the epoch marks it as built in.
        CreateTime: '1970-01-01T00:00:00Z',
      }),
      index,
    )
    if (!result.ok) return result
  }
  if (bootstrapToken !== undefined) return bootstrap(txn, bootstrapToken, index)
  return { ok: true }
}

async function bootstrap(txn: Txn, token: TokenCreate, index: number): Promise<ApplyResult> {
  const done = await txn.get(BOOTSTRAP_KEY)
  if (done !== undefined) {
    return applyError('bootstrap_done', `ACL bootstrap no longer allowed (reset index: ${decode<number>(done)})`)
  }
  const result = await createToken(txn, { ...token, Policies: [{ ID: GLOBAL_MANAGEMENT_POLICY_ID }] }, index)
  if (result.ok) txn.put(BOOTSTRAP_KEY, encode(index))
  return result
}

/** The configured initial management token: created if no token has its secret, and then bootstrapping is over. */
async function ensureToken(txn: Txn, token: TokenCreate, index: number): Promise<ApplyResult> {
  const existing = await tokenBySecret(txn, token.SecretID)
  if (existing !== undefined) return { ok: true, value: existing }
  const result = await createToken(txn, { ...token, Policies: [{ ID: GLOBAL_MANAGEMENT_POLICY_ID }] }, index)
  if (result.ok && (await txn.get(BOOTSTRAP_KEY)) === undefined) txn.put(BOOTSTRAP_KEY, encode(index))
  return result
}
