/**
 * warden's HTTP API client. `new WardenClient({ address, token })` gives every endpoint of the contract by resource
 * (`client.acl.tokens.create(...)`, `client.config.get(kind, name)`), plus status, operator and catalog; the lower
 * levels (`request`, `call`, `query`) reach any path. Close it with `close()`.
 */
import { Acl } from './acl.js'
import { Client, type ClientOptions } from './client.js'
import { ConfigEntries } from './config.js'
import { Catalog, CloudLink, Operator, Status } from './operator.js'

export class WardenClient extends Client {
  readonly acl: Acl
  readonly config: ConfigEntries
  readonly operator: Operator
  readonly status: Status
  readonly catalog: Catalog
  readonly link: CloudLink

  constructor(options: ClientOptions = {}) {
    super(options)
    this.acl = new Acl(this)
    this.config = new ConfigEntries(this)
    this.operator = new Operator(this)
    this.status = new Status(this)
    this.catalog = new Catalog(this)
    this.link = new CloudLink(this)
  }
}

export { Client, DEFAULT_ADDRESS, metaOf, withQuery } from './client.js'
export type { Answer, ClientOptions, Consistency, QueryMeta, QueryOptions, RequestOptions, Result, UploadOptions } from './client.js'
export { ApiError, ConnectionError, errorFromAnswer, type ApiErrorCode } from './errors.js'
export { parseAddress, type TlsOptions } from './transport.js'
export { watch, type WatchOptions } from './watch.js'
export type * from './types.js'
