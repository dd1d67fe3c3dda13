/**
 * Shared vocabulary of the black-box HTTP tests (test/http): the contract's fixed IDs, names unique within a run, the
 * one JSON error shape, and small request helpers over an `AgentProcess` (support/agent.ts).
 *
 * Everything here states what the contract (api.md) and warden's readings promise; nothing is derived from the code
 * under test, so the suites keep checking the server from outside. Helpers that only one suite needs stay in that
 * suite.
 */
import { expect } from 'chai'
import type { AgentProcess, ApiResponse } from './agent.js'

/** A lowercase, hyphenated UUID, the form of every generated ID and secret. */
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

/** The built-in global-management policy's fixed ID. */
export const GLOBAL_MANAGEMENT_ID = '00000000-0000-0000-0000-000000000001'

/** The built-in anonymous token's fixed AccessorID. */
export const ANONYMOUS_ID = '00000000-0000-0000-0000-000000000002'

/** A well-formed UUID that no test ever creates: reads of it are 404s, deletes of it answer true, links to it a 400. */
export const MISSING_ID = '5d7c1f4e-9b2a-4c3d-8e6f-0a1b2c3d4e5f'

let counter = 0

/** `<prefix>-<pid>-<n>`: a name no other call in this process (and no concurrent run) returns. */
export function unique(prefix: string): string {
  counter += 1
  return `${prefix}-${process.pid}-${counter}`
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * The error shape without the message check on Field: `status`, a JSON object whose `Code` is `code` and whose `Error`
 * is a non-empty string, and, when `field` is given, `Field` equal to it.
 */
export function expectErrorShape(response: ApiResponse, status: number, code: string, field?: string): void {
  expect(response.status, response.text).to.equal(status)
  expect(response.body, response.text).to.be.an('object')
  expect(response.body.Code, response.text).to.equal(code)
  expect(response.body.Error, response.text).to.be.a('string').that.is.not.empty
  if (field !== undefined) expect(response.body.Field, response.text).to.equal(field)
}

/**
 * The one error shape: `status`, `Code`, a non-empty `Error`; when a field is at fault, `Field` names it (exactly, for a
 * string; matching, for a RegExp) and so does the message (the last non-numeric segment of `Field`, so `Policies[1].ID`
 * must be named as `ID`).
 */
export function expectError(response: ApiResponse, status: number, code: string, field?: string | RegExp): void {
  expectErrorShape(response, status, code)
  if (field === undefined) return
  const pattern = typeof field === 'string' ? new RegExp(`^${field.replace(/[.[\]]/g, '\\$&')}$`) : field
  expect(response.body.Field, response.text).to.be.a('string').that.matches(pattern)
  const leaf = String(response.body.Field).split(/[.[\]]/).filter((part: string) => part !== '' && !/^\d+$/.test(part)).pop() ?? ''
  expect(response.body.Error, response.text).to.include(leaf)
}

/** Sends the request with the management token and expects a 200; answers the body. */
export async function ok(agent: AgentProcess, method: string, path: string, body?: unknown): Promise<any> {
  const response = await agent.request(method, path, body === undefined ? {} : { body })
  expect(response.status, response.text).to.equal(200)
  return response.body
}

/** GETs a list endpoint (expecting a 200) and answers `key` of each element, in the order listed. */
export async function listed(agent: AgentProcess, path: string, key: string): Promise<string[]> {
  return ((await ok(agent, 'GET', path)) as Array<Record<string, string>>).map((item) => item[key]!)
}

export interface RulesToken {
  /** The token's SecretID, to send as `token`. */
  secret: string
  accessor: string
  /** The created policy and token, as the create calls answered them. */
  policy: any
  token: any
}

/** Creates a policy named `name` with `rules`, and a token linked to it by ID (both must succeed). */
export async function tokenWithRules(agent: AgentProcess, rules: string, name = unique('rules')): Promise<RulesToken> {
  const policy = await ok(agent, 'PUT', '/v1/acl/policy', { Name: name, Rules: rules })
  const token = await ok(agent, 'PUT', '/v1/acl/token', { Policies: [{ ID: policy.ID }] })
  return { secret: token.SecretID as string, accessor: token.AccessorID as string, policy, token }
}

/** `tokenWithRules`, answering only the SecretID. */
export async function secretWithRules(agent: AgentProcess, rules: string, name?: string): Promise<string> {
  return (await tokenWithRules(agent, rules, name)).secret
}
