/**
 * Consul's `POST /v1/internal/acl/authorize` (agent/acl_endpoint.go ACLAuthorize): what the caller's own token may do,
 * for a list of checks, so that a UI can enable only the controls that will work. The body is a JSON array of
 * `{"Resource", "Segment"?, "Access"}` (at most 64, as Consul); the answer is the same list, each entry echoed as sent
 * (Segment left out when empty, as Consul's omitempty) with `"Allow": true|false`. Each check is answered by the
 * authorizer every endpoint asks (acl/enforce.ts, Consul's acl.Enforce): no second reading of the rules.
 *
 * No permission is needed: the caller learns only what trying the requests would tell it, as Consul argues. It is a
 * POST that changes nothing, so the rate limiter counts it as a read (rate-limit.ts).
 */
import Router from '@koa/router'
import { InvalidInputError } from '../../lib/errors.js'
import { accessOf, enforce, isResource, RESOURCE_ACCESSES } from '../../acl/enforce.js'
import { ANONYMOUS_TOKEN_ID } from '../../state/builtins.js'
import type { ApiContext } from '../context.js'
import { ANONYMOUS_BODY, parseJson, readBody } from '../body.js'
import { authorizeAfterBody, callerOf } from '../request.js'
import { validateBody, type Schema } from '../validate.js'

/** Consul's maxRequests: checks one call may ask at most. */
export const AUTHORIZATIONS_MAX = 64

/** 64 checks with segments of a few KiB each fit; a larger body is refused before it is parsed. */
const AUTHORIZE_BODY = { limit: 256 * 1024 }

interface AuthorizationRequest {
  Resource: string
  Segment?: string
  Access: string
}

const authorizeSchema: Schema = {
  type: 'array',
  items: {
    type: 'object',
    properties: {
      Resource: { type: 'string' },
      Segment: { type: 'string' },
      Access: { type: 'string' },
    },
    required: ['Resource', 'Access'],
    additionalProperties: false,
  },
}

async function authorize(ctx: ApiContext): Promise<void> {
  // The caller first: an unknown secret is refused before its body is read, as on every route with a body.
  const caller = await callerOf(ctx)
  const bytes = await readBody(ctx, caller.token.AccessorID === ANONYMOUS_TOKEN_ID ? ANONYMOUS_BODY : AUTHORIZE_BODY)
  await authorizeAfterBody(ctx)
  const body = parseJson(bytes)
  if (!Array.isArray(body)) throw new InvalidInputError('body', 'must be a JSON array of {"Resource", "Segment", "Access"}')
  if (body.length > AUTHORIZATIONS_MAX) throw new InvalidInputError('body', `holds ${body.length} authorizations; at most ${AUTHORIZATIONS_MAX} are processed at once`)
  const requests = validateBody<AuthorizationRequest[]>(authorizeSchema, body)
  // Every entry is checked before any is answered: a bad one refuses the call, as Consul's does.
  const checks = requests.map((request, index) => {
    if (!isResource(request.Resource)) {
      throw new InvalidInputError(`[${index}].Resource`, `${JSON.stringify(request.Resource)} is not an ACL resource; one of ${Object.keys(RESOURCE_ACCESSES).join(', ')}`)
    }
    const access = accessOf(request.Resource, request.Access)
    if (access === undefined) {
      throw new InvalidInputError(`[${index}].Access`, `${JSON.stringify(request.Access)} is not an access of ${request.Resource}; one of ${RESOURCE_ACCESSES[request.Resource].join(', ')}`)
    }
    return { request, resource: request.Resource, access }
  })
  // Resolved again once the body is in (authorizeAfterBody forgets the caller resolved before it): the token as it is now.
  const permissions = (await callerOf(ctx)).permissions
  ctx.body = checks.map(({ request, resource, access }) => {
    const segment = request.Segment ?? ''
    const answer: Record<string, unknown> = { Resource: request.Resource }
    if (segment !== '') answer.Segment = segment
    answer.Access = request.Access
    answer.Allow = enforce(permissions, resource, segment, access)
    return answer
  })
}

export function authorizeRoutes(router: Router): void {
  router.post('/v1/internal/acl/authorize', (ctx) => authorize(ctx as ApiContext))
}
