/**
 * Body validation with JSON Schema (ajv): one declarative schema per body, and one readable message for the first
 * rule broken, naming the field by its path (`Policies[0].ID: must be string`).
 *
 * Before validating, keys are matched to the schema's property names without regard to case, as Go's encoding/json
 * (and so Consul) does, and `null` values are dropped, as Go decodes them into absent fields.
 */
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv'
import { InvalidInputError } from '../lib/errors.js'

export interface Schema {
  type?: string | string[]
  properties?: Record<string, Schema>
  items?: Schema
  additionalProperties?: boolean | Schema
  required?: string[]
  [keyword: string]: unknown
}

const ajv = new Ajv({ allErrors: false, strict: false })
const compiled = new WeakMap<Schema, ValidateFunction>()

export function validateBody<T>(schema: Schema, value: unknown, root = ''): T {
  const normalized = normalize(schema, value)
  let validate = compiled.get(schema)
  if (validate === undefined) {
    validate = ajv.compile(schema)
    compiled.set(schema, validate)
  }
  if (!validate(normalized)) throw toInputError(validate.errors?.[0], root)
  return normalized as T
}

/** Each schema's property names by their lower case, built once per schema rather than on every body. */
const lowerCaseNames = new WeakMap<Schema, ReadonlyMap<string, string>>()

function namesByLowerCase(schema: Schema, properties: Record<string, Schema>): ReadonlyMap<string, string> {
  let names = lowerCaseNames.get(schema)
  if (names === undefined) {
    names = new Map(Object.keys(properties).map((name) => [name.toLowerCase(), name]))
    lowerCaseNames.set(schema, names)
  }
  return names
}

function normalize(schema: Schema | undefined, value: unknown): unknown {
  // A boolean schema (`true`) says nothing of its fields: the value goes on as it is.
  if (value === null || value === undefined || schema === undefined || typeof schema !== 'object') return value
  if (Array.isArray(value)) return value.map((item) => normalize(schema.items, item))
  if (typeof value !== 'object') return value
  const properties = schema.properties ?? {}
  const byLowerCase = namesByLowerCase(schema, properties)
  const result: Record<string, unknown> = {}
  for (const key of Object.keys(value)) {
    const item = (value as Record<string, unknown>)[key]
    if (item === null) continue
    const name = Object.hasOwn(properties, key) ? key : (byLowerCase.get(key.toLowerCase()) ?? key)
    // When a client sends both "Name" and "name", the exact spelling wins.
    if (Object.hasOwn(result, name) && name !== key) continue
    // Own properties only: a key `toString` or `constructor` must not find Object.prototype's member as its schema.
    const additional = typeof schema.additionalProperties === 'object' ? schema.additionalProperties : undefined
    const itemSchema = Object.hasOwn(properties, name) ? properties[name] : additional
    const normalized = normalize(itemSchema, item)
    // A key `__proto__` must stay a field (refused as unknown), not set a prototype: defineProperty for it alone, since
    // plain assignment keeps the object's fast shape.
    if (name === '__proto__') Object.defineProperty(result, name, { value: normalized, enumerable: true, writable: true, configurable: true })
    else result[name] = normalized
  }
  return result
}

function fieldPath(root: string, instancePath: string): string {
  let path = root
  for (const part of instancePath.split('/').slice(1)) {
    const unescaped = part.replace(/~1/g, '/').replace(/~0/g, '~')
    path += /^\d+$/.test(unescaped) ? `[${unescaped}]` : path === '' ? unescaped : `.${unescaped}`
  }
  return path
}

function join(path: string, name: string): string {
  return path === '' ? name : `${path}.${name}`
}

function toInputError(error: ErrorObject | undefined, root: string): InvalidInputError {
  if (error === undefined) return new InvalidInputError(root || 'body', 'is invalid')
  const path = fieldPath(root, error.instancePath)
  const params = error.params as Record<string, unknown>
  switch (error.keyword) {
    case 'required':
      return new InvalidInputError(join(path, String(params.missingProperty)), 'is required')
    case 'additionalProperties':
      return new InvalidInputError(join(path, String(params.additionalProperty)), 'is not a known field')
    case 'type':
      return new InvalidInputError(path || 'body', `must be ${describeType(params.type)}`)
    case 'enum':
      return new InvalidInputError(path || 'body', `must be one of ${(params.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}`)
    case 'pattern':
      return new InvalidInputError(path || 'body', `must match ${String(params.pattern)}`)
    case 'format':
      return new InvalidInputError(path || 'body', `must be a ${String(params.format)}`)
    default:
      return new InvalidInputError(path || 'body', error.message ?? 'is invalid')
  }
}

function describeType(type: unknown): string {
  const types = Array.isArray(type) ? type : [type]
  return types.map((name) => (name === 'object' ? 'an object' : name === 'array' ? 'an array' : `a ${String(name)}`)).join(' or ')
}
