/**
 * Login through an aws-iam auth method (Consul 1.12+, after Vault's AWS IAM method). The bearer token is not a token
 * but a signed AWS request: an sts:GetCallerIdentity the client signed with its own AWS credentials, as JSON
 * `{iam_http_request_method, iam_request_url, iam_request_headers, iam_request_body}` (the last three base64; the
 * headers a JSON object of lists). warden checks that it is that request and nothing else, sends it to STS (which
 * checks the signature), and takes the identity STS answers with. warden holds no AWS credentials.
 *
 * - Only a POST to https://<an STS host>/ (`sts.amazonaws.com`, `sts.<region>.amazonaws.com`, -fips), sent there or
 *   to STSEndpoint with the signed Host and path kept, and with only Authorization and the signed headers: the
 *   endpoint cannot be used to forward other requests.
 * - The body is `Action=GetCallerIdentity` (and a Version), nothing else; an `X-Amz-*` header outside the signing
 *   ones (and AllowedSTSHeaderValues) is refused.
 * - With ServerIDHeaderValue, the request must carry `X-Service-IAM-ServerID` with that value, and have signed it:
 *   a request signed for another cluster cannot be replayed here.
 * - With EnableIAMEntityDetails, the client also embeds a signed iam:GetRole or iam:GetUser in the headers
 *   `X-Service-IAM-GetEntity-Method`, `-URL`, `-Headers`, `-Body`; its entity must have the caller's unique ID, and it
 *   gives the entity's path and tags, and its full ARN (so BoundIAMPrincipalARNs may end in `*`).
 * - The caller's ARN, an assumed role made back into its role's ARN, must be one of BoundIAMPrincipalARNs.
 *
 * Consul names the headers `X-Consul-IAM-*`; warden's header prefix is `X-Service-` (api.md renames them all). Consul's
 * names are accepted too, so Consul's clients (`consul login -type aws-iam`, its Go iamauth package) work unchanged:
 * each header is read under its `X-Service-IAM-*` name when the signed request carries it, else under its
 * `X-Consul-IAM-*` name, and every check (the ServerID's signing included) applies to the name that was read.
 * Identity: `entity_name`, `entity_id`, `account_id`, and with entity details `entity_path` and `entity_tags.<tag>` for
 * each of IAMEntityTags, selectable and interpolable by those names.
 */
import { InvalidBearerTokenError, IdentityServiceError, loggableUrl } from './errors.js'
import type { Identity } from './identity.js'
import { requestText } from './http-client.js'

export const SERVER_ID_HEADER = 'X-Service-IAM-ServerID'
export const GET_ENTITY_METHOD_HEADER = 'X-Service-IAM-GetEntity-Method'
export const GET_ENTITY_URL_HEADER = 'X-Service-IAM-GetEntity-URL'
export const GET_ENTITY_HEADERS_HEADER = 'X-Service-IAM-GetEntity-Headers'
export const GET_ENTITY_BODY_HEADER = 'X-Service-IAM-GetEntity-Body'

/** Consul's names of the same headers, read when the contract's name is absent (see headerName). */
export const CONSUL_HEADER_ALIASES: Readonly<Record<string, string>> = {
  [SERVER_ID_HEADER]: 'X-Consul-IAM-ServerID',
  [GET_ENTITY_METHOD_HEADER]: 'X-Consul-IAM-GetEntity-Method',
  [GET_ENTITY_URL_HEADER]: 'X-Consul-IAM-GetEntity-URL',
  [GET_ENTITY_HEADERS_HEADER]: 'X-Consul-IAM-GetEntity-Headers',
  [GET_ENTITY_BODY_HEADER]: 'X-Consul-IAM-GetEntity-Body',
}

/** The signing headers AWS's SigV4 puts on a request: always allowed on the GetCallerIdentity request. */
const SIGNING_HEADERS = ['X-Amz-Algorithm', 'X-Amz-Content-Sha256', 'X-Amz-Credential', 'X-Amz-Date', 'X-Amz-Security-Token', 'X-Amz-Signature', 'X-Amz-SignedHeaders']
/** Retries of a request STS or IAM answered with 5xx or could not take; MaxRetries asks for more, up to this. */
const RETRIES_MAX = 10
/** STS's and IAM's answers are well under this. */
const RESPONSE_BYTES_MAX = 64 * 1024
/** A bearer token is a few KiB; anything far beyond is refused before it is decoded. */
const BEARER_TOKEN_CHARS_MAX = 64 * 1024

export interface AwsIamConfig {
  BoundIAMPrincipalARNs: string[]
  EnableIAMEntityDetails?: boolean
  IAMEntityTags?: string[]
  ServerIDHeaderValue?: string
  MaxRetries?: number
  IAMEndpoint?: string
  STSEndpoint?: string
  STSRegion?: string
  AllowedSTSHeaderValues?: string[]
}

type Headers = Record<string, string[]>

interface SignedRequest {
  method: string
  url: URL
  headers: Headers
  body: string
}

/** A header name as Go's textproto.CanonicalMIMEHeaderKey writes it: `x-amz-date` is `X-Amz-Date`. */
function canonicalHeader(name: string): string {
  return name
    .split('-')
    .map((part) => (part === '' ? part : part[0]!.toUpperCase() + part.slice(1).toLowerCase()))
    .join('-')
}

/** A header's values; `headers` holds canonical names only (parseHeaders). */
function headerValues(headers: Headers, name: string): string[] {
  return Object.hasOwn(headers, canonicalHeader(name)) ? headers[canonicalHeader(name)]! : []
}

/**
 * The name `header` (one of the X-Service-IAM-* names) is read under in `headers`: its own when the request carries
 * it, else Consul's X-Consul-IAM-* name when the request carries that; the contract's name wins when both are there.
 * Undefined when neither is.
 */
function headerName(headers: Headers, header: string): string | undefined {
  const consul = CONSUL_HEADER_ALIASES[header]!
  if (headerValues(headers, header).length > 0) return header
  if (headerValues(headers, consul).length > 0) return consul
  return undefined
}

/** How a refusal names a header the request carries under neither name. */
function eitherName(header: string): string {
  return `${header} (or ${CONSUL_HEADER_ALIASES[header]!})`
}

function decodeBase64(value: unknown, field: string): string {
  if (typeof value !== 'string') throw new InvalidBearerTokenError(`${field} is missing`)
  return Buffer.from(value, 'base64').toString('utf8')
}

function parseHeaders(json: string, field: string): Headers {
  let parsed: unknown
  try {
    parsed = JSON.parse(json)
  } catch {
    throw new InvalidBearerTokenError(`${field} is not a JSON object of headers`)
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new InvalidBearerTokenError(`${field} is not a JSON object of headers`)
  // Names that differ only in case are one header, their values merged in order, as Go's http.Header.Add merges
  // them: what is checked here is what is sent (Node would send only the last of two spellings).
  const headers: Headers = {}
  for (const [name, value] of Object.entries(parsed as Record<string, unknown>)) {
    const values = Array.isArray(value) ? value : [value]
    if (!values.every((item) => typeof item === 'string')) throw new InvalidBearerTokenError(`${field} holds a header that is not a string or a list of strings`)
    if (!/^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/.test(name)) throw new InvalidBearerTokenError(`${field} holds a header name that is not a token`)
    const canonical = canonicalHeader(name)
    headers[canonical] = [...(headers[canonical] ?? []), ...(values as string[])]
  }
  return headers
}

function parseUrl(text: string, field: string): URL {
  try {
    const url = new URL(text)
    if (url.protocol === 'http:' || url.protocol === 'https:') return url
  } catch {
    // Refused below.
  }
  throw new InvalidBearerTokenError(`${field} is not a URL`)
}

/**
 * Whether a signed request is addressed to AWS's `service` (`sts` or `iam`): https on the default port, path `/`, no
 * query, host `<service>.amazonaws.com`, `<service>.<region>.amazonaws.com`, or their -fips forms (also `.com.cn`).
 * Checked whether or not an endpoint is configured: the signed Host travels to it, and a host-routing endpoint must
 * not be steered to another service.
 */
function isAwsServiceUrl(url: URL, service: string): boolean {
  const host = new RegExp(`^${service}(-fips)?(\\.[a-z0-9-]+)?\\.amazonaws\\.com(\\.cn)?$`)
  return url.protocol === 'https:' && url.port === '' && url.pathname === '/' && url.search === '' && url.username === '' && host.test(url.hostname)
}

/**
 * The fields of a form body, each once, none but those `allowed` names (with the values it lists, when it lists some);
 * `Action` is required.
 */
function parseBody(body: string, allowed: Record<string, readonly string[] | undefined>, field: string): Record<string, string> {
  const params = new URLSearchParams(body)
  const fields: Record<string, string> = {}
  for (const name of new Set(params.keys())) {
    const values = params.getAll(name)
    if (!Object.hasOwn(allowed, name)) throw new InvalidBearerTokenError(`${field} has the unexpected field ${JSON.stringify(name)}`)
    const expected = allowed[name]
    if (values.length !== 1 || (expected !== undefined && !expected.includes(values[0]!))) {
      throw new InvalidBearerTokenError(`${field} has the unexpected value ${name}=${JSON.stringify(values.join(','))}`)
    }
    fields[name] = values[0]!
  }
  if ((fields.Action ?? '') === '') throw new InvalidBearerTokenError(`${field} has no Action`)
  return fields
}

function parseBearerToken(text: string): SignedRequest {
  if (text.length > BEARER_TOKEN_CHARS_MAX) throw new InvalidBearerTokenError(`it is longer than ${BEARER_TOKEN_CHARS_MAX} characters`)
  let raw: Record<string, unknown>
  try {
    raw = JSON.parse(text) as Record<string, unknown>
  } catch {
    throw new InvalidBearerTokenError('it is not the JSON of a signed sts:GetCallerIdentity request')
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new InvalidBearerTokenError('it is not the JSON of a signed sts:GetCallerIdentity request')
  return {
    method: typeof raw.iam_http_request_method === 'string' ? raw.iam_http_request_method : '',
    url: parseUrl(decodeBase64(raw.iam_request_url, 'iam_request_url'), 'iam_request_url'),
    headers: parseHeaders(decodeBase64(raw.iam_request_headers, 'iam_request_headers'), 'iam_request_headers'),
    body: decodeBase64(raw.iam_request_body, 'iam_request_body'),
  }
}

/**
 * The one value of a header the client must send once (under either of its names, headerName), and the name it was
 * found under; or a refusal naming it.
 */
function singleHeader(headers: Headers, header: string): { name: string; value: string } {
  const name = headerName(headers, header)
  if (name === undefined) throw new InvalidBearerTokenError(`it lacks the header ${eitherName(header)}`)
  const values = headerValues(headers, name)
  if (values.length !== 1) throw new InvalidBearerTokenError(`it has the header ${name} more than once`)
  return { name, value: values[0]! }
}

/**
 * With ServerIDHeaderValue set: the request carries it (under either name, headerName), and signed it under the name
 * it was read from (that name is among SigV4's SignedHeaders).
 */
function checkServerId(request: SignedRequest, expected: string): void {
  const name = headerName(request.headers, SERVER_ID_HEADER)
  if (name === undefined) throw new InvalidBearerTokenError(`it lacks the header ${eitherName(SERVER_ID_HEADER)}`)
  const given = headerValues(request.headers, name).join(',')
  if (given !== expected) throw new InvalidBearerTokenError(`its ${name} is not this auth method's`, `its ${name} is ${JSON.stringify(given)}, not ${JSON.stringify(expected)}`)
  const signed = signedHeaderNames(request)
  if (!signed.includes(name.toLowerCase())) throw new InvalidBearerTokenError(`its ${name} header was not signed`)
}

/** The one Authorization header of a SigV4-signed request, and the header names it lists as signed (lower case). */
function signedHeaderNames(request: SignedRequest): string[] {
  const authorization = headerValues(request.headers, 'Authorization')
  if (authorization.length !== 1) throw new InvalidBearerTokenError(authorization.length === 0 ? 'it lacks the Authorization header' : 'it has more than one Authorization header')
  const lists = [...authorization[0]!.matchAll(/SignedHeaders=([^,\s]+)/g)]
  if (lists.length !== 1) throw new InvalidBearerTokenError('its Authorization header does not list the signed headers once')
  return lists[0]![1]!.split(';')
}

/** Never forwarded, signed or not: they would change how the request is framed or carried, not what it says. */
const HOP_HEADERS = new Set(['host', 'content-length', 'transfer-encoding', 'connection', 'keep-alive', 'te', 'trailer', 'upgrade', 'expect', 'proxy-authorization', 'proxy-connection'])

/**
 * Sends a signed request where it goes (or to the configured endpoint, keeping its Host and path); answers its XML.
 * Only Authorization and the headers the signature covers go out: AWS checks nothing else, and nothing else from the
 * caller should reach the endpoint.
 */
async function send(what: string, request: SignedRequest, endpoint: string | undefined, retries: number): Promise<string> {
  const target = endpoint === undefined || endpoint === '' ? request.url.href : `${endpoint.replace(/\/+$/, '')}${request.url.pathname}${request.url.search}`
  const signed = new Set(signedHeaderNames(request))
  const headers: Record<string, string | string[]> = {}
  for (const [name, values] of Object.entries(request.headers)) {
    const lower = name.toLowerCase()
    if (HOP_HEADERS.has(lower) || (lower !== 'authorization' && !signed.has(lower))) continue
    headers[name] = values
  }
  headers.Host = request.url.host
  for (let attempt = 0; ; attempt++) {
    let answer: { status: number; contentType: string; text: string }
    try {
      // STS and IAM answer a few KiB; a bound far below the general one keeps the XML scan short.
      answer = await requestText(what, target, { method: 'POST', headers, payload: Buffer.from(request.body, 'utf8'), responseBytesMax: RESPONSE_BYTES_MAX })
    } catch (error) {
      if (attempt < retries) continue
      throw error
    }
    if (answer.status >= 500 && attempt < retries) continue
    if (answer.status !== 200) {
      throw new IdentityServiceError(`${what} answered ${answer.status}`, `${what} at ${loggableUrl(target)} answered ${answer.status}: ${answer.text.slice(0, 512)}`)
    }
    if (!answer.contentType.startsWith('text/xml')) throw new IdentityServiceError(`${what} answered something that is not XML`)
    return answer.text
  }
}

function unescapeXml(text: string): string {
  return text.replace(/&(lt|gt|amp|quot|apos|#x[0-9a-fA-F]+|#[0-9]+);/g, (entity, name: string) => {
    switch (name) {
      case 'lt':
        return '<'
      case 'gt':
        return '>'
      case 'amp':
        return '&'
      case 'quot':
        return '"'
      case 'apos':
        return "'"
      default:
        {
          const code = name.startsWith('#x') ? Number.parseInt(name.slice(2), 16) : Number.parseInt(name.slice(1), 10)
          return code <= 0x10ffff ? String.fromCodePoint(code) : entity
        }
    }
  })
}

/** The text of every `<tag>` element in `xml`, in order. The answers read here are flat and small. */
function elements(xml: string, tag: string): string[] {
  const found: string[] = []
  const pattern = new RegExp(`<${tag}(?:\\s[^>]*)?>([\\s\\S]*?)</${tag}>`, 'g')
  for (const match of xml.matchAll(pattern)) found.push(match[1]!)
  return found
}

function element(xml: string, tag: string): string {
  return unescapeXml((elements(xml, tag)[0] ?? '').trim())
}

interface ParsedArn {
  partition: string
  account: string
  type: string
  path: string
  name: string
}

/** `arn:aws:iam::<account>:user|role/<path>/<name>` or `arn:aws:sts::<account>:assumed-role/<role>/<session>`. */
export function parseArn(arn: string): ParsedArn {
  const parts = arn.split(':')
  if (parts.length !== 6 || parts[0] !== 'arn' || parts[1] === '' || (parts[2] !== 'iam' && parts[2] !== 'sts') || parts[4] === '') {
    throw new InvalidBearerTokenError(`STS answered the ARN ${JSON.stringify(arn)}, which is not an IAM or STS principal`)
  }
  const resource = parts[5]!.split('/')
  const type = resource[0]!
  if (resource.length < 2 || (type !== 'user' && type !== 'role' && type !== 'assumed-role') || (type === 'assumed-role' && resource.length < 3)) {
    throw new InvalidBearerTokenError(`STS answered the ARN ${JSON.stringify(arn)}, which is not a user, role or assumed role`)
  }
  const name = type === 'assumed-role' ? resource[1]! : resource[resource.length - 1]!
  if (name === '') throw new InvalidBearerTokenError(`STS answered the ARN ${JSON.stringify(arn)}, which names no principal`)
  return { partition: parts[1]!, account: parts[4]!, type, path: type === 'assumed-role' ? '' : resource.slice(1, -1).join('/'), name }
}

/** The ARN a bound principal is written as: an assumed role is its role, without the role's path (STS does not say it). */
export function canonicalArn(arn: ParsedArn): string {
  return `arn:${arn.partition}:iam::${arn.account}:${arn.type === 'assumed-role' ? 'role' : arn.type}/${arn.name}`
}

/** Whether `arn` is bound: listed exactly, or (with entity details) under a listed prefix ending in `*`. */
export function isBoundPrincipal(arn: string, bound: readonly string[], wildcards: boolean): boolean {
  if (bound.includes(arn)) return true
  return wildcards && bound.some((pattern) => pattern.endsWith('*') && arn.startsWith(pattern.slice(0, -1)))
}

export async function validateAwsIam(config: AwsIamConfig, bearerToken: string): Promise<Identity> {
  const request = parseBearerToken(bearerToken)
  if (request.method !== 'POST') throw new InvalidBearerTokenError('iam_http_request_method must be POST')
  if (!isAwsServiceUrl(request.url, 'sts')) throw new InvalidBearerTokenError(`iam_request_url is not https://<an STS host>/ (${JSON.stringify(request.url.hostname)})`)
  parseBody(request.body, { Action: ['GetCallerIdentity'], Version: undefined }, 'iam_request_body')
  const allowedHeaders = new Set([...SIGNING_HEADERS, ...(config.AllowedSTSHeaderValues ?? []).map(canonicalHeader)])
  // Names are canonical already (parseHeaders).
  for (const name of Object.keys(request.headers)) {
    if (name.startsWith('X-Amz-') && !allowedHeaders.has(name)) throw new InvalidBearerTokenError(`iam_request_headers has the header ${name}, which is not allowed`)
  }
  const entityDetails = config.EnableIAMEntityDetails === true
  let entityRequest: SignedRequest | undefined
  let entityAction = ''
  // The name the embedded request's body was read under, for the refusals that name it.
  let entityBodyHeader = GET_ENTITY_BODY_HEADER
  if (entityDetails) {
    const method = singleHeader(request.headers, GET_ENTITY_METHOD_HEADER)
    const url = singleHeader(request.headers, GET_ENTITY_URL_HEADER)
    const headers = singleHeader(request.headers, GET_ENTITY_HEADERS_HEADER)
    const body = singleHeader(request.headers, GET_ENTITY_BODY_HEADER)
    entityBodyHeader = body.name
    entityRequest = { method: method.value, url: parseUrl(url.value, url.name), headers: parseHeaders(headers.value, headers.name), body: body.value }
    if (!isAwsServiceUrl(entityRequest.url, 'iam')) {
      throw new InvalidBearerTokenError(`${url.name} is not https://<an IAM host>/ (${JSON.stringify(entityRequest.url.hostname)})`)
    }
    const fields = parseBody(entityRequest.body, { Action: ['GetRole', 'GetUser'], RoleName: undefined, UserName: undefined, Version: undefined }, body.name)
    entityAction = fields.Action!
    const fitting = entityAction === 'GetRole' ? 'RoleName' in fields && !('UserName' in fields) : 'UserName' in fields && !('RoleName' in fields)
    if (!fitting) throw new InvalidBearerTokenError(`${body.name} is not a GetRole with a RoleName or a GetUser with a UserName`)
  }
  const serverId = config.ServerIDHeaderValue ?? ''
  if (serverId !== '') {
    checkServerId(request, serverId)
    if (entityRequest !== undefined) checkServerId(entityRequest, serverId)
  }
  const retries = Math.min(Math.max(0, Math.trunc(config.MaxRetries ?? 0)), RETRIES_MAX)

  const callerXml = await send('the STS GetCallerIdentity request', request, config.STSEndpoint, retries)
  const results = elements(callerXml, 'GetCallerIdentityResult')
  if (results.length !== 1) throw new IdentityServiceError(`STS answered ${results.length} identities, not one`)
  const caller = { arn: element(results[0]!, 'Arn'), userId: element(results[0]!, 'UserId'), account: element(results[0]!, 'Account') }
  const parsed = parseArn(caller.arn)
  let principal = canonicalArn(parsed)
  const selectable: Record<string, unknown> = { entity_name: parsed.name, entity_id: caller.userId, account_id: caller.account }
  const variables: Record<string, string> = { entity_name: parsed.name, entity_id: caller.userId, account_id: caller.account }

  if (entityRequest !== undefined) {
    const entityXml = await send(`the IAM ${entityAction} request`, entityRequest, config.IAMEndpoint, retries)
    const kind = entityAction === 'GetRole' ? 'Role' : 'User'
    const entities = elements(entityXml, `${entityAction}Result`)
    if (entities.length !== 1) throw new IdentityServiceError(`IAM answered ${entities.length} entities to ${entityAction}, not one`)
    const entity = elements(entities[0]!, kind)[0] ?? ''
    // Only STS's answer vouches for the caller: the entity must be the caller's own.
    // An assumed role's caller ID is `<role ID>:<session name>`; the role's own ID is the part before the colon.
    const callerEntityId = parsed.type === 'assumed-role' ? caller.userId.split(':')[0]! : caller.userId
    if (element(entity, `${kind}Id`) !== callerEntityId) throw new InvalidBearerTokenError(`the ${kind.toLowerCase()} in ${entityBodyHeader} is not the caller's`)
    principal = element(entity, 'Arn')
    // No prototype: a tag named __proto__ or constructor is a tag like any other.
    const tags: Record<string, string> = Object.create(null) as Record<string, string>
    for (const tagList of elements(entity, 'Tags')) {
      const members = elements(tagList, 'member')
      for (const member of members.length > 0 ? members : [tagList]) tags[element(member, 'Key')] = element(member, 'Value')
    }
    const path = element(entity, 'Path')
    selectable.entity_path = path
    variables.entity_path = path
    const chosen: Record<string, string> = {}
    for (const tag of config.IAMEntityTags ?? []) {
      const value = Object.hasOwn(tags, tag) ? tags[tag]! : ''
      chosen[tag] = value
      variables[`entity_tags.${tag}`] = value
    }
    selectable.entity_tags = chosen
  }
  if (!isBoundPrincipal(principal, config.BoundIAMPrincipalARNs, entityDetails)) {
    throw new InvalidBearerTokenError('its IAM principal is not one this auth method trusts', `the IAM principal ${principal} is not among BoundIAMPrincipalARNs`)
  }
  return { selectable, variables }
}

/** The identity an aws-iam method of this config gives with every field empty (for checking binding rules). */
export function emptyAwsIamIdentity(config: Readonly<Record<string, unknown>>): Identity {
  const selectable: Record<string, unknown> = { entity_name: '', entity_id: '', account_id: '' }
  const variables: Record<string, string> = { entity_name: '', entity_id: '', account_id: '' }
  if (config.EnableIAMEntityDetails === true) {
    selectable.entity_path = ''
    variables.entity_path = ''
    const tags: Record<string, string> = {}
    for (const tag of Array.isArray(config.IAMEntityTags) ? (config.IAMEntityTags as string[]) : []) {
      tags[tag] = ''
      variables[`entity_tags.${tag}`] = ''
    }
    selectable.entity_tags = tags
  }
  return { selectable, variables }
}
