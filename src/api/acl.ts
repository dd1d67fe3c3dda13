/** The ACL endpoints of the contract, one group per resource, named as Consul's Go client names them. */
import type { Client, QueryOptions, RequestOptions } from './client.js'
import type {
  AuthorizationCheck,
  AuthMethod,
  AuthMethodWrite,
  BindingRule,
  BindingRuleWrite,
  LoginRequest,
  Policy,
  PolicyWrite,
  ReplicationStatus,
  Role,
  RoleWrite,
  TemplatedPolicyRecord,
  Token,
  TokenPermissions,
  TokenWrite,
} from './types.js'

const id = encodeURIComponent

export class Tokens {
  constructor(private readonly client: Client) {}

  create(token: TokenWrite, options?: RequestOptions): Promise<Token> {
    return this.client.put('/v1/acl/token', token, options)
  }

  read(accessorId: string, options: QueryOptions & { expanded?: boolean } = {}): Promise<Token> {
    return this.client.get(`/v1/acl/token/${id(accessorId)}`, withFlag(options, 'expanded', options.expanded))
  }

  /** What the token may do in the answering datacenter, per resource, and which source decided each rule (acl:read). */
  permissions(accessorId: string, options?: QueryOptions): Promise<TokenPermissions> {
    return this.client.get(`/v1/acl/token/${id(accessorId)}/permissions`, options)
  }

  /** The token the call is made with (or `options.token`). */
  self(options?: QueryOptions): Promise<Token> {
    return this.client.get('/v1/acl/token/self', options)
  }

  update(accessorId: string, token: TokenWrite, options?: RequestOptions): Promise<Token> {
    return this.client.put(`/v1/acl/token/${id(accessorId)}`, token, options)
  }

  clone(accessorId: string, description?: string, options?: RequestOptions): Promise<Token> {
    return this.client.put(`/v1/acl/token/${id(accessorId)}/clone`, description === undefined ? {} : { Description: description }, options)
  }

  delete(accessorId: string, options?: RequestOptions): Promise<boolean> {
    return this.client.delete(`/v1/acl/token/${id(accessorId)}`, options)
  }

  list(options: QueryOptions & { policy?: string; role?: string; serviceName?: string; authMethod?: string } = {}): Promise<Token[]> {
    const { policy, role, serviceName, authMethod } = options
    return this.client.get('/v1/acl/tokens', { ...options, query: { policy, role, servicename: serviceName, authmethod: authMethod, ...options.query } })
  }
}

export class Policies {
  constructor(private readonly client: Client) {}

  create(policy: PolicyWrite, options?: RequestOptions): Promise<Policy> {
    return this.client.put('/v1/acl/policy', policy, options)
  }

  read(policyId: string, options?: QueryOptions): Promise<Policy> {
    return this.client.get(`/v1/acl/policy/${id(policyId)}`, options)
  }

  readByName(name: string, options?: QueryOptions): Promise<Policy> {
    return this.client.get(`/v1/acl/policy/name/${id(name)}`, options)
  }

  update(policyId: string, policy: PolicyWrite, options?: RequestOptions): Promise<Policy> {
    return this.client.put(`/v1/acl/policy/${id(policyId)}`, policy, options)
  }

  delete(policyId: string, options?: RequestOptions): Promise<boolean> {
    return this.client.delete(`/v1/acl/policy/${id(policyId)}`, options)
  }

  list(options?: QueryOptions): Promise<Policy[]> {
    return this.client.get('/v1/acl/policies', options)
  }
}

export class Roles {
  constructor(private readonly client: Client) {}

  create(role: RoleWrite, options?: RequestOptions): Promise<Role> {
    return this.client.put('/v1/acl/role', role, options)
  }

  read(roleId: string, options?: QueryOptions): Promise<Role> {
    return this.client.get(`/v1/acl/role/${id(roleId)}`, options)
  }

  readByName(name: string, options?: QueryOptions): Promise<Role> {
    return this.client.get(`/v1/acl/role/name/${id(name)}`, options)
  }

  update(roleId: string, role: RoleWrite, options?: RequestOptions): Promise<Role> {
    return this.client.put(`/v1/acl/role/${id(roleId)}`, role, options)
  }

  delete(roleId: string, options?: RequestOptions): Promise<boolean> {
    return this.client.delete(`/v1/acl/role/${id(roleId)}`, options)
  }

  list(options: QueryOptions & { policy?: string } = {}): Promise<Role[]> {
    return this.client.get('/v1/acl/roles', { ...options, query: { policy: options.policy, ...options.query } })
  }
}

export class AuthMethods {
  constructor(private readonly client: Client) {}

  create(method: AuthMethodWrite, options?: RequestOptions): Promise<AuthMethod> {
    return this.client.put('/v1/acl/auth-method', method, options)
  }

  read(name: string, options?: QueryOptions): Promise<AuthMethod> {
    return this.client.get(`/v1/acl/auth-method/${id(name)}`, options)
  }

  update(name: string, method: AuthMethodWrite, options?: RequestOptions): Promise<AuthMethod> {
    return this.client.put(`/v1/acl/auth-method/${id(name)}`, method, options)
  }

  delete(name: string, options?: RequestOptions): Promise<boolean> {
    return this.client.delete(`/v1/acl/auth-method/${id(name)}`, options)
  }

  list(options?: QueryOptions): Promise<AuthMethod[]> {
    return this.client.get('/v1/acl/auth-methods', options)
  }
}

export class BindingRules {
  constructor(private readonly client: Client) {}

  create(rule: BindingRuleWrite, options?: RequestOptions): Promise<BindingRule> {
    return this.client.put('/v1/acl/binding-rule', rule, options)
  }

  read(ruleId: string, options?: QueryOptions): Promise<BindingRule> {
    return this.client.get(`/v1/acl/binding-rule/${id(ruleId)}`, options)
  }

  update(ruleId: string, rule: BindingRuleWrite, options?: RequestOptions): Promise<BindingRule> {
    return this.client.put(`/v1/acl/binding-rule/${id(ruleId)}`, rule, options)
  }

  delete(ruleId: string, options?: RequestOptions): Promise<boolean> {
    return this.client.delete(`/v1/acl/binding-rule/${id(ruleId)}`, options)
  }

  list(options: QueryOptions & { authMethod?: string } = {}): Promise<BindingRule[]> {
    return this.client.get('/v1/acl/binding-rules', { ...options, query: { authmethod: options.authMethod, ...options.query } })
  }
}

/** Template names hold a slash (`builtin/service`): each segment is encoded, the slash kept. */
function templatePath(name: string): string {
  return name.split('/').map(encodeURIComponent).join('/')
}

export class TemplatedPolicies {
  constructor(private readonly client: Client) {}

  read(name: string, options?: QueryOptions): Promise<TemplatedPolicyRecord> {
    return this.client.get(`/v1/acl/templated-policy/name/${templatePath(name)}`, options)
  }

  /** The policy the template gives for these variables. */
  preview(name: string, variables: { name?: string }, options?: RequestOptions): Promise<Policy> {
    return this.client.post(`/v1/acl/templated-policy/preview/${templatePath(name)}`, { ...(variables.name === undefined ? {} : { Name: variables.name }) }, options)
  }

  list(options?: QueryOptions): Promise<Record<string, TemplatedPolicyRecord>> {
    return this.client.get('/v1/acl/templated-policies', options)
  }
}

export class Acl {
  readonly tokens: Tokens
  readonly policies: Policies
  readonly roles: Roles
  readonly authMethods: AuthMethods
  readonly bindingRules: BindingRules
  readonly templatedPolicies: TemplatedPolicies

  constructor(private readonly client: Client) {
    this.tokens = new Tokens(client)
    this.policies = new Policies(client)
    this.roles = new Roles(client)
    this.authMethods = new AuthMethods(client)
    this.bindingRules = new BindingRules(client)
    this.templatedPolicies = new TemplatedPolicies(client)
  }

  /** Creates the first management token, once per cluster (without an initial management token configured). */
  bootstrap(options?: RequestOptions): Promise<Token> {
    return this.client.put('/v1/acl/bootstrap', undefined, { token: null, ...options })
  }

  /** Exchanges an identity (a JWT, a Kubernetes service account token, ...) for a token through an auth method. */
  login(request: LoginRequest, options?: RequestOptions): Promise<Token> {
    const { Namespace, ...body } = request
    return this.client.post('/v1/acl/login', body, { token: null, ...(Namespace === undefined ? {} : { namespace: Namespace }), ...options })
  }

  /** Deletes the token the call is made with; it must have come from a login. */
  async logout(options?: RequestOptions): Promise<void> {
    await this.client.post('/v1/acl/logout', undefined, options)
  }

  /** Consul's POST /v1/internal/acl/authorize: what the call's own token may do, for at most 64 checks. */
  authorize(checks: AuthorizationCheck[], options?: RequestOptions): Promise<Array<AuthorizationCheck & { Allow: boolean }>> {
    return this.client.post('/v1/internal/acl/authorize', checks, options)
  }

  replication(options?: QueryOptions): Promise<ReplicationStatus> {
    return this.client.get('/v1/acl/replication', options)
  }

  oidcAuthUrl(request: { AuthMethod: string; RedirectURI: string; ClientNonce?: string; Meta?: Record<string, string> }, options?: RequestOptions): Promise<{ AuthURL: string }> {
    return this.client.post('/v1/acl/oidc/auth-url', request, { token: null, ...options })
  }

  oidcCallback(request: { AuthMethod: string; State: string; Code: string; ClientNonce?: string }, options?: RequestOptions): Promise<Token> {
    return this.client.post('/v1/acl/oidc/callback', request, { token: null, ...options })
  }
}

function withFlag<T extends QueryOptions>(options: T, name: string, on: boolean | undefined): T {
  return on === true ? { ...options, query: { ...options.query, [name]: true } } : options
}
