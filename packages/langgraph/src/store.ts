import {
  type AgentStateApi,
  AgentStateError,
  createClient,
  type JsonObject,
  type MemoryItem,
  type MemorySearchRequest,
} from '@agentstate/client';
import {
  BaseStore,
  type GetOperation,
  type Item,
  type ListNamespacesOperation,
  type MatchCondition,
  type Operation,
  type OperationResults,
  type PutOperation,
  type SearchItem,
  type SearchOperation,
  validateNamespace,
} from '@langchain/langgraph-checkpoint';
import { checkedPrefix, escapeName, unescapeName } from './ids.js';

/** Options of `new AgentStateStore(…)`. */
export interface AgentStateStoreOptions {
  /** The agentstate API: `http://localhost:4000` for `npm start`, the stack's `ApiUrl` in AWS. */
  baseUrl?: string;
  /** An API key of the tenant the items belong to. */
  apiKey?: string;
  /** A client to share (its key, retries and timeouts); `baseUrl` and `apiKey` are then not needed. */
  client?: AgentStateApi;
  /**
   * The first id of every memory namespace this store uses (`["<prefix>", …your namespace]`):
   * stores with different prefixes never see each other's items. 1–64 of `A-Z a-z 0-9 . _ : -`.
   * Without one, a LangGraph namespace is the memory namespace itself (up to 8 labels).
   */
  prefix?: string;
  /** Expiry of every put that names none, in minutes (LangGraph's unit); none by default. */
  ttl?: { defaultTtl?: number };
}

/** A put of `batch`, with the expiry agentstate keeps (`null`: never expires). */
export interface AgentStatePutOperation extends PutOperation {
  /** Minutes until the item expires; `null` for none; default: the store's `ttl.defaultTtl`. */
  ttl?: number | null;
}

/** The most items one search page may ask for. */
const MAX_PAGE = 500;
/** The longest expiry agentstate takes: ten years, in seconds. */
const MAX_TTL_SECONDS = 315_360_000;

/**
 * A LangGraph store on agentstate's memory items, over its HTTP API (docs/langgraph.md).
 *
 * A LangGraph namespace is a memory namespace (its labels escaped into agentstate ids, behind
 * the store's `prefix`), a key an item's key, a value the item's value (a JSON object). `get`,
 * `put` and `delete` are one request each; `search` filters on top-level fields with
 * agentstate's operators (`$eq $ne $gt $gte $lt $lte $in`), newest first, and is eventually
 * consistent, as agentstate's search is. There is no semantic search: a `query` is refused.
 */
export class AgentStateStore extends BaseStore {
  private readonly client: AgentStateApi;
  private readonly root: string[];
  private readonly defaultTtl: number | undefined;

  constructor(options: AgentStateStoreOptions) {
    super();
    if (options.client) {
      this.client = options.client;
    } else {
      if (!options.baseUrl || !options.apiKey) throw new TypeError('AgentStateStore needs baseUrl and apiKey (or a client)');
      this.client = createClient({ baseUrl: options.baseUrl, apiKey: options.apiKey });
    }
    const prefix = checkedPrefix(options.prefix);
    this.root = prefix === '' ? [] : [prefix];
    this.defaultTtl = options.ttl?.defaultTtl;
    if (this.defaultTtl !== undefined) ttlSecondsOf(this.defaultTtl);
  }

  /**
   * Runs the operations as LangGraph's in-memory store does: reads (gets, searches, namespace
   * lists) see the items as they were before the batch, then the puts and deletes are applied,
   * the last one of each item winning. Answers are in the operations' order.
   */
  async batch<Op extends Operation[]>(operations: Op): Promise<OperationResults<Op>> {
    const results: unknown[] = new Array(operations.length).fill(undefined);
    const puts = new Map<string, AgentStatePutOperation>();
    for (const operation of operations) {
      if ('value' in operation) puts.set(JSON.stringify([operation.namespace, operation.key]), operation);
    }
    // Every put is checked before anything is sent: a bad one fails the batch, which writes nothing.
    const writes = [...puts.values()].map((operation) => this.write(operation));
    await Promise.all(
      operations.map(async (operation, index) => {
        if ('value' in operation) return;
        if ('namespacePrefix' in operation) results[index] = await this.searchOperation(operation);
        else if ('matchConditions' in operation || 'limit' in operation)
          results[index] = await this.listOperation(operation as ListNamespacesOperation);
        else results[index] = await this.getOperation(operation as GetOperation);
      }),
    );
    await Promise.all(writes.map((send) => send()));
    return results as OperationResults<Op>;
  }

  /**
   * Puts an item (replacing any at that key); `options.ttl` in minutes sets when it expires
   * (`null`: never), by default the store's `ttl.defaultTtl`. `index` is accepted and has no
   * effect: agentstate indexes every short top-level field of every value for `search`.
   */
  override async put(
    namespace: string[],
    key: string,
    value: Record<string, unknown>,
    index?: false | string[],
    options: { ttl?: number | null } = {},
  ): Promise<void> {
    validateNamespace(namespace);
    const operation: AgentStatePutOperation = { namespace, key, value, ...(index === undefined ? {} : { index }) };
    if (options.ttl !== undefined) operation.ttl = options.ttl;
    await this.batch([operation]);
  }

  // ---- operations --------------------------------------------------------------------------

  private async getOperation({ namespace, key }: GetOperation): Promise<Item | null> {
    const ids = this.idsOf(namespace);
    if (ids.length === 0) return null;
    try {
      return this.itemOf(await this.client.memoryItems.get(ids, escapeName(key)));
    } catch (error) {
      if (AgentStateError.is(error, 'not_found')) return null;
      throw error;
    }
  }

  /**
   * A put (a delete for a null value), ready to send; throws at once, before anything is sent,
   * on a ttl agentstate would refuse.
   */
  private write(operation: AgentStatePutOperation): () => Promise<unknown> {
    const ids = this.idsOf(operation.namespace);
    const key = escapeName(operation.key);
    const { value } = operation;
    if (value === null) return () => this.client.memoryItems.delete(ids, key);
    const ttl = operation.ttl === undefined ? this.defaultTtl : operation.ttl;
    const request = {
      value: value as JsonObject,
      ...(ttl === undefined || ttl === null ? {} : { ttlSeconds: ttlSecondsOf(ttl) }),
    };
    return () => this.client.memoryItems.put(ids, key, request);
  }

  private async searchOperation({ namespacePrefix, filter, limit = 10, offset = 0, query }: SearchOperation): Promise<SearchItem[]> {
    if (query !== undefined && query !== '') {
      throw new TypeError('AgentStateStore has no semantic search: search with a filter, or leave query out');
    }
    const wanted = offset + limit;
    const found: SearchItem[] = [];
    let cursor: string | undefined;
    do {
      const request = {
        namespacePrefix: this.idsOf(namespacePrefix),
        ...(filter && Object.keys(filter).length > 0 ? { filter: filter as MemorySearchRequest['filter'] } : {}),
        limit: Math.min(Math.max(wanted - found.length, 1), MAX_PAGE),
        ...(cursor ? { cursor } : {}),
      };
      const body = await this.client.memoryItems.search(request);
      for (const item of body.items) found.push({ ...this.itemOf(item), score: undefined });
      cursor = body.next;
    } while (cursor && found.length < wanted);
    return found.slice(offset, wanted);
  }

  /**
   * The namespaces under the store's prefix. A plain prefix condition and `maxDepth` are passed
   * to agentstate; wildcards and suffixes are matched here, on the whole list, so that a
   * namespace is cut to `maxDepth` only after it matched (as LangGraph's own stores do).
   */
  private async listOperation({ matchConditions = [], maxDepth, limit, offset }: ListNamespacesOperation): Promise<string[][]> {
    const plain = matchConditions.length === 1 && matchConditions[0]?.matchType === 'prefix' && !matchConditions[0].path.includes('*');
    const serverPrefix = plain ? this.idsOf(matchConditions[0]?.path as string[]) : this.root;
    const serverDepth = plain && maxDepth !== undefined ? Math.max(maxDepth + this.root.length, serverPrefix.length) : undefined;
    let namespaces: string[][] = [];
    let cursor: string | undefined;
    do {
      const query = {
        ...(serverPrefix.length > 0 ? { prefix: serverPrefix } : {}),
        ...(serverDepth !== undefined && serverDepth <= 8 ? { maxDepth: serverDepth } : {}),
        limit: MAX_PAGE,
        ...(cursor ? { cursor } : {}),
      };
      const body = await this.client.memoryItems.namespaces(query);
      for (const ids of body.namespaces) {
        const namespace = this.namespaceOf(ids);
        if (namespace) namespaces.push(namespace);
      }
      cursor = body.next;
    } while (cursor);
    namespaces = namespaces.filter((namespace) => matchConditions.every((condition) => matches(condition, namespace)));
    if (maxDepth !== undefined) {
      const cut = new Map(
        namespaces.map((namespace) => namespace.slice(0, maxDepth)).map((namespace) => [JSON.stringify(namespace), namespace]),
      );
      namespaces = [...cut.values()];
    }
    return namespaces.slice(offset, offset + limit);
  }

  // ---- names -------------------------------------------------------------------------------

  /** A LangGraph namespace as memory namespace ids: the prefix, then each label escaped. */
  private idsOf(namespace: readonly string[]): string[] {
    return [...this.root, ...namespace.map(escapeName)];
  }

  /** A memory namespace as this store's LangGraph namespace (undefined: not under its prefix). */
  private namespaceOf(ids: readonly string[]): string[] | undefined {
    if (!this.root.every((id, index) => ids[index] === id)) return undefined;
    return ids.slice(this.root.length).map(unescapeName);
  }

  private itemOf(item: MemoryItem): Item {
    return {
      namespace: this.namespaceOf(item.namespace) ?? item.namespace,
      key: unescapeName(item.key),
      value: item.value,
      createdAt: new Date(item.createdAt),
      updatedAt: new Date(item.updatedAt),
    };
  }
}

/** Minutes as agentstate's whole seconds, checked before anything is sent. */
function ttlSecondsOf(minutes: number): number {
  const seconds = Math.round(minutes * 60);
  if (!Number.isFinite(minutes) || seconds < 1 || seconds > MAX_TTL_SECONDS) {
    throw new RangeError(`ttl must be from 1/60 to ${MAX_TTL_SECONDS / 60} minutes (got ${minutes})`);
  }
  return seconds;
}

/** LangGraph's namespace match: labels in order, `*` matching any one label. */
function matches({ matchType, path }: MatchCondition, namespace: readonly string[]): boolean {
  if (path.length > namespace.length) return false;
  const start = matchType === 'prefix' ? 0 : namespace.length - path.length;
  return path.every((label, index) => label === '*' || namespace[start + index] === label);
}
