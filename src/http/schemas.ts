/**
 * JSON Schemas of the ACL request bodies. Unknown fields are refused (readings.md); the response-only fields that
 * read-modify-write clients send back (CreateIndex, ModifyIndex, Hash, CreateTime) are accepted when of their type,
 * and ignored.
 */
import type { Schema } from './validate.js'

const string: Schema = { type: 'string' }
const stringList: Schema = { type: 'array', items: string, maxItems: 1024 }
/** Typed as Consul's Go structs decode them (uint64, []byte as base64 text, time.Time as text): a wrong type is a 400. */
const raftIndex: Schema = { type: 'integer', minimum: 0 }
const responseOnly = { CreateIndex: raftIndex, ModifyIndex: raftIndex, Hash: string, CreateTime: string } satisfies Record<string, Schema>

export const linkSchema: Schema = {
  type: 'object',
  properties: { ID: string, Name: string },
  additionalProperties: false,
}

export const serviceIdentitySchema: Schema = {
  type: 'object',
  properties: { ServiceName: string, Datacenters: stringList },
  required: ['ServiceName'],
  additionalProperties: false,
}

export const nodeIdentitySchema: Schema = {
  type: 'object',
  properties: { NodeName: string, Datacenter: string },
  required: ['NodeName', 'Datacenter'],
  additionalProperties: false,
}

export const templatedPolicyLinkSchema: Schema = {
  type: 'object',
  properties: {
    TemplateName: string,
    // Consul's ACLTemplatedPolicyVariables has one variable, `name`; Go matches its JSON key without regard to case.
    TemplateVariables: { type: 'object', properties: { name: {} }, additionalProperties: false },
    TemplateID: string,
  },
  required: ['TemplateName'],
  additionalProperties: false,
}

const links = { type: 'array', items: linkSchema, maxItems: 1024 } satisfies Schema
const linkedFields = {
  Policies: links,
  Roles: links,
  TemplatedPolicies: { type: 'array', items: templatedPolicyLinkSchema, maxItems: 1024 },
  ServiceIdentities: { type: 'array', items: serviceIdentitySchema, maxItems: 1024 },
  NodeIdentities: { type: 'array', items: nodeIdentitySchema, maxItems: 1024 },
} satisfies Record<string, Schema>

export const tokenSchema: Schema = {
  type: 'object',
  properties: {
    AccessorID: string,
    SecretID: string,
    Description: string,
    ...linkedFields,
    Local: { type: 'boolean' },
    AuthMethod: string,
    ExpirationTime: string,
    ExpirationTTL: { type: ['string', 'number'] },
    Namespace: string,
    ...responseOnly,
  },
  additionalProperties: false,
}

export const tokenCloneSchema: Schema = {
  type: 'object',
  properties: { Description: string, Namespace: string },
  additionalProperties: false,
}

export const policySchema: Schema = {
  type: 'object',
  properties: { ID: string, Name: string, Description: string, Rules: string, Datacenters: stringList, Namespace: string, ...responseOnly },
  required: ['Name'],
  additionalProperties: false,
}

export const roleSchema: Schema = {
  type: 'object',
  properties: {
    ID: string,
    Name: string,
    Description: string,
    Policies: links,
    TemplatedPolicies: linkedFields.TemplatedPolicies,
    ServiceIdentities: linkedFields.ServiceIdentities,
    NodeIdentities: linkedFields.NodeIdentities,
    Namespace: string,
    ...responseOnly,
  },
  required: ['Name'],
  additionalProperties: false,
}

export const namespaceRuleSchema: Schema = {
  type: 'object',
  properties: { Selector: string, BindNamespace: string },
  required: ['BindNamespace'],
  additionalProperties: false,
}

export const authMethodSchema: Schema = {
  type: 'object',
  properties: {
    Name: string,
    Type: string,
    DisplayName: string,
    Description: string,
    MaxTokenTTL: { type: ['string', 'number'] },
    TokenLocality: { type: 'string', enum: ['', 'local', 'global'] },
    Config: { type: 'object' },
    Namespace: string,
    NamespaceRules: { type: 'array', items: namespaceRuleSchema, maxItems: 256 },
    CreateIndex: raftIndex,
    ModifyIndex: raftIndex,
  },
  additionalProperties: false,
}

export const bindingRuleSchema: Schema = {
  type: 'object',
  properties: {
    ID: string,
    Description: string,
    AuthMethod: string,
    Selector: string,
    BindType: { type: 'string', enum: ['service', 'node', 'role', 'templated-policy'] },
    BindName: string,
    BindVars: { type: 'object', additionalProperties: string },
    Namespace: string,
    CreateIndex: raftIndex,
    ModifyIndex: raftIndex,
  },
  additionalProperties: false,
}

export const bootstrapSchema: Schema = {
  type: 'object',
  properties: { BootstrapSecret: string },
  additionalProperties: false,
}

export const previewSchema: Schema = {
  type: 'object',
  properties: { Name: string },
  additionalProperties: false,
}
