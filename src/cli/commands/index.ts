/** Every operator command, in the order `warden -help` lists the families. */
import type { Command } from '../command.js'
import { authMethodCreate, authMethodDelete, authMethodList, authMethodRead, authMethodUpdate } from './acl-auth-method.js'
import { bindingRuleCreate, bindingRuleDelete, bindingRuleList, bindingRuleRead, bindingRuleUpdate } from './acl-binding-rule.js'
import { policyCreate, policyDelete, policyList, policyRead, policyUpdate } from './acl-policy.js'
import { roleCreate, roleDelete, roleList, roleRead, roleUpdate } from './acl-role.js'
import { templatedPolicyList, templatedPolicyPreview, templatedPolicyRead } from './acl-templated-policy.js'
import { aclBootstrap, tokenClone, tokenCreate, tokenDelete, tokenList, tokenRead, tokenUpdate } from './acl-token.js'
import { tokenPermissions } from './acl-token-permissions.js'
import { configDelete, configList, configRead, configWrite } from './config.js'
import { login, logout } from './login.js'
import { catalogDatacenters, keygen, listPeers, members, removePeer, transferLeader } from './operator.js'
import { snapshotInspect, snapshotRestore, snapshotSave } from './snapshot.js'
import { caCreate, certCreate } from './tls.js'

export const COMMANDS: readonly Command[] = [
  aclBootstrap,
  tokenCreate,
  tokenRead,
  tokenUpdate,
  tokenDelete,
  tokenList,
  tokenClone,
  tokenPermissions,
  policyCreate,
  policyRead,
  policyUpdate,
  policyDelete,
  policyList,
  roleCreate,
  roleRead,
  roleUpdate,
  roleDelete,
  roleList,
  authMethodCreate,
  authMethodRead,
  authMethodUpdate,
  authMethodDelete,
  authMethodList,
  bindingRuleCreate,
  bindingRuleRead,
  bindingRuleUpdate,
  bindingRuleDelete,
  bindingRuleList,
  templatedPolicyList,
  templatedPolicyRead,
  templatedPolicyPreview,
  login,
  logout,
  configWrite,
  configRead,
  configList,
  configDelete,
  listPeers,
  removePeer,
  transferLeader,
  members,
  catalogDatacenters,
  keygen,
  snapshotSave,
  snapshotRestore,
  snapshotInspect,
  caCreate,
  certCreate,
]
