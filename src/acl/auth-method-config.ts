/**
 * The Config of each auth method type, checked when the method is written: which keys each type knows, what kind of
 * value each takes, and the rules between them (a jwt method needs exactly one way to get keys). Unknown keys are
 * refused, as Consul's decoder (mapstructure with ErrorUnused) refuses them.
 */
import { X509Certificate, createPublicKey } from 'node:crypto'
import { parseDuration } from '../lib/duration.js'

export const AUTH_METHOD_TYPES = ['kubernetes', 'jwt', 'oidc', 'aws-iam'] as const

/**
 * The signing algorithms a jwt or oidc method may accept: asymmetric ones only, as Consul lists them. A shared-secret
 * algorithm (HS256) would let anyone holding the public key sign tokens, and `none` signs nothing.
 */
export const JWT_SIGNING_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519'] as const
export type AuthMethodType = (typeof AUTH_METHOD_TYPES)[number]

type ValueKind = 'string' | 'url' | 'cert' | 'jwt' | 'strings' | 'public-keys' | 'certs' | 'map' | 'duration' | 'bool' | 'count'

const JWT_COMMON: Record<string, ValueKind> = {
  BoundIssuer: 'string',
  BoundAudiences: 'strings',
  ClaimMappings: 'map',
  ListClaimMappings: 'map',
  JWTSupportedAlgs: 'strings',
  OIDCDiscoveryURL: 'url',
  OIDCDiscoveryCACert: 'cert',
  ClockSkewLeeway: 'duration',
}

const KEYS: Record<AuthMethodType, Record<string, ValueKind>> = {
  kubernetes: { Host: 'url', CACert: 'cert', ServiceAccountJWT: 'jwt', MapNamespaces: 'bool', ConsulNamespacePrefix: 'string', ConsulNamespaceOverrides: 'map' },
  jwt: {
    ...JWT_COMMON,
    JWTValidationPubKeys: 'public-keys',
    JWKSURL: 'url',
    JWKSCACert: 'cert',
    ExpirationLeeway: 'duration',
    NotBeforeLeeway: 'duration',
  },
  oidc: {
    ...JWT_COMMON,
    OIDCClientID: 'string',
    OIDCClientSecret: 'string',
    OIDCScopes: 'strings',
    OIDCACRValues: 'strings',
    AllowedRedirectURIs: 'strings',
    VerboseOIDCLogging: 'bool',
  },
  'aws-iam': {
    BoundIAMPrincipalARNs: 'strings',
    EnableIAMEntityDetails: 'bool',
    IAMEntityTags: 'strings',
    ServerIDHeaderValue: 'string',
    MaxRetries: 'count',
    IAMEndpoint: 'url',
    STSEndpoint: 'url',
    STSRegion: 'string',
    AllowedSTSHeaderValues: 'strings',
  },
}

const REQUIRED: Record<AuthMethodType, string[]> = {
  kubernetes: ['Host', 'CACert', 'ServiceAccountJWT'],
  jwt: [],
  oidc: ['OIDCDiscoveryURL', 'OIDCClientID', 'OIDCClientSecret', 'AllowedRedirectURIs'],
  'aws-iam': ['BoundIAMPrincipalARNs'],
}

export interface ConfigProblem {
  field: string
  rule: string
}

export function isAuthMethodType(type: string): type is AuthMethodType {
  return (AUTH_METHOD_TYPES as readonly string[]).includes(type)
}

/** The first problem with `config` for a method of `type`, or undefined when it is valid. */
export function checkAuthMethodConfig(type: AuthMethodType, config: Record<string, unknown>): ConfigProblem | undefined {
  const known = KEYS[type]
  for (const [key, value] of Object.entries(config)) {
    // Own names only: `known[key]` alone would find `constructor`, `__proto__` or `toString` on Object.prototype and
    // take them for settings (with no rule to check them by).
    const kind = Object.hasOwn(known, key) ? known[key] : undefined
    const field = `Config.${key}`
    if (kind === undefined) return { field, rule: `is not a known setting of a ${type} auth method (known: ${Object.keys(known).join(', ')})` }
    const rule = checkValue(kind, value)
    if (rule !== undefined) return { field, rule }
  }
  for (const key of REQUIRED[type]) {
    if (isEmpty(config[key])) return { field: `Config.${key}`, rule: `is required for a ${type} auth method` }
  }
  const algorithms = config.JWTSupportedAlgs
  if (Array.isArray(algorithms)) {
    const position = algorithms.findIndex((name) => !(JWT_SIGNING_ALGORITHMS as readonly unknown[]).includes(name))
    if (position !== -1) return { field: `Config.JWTSupportedAlgs[${position}]`, rule: `must be an asymmetric signing algorithm: one of ${JWT_SIGNING_ALGORITHMS.join(', ')}` }
  }
  if (type === 'jwt') {
    const sources = ['JWTValidationPubKeys', 'JWKSURL', 'OIDCDiscoveryURL'].filter((key) => !isEmpty(config[key]))
    if (sources.length !== 1) {
      return { field: 'Config', rule: 'a jwt auth method needs exactly one of JWTValidationPubKeys, JWKSURL or OIDCDiscoveryURL' }
    }
    if (!isEmpty(config.JWKSCACert) && isEmpty(config.JWKSURL)) return { field: 'Config.JWKSCACert', rule: 'needs JWKSURL' }
  }
  if (!isEmpty(config.OIDCDiscoveryCACert) && isEmpty(config.OIDCDiscoveryURL)) {
    return { field: 'Config.OIDCDiscoveryCACert', rule: 'needs OIDCDiscoveryURL' }
  }
  if (type === 'aws-iam') return awsIamProblem(config)
  return undefined
}

/** Consul's iamauth Config.Validate: principal ARNs of IAM or STS, one trailing `*` only with entity details. */
function awsIamProblem(config: Record<string, unknown>): ConfigProblem | undefined {
  const details = config.EnableIAMEntityDetails === true
  for (const [position, arn] of (config.BoundIAMPrincipalARNs as string[]).entries()) {
    const field = `Config.BoundIAMPrincipalARNs[${position}]`
    const stars = arn.split('*').length - 1
    if (stars > 0 && !details) return { field, rule: 'may end in a * wildcard only with EnableIAMEntityDetails' }
    if (stars > 1 || (stars === 1 && !arn.endsWith('*'))) return { field, rule: 'may have one * wildcard, at its end' }
    const parts = arn.split(':')
    if (parts.length < 6 || parts[0] !== 'arn' || parts[1] === '' || (parts[2] !== 'iam' && parts[2] !== 'sts')) {
      return { field, rule: 'must be the ARN of an IAM or STS principal (arn:aws:iam::<account>:role/<name>)' }
    }
  }
  if (!isEmpty(config.IAMEntityTags) && !details) return { field: 'Config.IAMEntityTags', rule: 'needs EnableIAMEntityDetails' }
  return undefined
}

function isEmpty(value: unknown): boolean {
  return value === undefined || value === null || value === '' || (Array.isArray(value) && value.length === 0)
}

function checkValue(kind: ValueKind, value: unknown): string | undefined {
  switch (kind) {
    case 'string':
      return typeof value === 'string' ? undefined : 'must be a string'
    case 'bool':
      return typeof value === 'boolean' ? undefined : 'must be true or false'
    case 'count':
      return Number.isSafeInteger(value) && (value as number) >= 0 ? undefined : 'must be a whole number, 0 or more'
    case 'url':
      return typeof value === 'string' && isHttpUrl(value) ? undefined : 'must be an http or https URL'
    case 'duration':
      return typeof value === 'string' && parseDuration(value) !== undefined ? undefined : 'must be a duration such as 60s'
    case 'cert':
      return typeof value === 'string' && isCertificate(value) ? undefined : 'must be a PEM-encoded X.509 certificate'
    case 'jwt':
      return typeof value === 'string' && /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/.test(value.trim()) ? undefined : 'must be a JWT'
    case 'strings':
      return Array.isArray(value) && value.every((item) => typeof item === 'string') ? undefined : 'must be an array of strings'
    case 'public-keys':
      if (!Array.isArray(value) || !value.every((item) => typeof item === 'string')) return 'must be an array of PEM-encoded public keys'
      return value.every(isPublicKey) ? undefined : 'must be an array of PEM-encoded public keys (one did not parse)'
    case 'certs':
      return Array.isArray(value) && value.every((item) => typeof item === 'string' && isCertificate(item)) ? undefined : 'must be an array of certificates'
    case 'map':
      return typeof value === 'object' && value !== null && !Array.isArray(value) && Object.values(value).every((item) => typeof item === 'string')
        ? undefined
        : 'must be an object of strings'
  }
}

function isHttpUrl(text: string): boolean {
  try {
    const url = new URL(text)
    return url.protocol === 'http:' || url.protocol === 'https:'
  } catch {
    return false
  }
}

function isCertificate(pem: string): boolean {
  try {
    new X509Certificate(pem)
    return true
  } catch {
    return false
  }
}

function isPublicKey(pem: string): boolean {
  try {
    createPublicKey(pem)
    return true
  } catch {
    return false
  }
}
