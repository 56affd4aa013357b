import { decode, encode, isPlainObject, PAYLOAD, TAG } from './codec.js';
import { AgentStateError, CodecError, SchemaMismatchError } from './errors.js';
import { type CallOptions, type HttpTransport, path } from './http.js';
import type { StandardSchemaV1 } from './standard-schema.js';
import type {
  Json,
  JsonObject,
  MemoryItem,
  MemoryOperators,
  MemorySearchRequest,
  MemorySearchResult,
  MemoryVersionList,
  MemoryWriteOptions,
  NamespaceList,
  NamespaceListQuery,
  PutMemoryRequest,
} from './types.js';

/**
 * Memory items on the client (docs/api.md §7c): the raw routes (`MemoryRoutes`, JSON as it
 * travels) and a namespace handle (`MemoryNamespace`, from `client.memory(namespace)`) with the
 * codec and an optional schema, like session handles and typed keys.
 */

const MAX_NAMESPACE_DEPTH = 8;

/** `/v1/memory/users/u1/facts/diet`: each id encoded on its own. */
function itemPath(namespace: readonly string[], key: string): string {
  return `/v1/memory/${[...namespace, key].map((segment) => encodeURIComponent(segment)).join('/')}`;
}

function namespaceQuery(namespace: readonly string[] | undefined): string | undefined {
  return namespace === undefined || namespace.length === 0 ? undefined : namespace.join('/');
}

/** The memory routes, raw JSON (`client.memoryItems`). */
export class MemoryRoutes {
  constructor(private readonly http: HttpTransport) {}

  /** `PUT /v1/memory/{namespace…}/{key}`: creates (`created: true`, 201) or replaces the item. */
  async put(
    namespace: readonly string[],
    key: string,
    request: PutMemoryRequest,
    options: MemoryWriteOptions & CallOptions = {},
  ): Promise<{ item: MemoryItem; created: boolean }> {
    const response = await this.http.request<MemoryItem>(
      { method: 'PUT', path: itemPath(namespace, key), body: request, ifMatch: options.ifMatch, ifNoneMatch: options.ifNoneMatch },
      options,
    );
    return { item: response.body, created: response.status === 201 };
  }

  /** `GET /v1/memory/{namespace…}/{key}`. `404 not_found` when there is no live item; `includeEmbedding`: with its embedding. */
  async get(namespace: readonly string[], key: string, options: CallOptions & { includeEmbedding?: boolean } = {}): Promise<MemoryItem> {
    const query = options.includeEmbedding ? { includeEmbedding: 'true' } : undefined;
    return (await this.http.request<MemoryItem>({ method: 'GET', path: itemPath(namespace, key), query }, options)).body;
  }

  /** `DELETE /v1/memory/{namespace…}/{key}` → 204, also when there was no item. */
  async delete(namespace: readonly string[], key: string, options: Pick<MemoryWriteOptions, 'ifMatch'> & CallOptions = {}): Promise<void> {
    await this.http.request<undefined>({ method: 'DELETE', path: itemPath(namespace, key), ifMatch: options.ifMatch }, options);
  }

  /** `POST /v1/memory/search`: one page, newest first. */
  async search(request: MemorySearchRequest, options?: CallOptions): Promise<MemorySearchResult> {
    return (await this.http.request<MemorySearchResult>({ method: 'POST', path: '/v1/memory/search', body: request }, options)).body;
  }

  /** `GET /v1/memory?prefix=&maxDepth=`: one page of namespaces, in path order. */
  async namespaces(query: NamespaceListQuery = {}, options?: CallOptions): Promise<NamespaceList> {
    const { prefix, ...rest } = query;
    return (
      await this.http.request<NamespaceList>(
        { method: 'GET', path: '/v1/memory', query: { ...rest, prefix: namespaceQuery(prefix) } },
        options,
      )
    ).body;
  }

  /** `GET /v1/memory/versions?namespace=&key=`: the item, then the versions it replaced, newest first. */
  async versions(
    namespace: readonly string[],
    key: string,
    query: { limit?: number; cursor?: string } = {},
    options?: CallOptions,
  ): Promise<MemoryVersionList> {
    return (
      await this.http.request<MemoryVersionList>(
        { method: 'GET', path: path`/v1/memory/versions`, query: { ...query, namespace: namespaceQuery(namespace), key } },
        options,
      )
    ).body;
  }
}

/** A memory item with its value decoded (and, with a schema, checked). */
export type MemoryRecord<T> = Omit<MemoryItem, 'value'> & { value: T };

/** Options of `client.memory(namespace, options)`. */
export interface MemoryNamespaceOptions<T> {
  /**
   * Checks every value written (before anything is sent) and read (a stored value that does
   * not match throws `SchemaMismatchError`, never silently replaced). Any Standard Schema (zod,
   * valibot, arktype…).
   */
  schema?: StandardSchemaV1<unknown, T>;
  /** The agent these calls act as (`X-Agent-Id`); default the client's. */
  agentId?: string;
}

/** Options of a put: the expiry and the preconditions. */
export interface MemoryPutOptions extends MemoryWriteOptions, CallOptions {
  /** The item expires this many seconds after the put; absent: never (a put replaces the expiry too). */
  ttlSeconds?: number;
}

/**
 * A filter over decoded values: each top-level field a value (equality) or operators. Values
 * and operands go through the codec, so a `Date` matches a stored `Date` by equality; ordering
 * operators compare numbers and strings only (store a time as an ISO string to range over it).
 */
export type MemoryFilter<T> = {
  [K in keyof T]?: T[K] | MemoryOperators<T[K]>;
} & Record<string, unknown>;

export interface MemorySearchOptions<T> extends CallOptions {
  filter?: MemoryFilter<T>;
  /** 1–500, default 50. */
  limit?: number;
  cursor?: string;
}

/** Options of `list()`: the namespaces under the handle's own. */
export interface MemoryListOptions extends CallOptions {
  /** Cut each namespace to this many ids (1–8, at least the handle's depth). */
  maxDepth?: number;
  limit?: number;
  cursor?: string;
}

/**
 * One memory namespace with the codec: values of any type the codec carries (`Date`, `Map`,
 * `BigInt`, …) in and out, checked against `schema` when there is one.
 *
 * ```ts
 * const facts = client.memory(['users', 'u1', 'facts'], { schema: Fact });
 * await facts.put('diet', { food: 'vegan', since: new Date() }, { ttlSeconds: 86_400 });
 * const diet = await facts.get('diet');          // MemoryRecord<Fact> | null
 * const { items } = await facts.search({ filter: { food: 'vegan' } });
 * ```
 *
 * `search` and `list` cover this namespace and every namespace below it (`client.memory([])`:
 * all the key may read); `put`, `get` and `delete` need a namespace of 1–8 ids.
 */
export class MemoryNamespace<T extends object = Record<string, unknown>> {
  readonly namespace: readonly string[];

  constructor(
    private readonly routes: MemoryRoutes,
    namespace: readonly string[],
    private readonly options: MemoryNamespaceOptions<T> = {},
  ) {
    if (!Array.isArray(namespace) || namespace.length > MAX_NAMESPACE_DEPTH || namespace.some((id) => typeof id !== 'string')) {
      throw new TypeError(`a memory namespace is an array of 0 to ${MAX_NAMESPACE_DEPTH} ids`);
    }
    this.namespace = Object.freeze([...namespace]);
  }

  /** The namespace `segments` below this one. */
  child(...segments: string[]): MemoryNamespace<T> {
    return new MemoryNamespace<T>(this.routes, [...this.namespace, ...segments], this.options);
  }

  /**
   * Puts the item `key` (the whole value; checked against the schema first, nothing sent when
   * it does not match). `ifMatch`/`ifNoneMatch` make it conditional (`412 version_mismatch`).
   */
  async put(key: string, value: T, options: MemoryPutOptions = {}): Promise<MemoryRecord<T> & { created: boolean }> {
    const namespace = this.itemNamespace();
    const checked = await this.check(key, value, 'write');
    const { ttlSeconds, ...call } = options;
    const { item, created } = await this.routes.put(
      namespace,
      key,
      { value: encodeValue(checked), ...(ttlSeconds === undefined ? {} : { ttlSeconds }) },
      this.call(call),
    );
    return { ...(await this.record(item)), created };
  }

  /** The item, or null when there is none (never written, deleted, expired). */
  async get(key: string, call?: CallOptions): Promise<MemoryRecord<T> | null> {
    try {
      return await this.record(await this.routes.get(this.itemNamespace(), key, this.call(call)));
    } catch (error) {
      if (AgentStateError.is(error, 'not_found')) return null;
      throw error;
    }
  }

  /** Deletes the item (succeeds when there is none); with `ifMatch`, only at that version. */
  async delete(key: string, options: Pick<MemoryWriteOptions, 'ifMatch'> & CallOptions = {}): Promise<void> {
    await this.routes.delete(this.itemNamespace(), key, this.call(options));
  }

  /** One page of the items in this namespace and below, newest first, matching `filter`. */
  async search(options: MemorySearchOptions<T> = {}): Promise<{ items: MemoryRecord<T>[]; next?: string }> {
    const { filter, limit, cursor, ...call } = options;
    const page = await this.routes.search(
      {
        namespacePrefix: [...this.namespace],
        ...(filter === undefined ? {} : { filter: encodeFilter(filter) }),
        ...(limit === undefined ? {} : { limit }),
        ...(cursor === undefined ? {} : { cursor }),
      },
      this.call(call),
    );
    const items = await Promise.all(page.items.map((item) => this.record(item)));
    return page.next === undefined ? { items } : { items, next: page.next };
  }

  /** Every matching item, newest first, following `next`. */
  async *iterate(options: Omit<MemorySearchOptions<T>, 'cursor'> = {}): AsyncGenerator<MemoryRecord<T>, void, undefined> {
    let cursor: string | undefined;
    do {
      const page = await this.search({ ...options, ...(cursor === undefined ? {} : { cursor }) });
      yield* page.items;
      cursor = page.next;
    } while (cursor !== undefined);
  }

  /** One page of the namespaces that hold items at or below this one, in path order. */
  async list(options: MemoryListOptions = {}): Promise<NamespaceList> {
    const { maxDepth, limit, cursor, ...call } = options;
    return this.routes.namespaces(
      {
        prefix: [...this.namespace],
        ...(maxDepth === undefined ? {} : { maxDepth }),
        ...(limit === undefined ? {} : { limit }),
        ...(cursor === undefined ? {} : { cursor }),
      },
      this.call(call),
    );
  }

  /** The item's versions, newest first: the current one, then those it replaced (kept 30 days). */
  async versions(
    key: string,
    options: { limit?: number; cursor?: string } & CallOptions = {},
  ): Promise<{ versions: MemoryRecord<T>[]; next?: string }> {
    const { limit, cursor, ...call } = options;
    const page = await this.routes.versions(
      this.itemNamespace(),
      key,
      { ...(limit === undefined ? {} : { limit }), ...(cursor === undefined ? {} : { cursor }) },
      this.call(call),
    );
    const versions = await Promise.all(page.versions.map((item) => this.record(item)));
    return page.next === undefined ? { versions } : { versions, next: page.next };
  }

  private itemNamespace(): readonly string[] {
    if (this.namespace.length === 0) throw new TypeError('an item lives in a namespace of 1 to 8 ids: use client.memory([...ids])');
    return this.namespace;
  }

  private call<C extends CallOptions>(call: C | undefined): C {
    return (this.options.agentId === undefined ? { ...call } : { agentId: this.options.agentId, ...call }) as C;
  }

  private async record(item: MemoryItem): Promise<MemoryRecord<T>> {
    let value: unknown;
    try {
      value = decode(item.value);
    } catch (error) {
      if (!(error instanceof CodecError)) throw error;
      throw new SchemaMismatchError(itemName(item.namespace, item.key), 'read', [{ message: error.detail }], item.value);
    }
    return { ...item, value: await this.check(itemName(item.namespace, item.key), value, 'read') };
  }

  private async check(key: string, value: unknown, phase: 'read' | 'write'): Promise<T> {
    const schema = this.options.schema;
    if (!schema) return value as T;
    const result = await schema['~standard'].validate(value);
    if (result.issues) {
      throw new SchemaMismatchError(phase === 'write' ? itemName(this.namespace, key) : key, phase, result.issues, value);
    }
    return result.value;
  }
}

function itemName(namespace: readonly string[], key: string): string {
  return [...namespace, key].join('/');
}

/** A value as stored: a plain object, encoded (a `Map` or `Date` at the top is not an object of fields). */
function encodeValue(value: unknown): JsonObject {
  if (!isPlainObject(value)) throw new CodecError('a memory value is a plain object of fields', []);
  return encode(value) as JsonObject;
}

/**
 * The filter as the API reads it: a field name as the codec stores it (`$x` → `$$x`), an
 * operator object's operands encoded, and a value that encodes to a tagged object (a `Date`,
 * a `Map`) wrapped in `$eq` (its `$as` would otherwise read as an operator).
 */
function encodeFilter(filter: Record<string, unknown>): Record<string, Json> {
  const encoded: Record<string, Json> = {};
  for (const [field, condition] of Object.entries(filter)) {
    if (condition === undefined) continue;
    const name = field.startsWith('$') ? `$${field}` : field;
    Object.defineProperty(encoded, name, { value: encodeCondition(condition), enumerable: true, writable: true, configurable: true });
  }
  return encoded;
}

function encodeCondition(condition: unknown): Json {
  if (isPlainObject(condition)) {
    const names = Object.keys(condition);
    // Every key an operator: an operator object (an unknown one is the API's to refuse, 400).
    if (names.length > 0 && names.every((name) => name.startsWith('$'))) {
      const operators: Record<string, Json> = {};
      for (const name of names) {
        const operand = condition[name];
        operators[name] = name === '$in' && Array.isArray(operand) ? operand.map((member) => encode(member)) : encode(operand);
      }
      return operators;
    }
  }
  const value = encode(condition);
  return value !== null &&
    typeof value === 'object' &&
    !Array.isArray(value) &&
    TAG in value &&
    Object.keys(value).every((name) => name === TAG || name === PAYLOAD)
    ? { $eq: value }
    : value;
}
