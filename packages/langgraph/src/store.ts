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
  getTextAtPath,
  type IndexConfig,
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
import { ttlSecondsOf } from './ttl.js';

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
  /**
   * `defaultTtl`: expiry of every put that names none, in minutes (LangGraph's unit); none by
   * default. `refreshOnRead` (default true, as LangGraph's TTL config): a `get` or `search` that
   * returns an item with an expiry starts its TTL again (see `refresh`).
   */
  ttl?: { defaultTtl?: number; refreshOnRead?: boolean };
  /**
   * Semantic search (LangGraph's `IndexConfig`): each put embeds the text at `fields` (default
   * `["$"]`, the whole value) with `embeddings` and stores the vector beside the item; a
   * `search` with `query` ranks by cosine similarity on the server. An item's texts are embedded
   * as one document (joined by blank lines): one vector per item.
   */
  index?: IndexConfig;
}

/** A put of `batch`, with the expiry agentstate keeps (`null`: never expires). */
export interface AgentStatePutOperation extends PutOperation {
  /** Minutes until the item expires; `null` for none; default: the store's `ttl.defaultTtl`. */
  ttl?: number | null;
}

/** The most items one search page may ask for. */
const MAX_PAGE = 500;

/**
 * A LangGraph store on agentstate's memory items, over its HTTP API (docs/langgraph.md).
 *
 * A LangGraph namespace is a memory namespace (its labels escaped into agentstate ids, behind
 * the store's `prefix`), a key an item's key, a value the item's value (a JSON object). `get`,
 * `put` and `delete` are one request each; `search` filters on top-level fields with
 * agentstate's operators (`$eq $ne $gt $gte $lt $lte $in`), newest first, and sees every put
 * that answered. With an `index`, a `query` ranks by similarity on the server.
 */
export class AgentStateStore extends BaseStore {
  private readonly client: AgentStateApi;
  private readonly root: string[];
  private readonly defaultTtl: number | undefined;
  private readonly refreshOnRead: boolean;
  private readonly index: IndexConfig | undefined;

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
    this.refreshOnRead = options.ttl?.refreshOnRead ?? true;
    this.index = options.index;
  }

  /** The semantic-search configuration, as LangGraph's stores expose it. */
  get indexConfig(): IndexConfig | undefined {
    return this.index;
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
    // Every put is checked and embedded before anything is sent: a bad one fails the batch, which writes nothing.
    const embeddings = await this.embed([...puts.values()]);
    const writes = [...puts.values()].map((operation) => this.write(operation, embeddings.get(operation)));
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
   * (`null`: never), by default the store's `ttl.defaultTtl`. With the store's `index`, `index`
   * names the fields this put embeds in place of the index's `fields` (`false`: none, the item
   * is stored without an embedding); without one it has no effect.
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
      const item = await this.client.memoryItems.get(ids, escapeName(key), { includeEmbedding: this.refreshesEmbedded() });
      await this.refresh([item]);
      return this.itemOf(item);
    } catch (error) {
      if (AgentStateError.is(error, 'not_found')) return null;
      throw error;
    }
  }

  /**
   * A put (a delete for a null value), ready to send; throws at once, before anything is sent,
   * on a ttl agentstate would refuse.
   */
  private write(operation: AgentStatePutOperation, embedding: number[] | undefined): () => Promise<unknown> {
    const ids = this.idsOf(operation.namespace);
    const key = escapeName(operation.key);
    const { value } = operation;
    if (value === null) return () => this.client.memoryItems.delete(ids, key);
    const ttl = operation.ttl === undefined ? this.defaultTtl : operation.ttl;
    const request = {
      value: value as JsonObject,
      ...(ttl === undefined || ttl === null ? {} : { ttlSeconds: ttlSecondsOf(ttl) }),
      ...(embedding ? { embedding } : {}),
    };
    return () => this.client.memoryItems.put(ids, key, request);
  }

  /**
   * The embedding of each put that is indexed (one call of `embedDocuments` for the batch): its
   * texts at the index's fields, or at the put's own `index` fields; none for `index: false`, a
   * delete, or a value with no text there.
   */
  private async embed(operations: readonly AgentStatePutOperation[]): Promise<Map<AgentStatePutOperation, number[]>> {
    const { index } = this;
    const embedded = new Map<AgentStatePutOperation, number[]>();
    if (!index) return embedded;
    const documents: Array<{ operation: AgentStatePutOperation; text: string }> = [];
    for (const operation of operations) {
      if (operation.value === null || operation.index === false) continue;
      const fields = operation.index ?? index.fields ?? ['$'];
      // "$" is the whole value, as LangGraph's in-memory store embeds it (the exported getTextAtPath has no "$").
      const texts = fields.flatMap((field) =>
        field === '$' ? [JSON.stringify(operation.value, null, 2)] : getTextAtPath(operation.value, field),
      );
      if (texts.length > 0) documents.push({ operation, text: texts.join('\n\n') });
    }
    if (documents.length === 0) return embedded;
    const vectors = await index.embeddings.embedDocuments(documents.map(({ text }) => text));
    documents.forEach(({ operation }, at) => {
      embedded.set(operation, checkedVector(vectors[at], index.dims));
    });
    return embedded;
  }

  private async searchOperation(operation: SearchOperation): Promise<SearchItem[]> {
    const { query } = operation;
    // Without an index the query is ignored, as LangGraph's InMemoryStore ignores it: items come newest first, unscored.
    if (query === undefined || query === '' || !this.index) return this.recentItems(operation);
    return this.similarItems(operation, checkedVector(await this.index.embeddings.embedQuery(query), this.index.dims));
  }

  /**
   * The items most similar to `vector` (ranked on the server), then, as LangGraph's in-memory
   * store does, items with no embedding, unscored, to fill the page.
   */
  private async similarItems(
    { namespacePrefix, filter, limit = 10, offset = 0 }: SearchOperation,
    vector: number[],
  ): Promise<SearchItem[]> {
    const wanted = offset + limit;
    if (wanted > MAX_PAGE) throw new RangeError(`offset + limit of a search with a query may be at most ${MAX_PAGE}`);
    const body = await this.client.memoryItems.search({
      namespacePrefix: this.idsOf(namespacePrefix),
      ...(filter && Object.keys(filter).length > 0 ? { filter: filter as MemorySearchRequest['filter'] } : {}),
      limit: wanted,
      vector,
      ...(this.refreshesEmbedded() ? { includeEmbedding: true } : {}),
    });
    await this.refresh(body.items);
    const found: SearchItem[] = body.items.map((item) => ({ ...this.itemOf(item), score: item.score }));
    if (found.length < wanted) {
      const scored = new Set(found.map((item) => JSON.stringify([item.namespace, item.key])));
      const unscored = await this.recentItems({ namespacePrefix, ...(filter ? { filter } : {}), limit: MAX_PAGE }, (item) =>
        scored.has(JSON.stringify([item.namespace, item.key])),
      );
      found.push(...unscored.slice(0, wanted - found.length));
    }
    return found.slice(offset, wanted);
  }

  /** Items newest first, those `skip` names left out. */
  private async recentItems(
    { namespacePrefix, filter, limit = 10, offset = 0 }: Omit<SearchOperation, 'query'>,
    skip: (item: SearchItem) => boolean = () => false,
  ): Promise<SearchItem[]> {
    const wanted = offset + limit;
    const found: SearchItem[] = [];
    let cursor: string | undefined;
    do {
      const request = {
        namespacePrefix: this.idsOf(namespacePrefix),
        ...(filter && Object.keys(filter).length > 0 ? { filter: filter as MemorySearchRequest['filter'] } : {}),
        limit: Math.min(Math.max(wanted - found.length, 1), MAX_PAGE),
        ...(cursor ? { cursor } : {}),
        ...(this.refreshesEmbedded() ? { includeEmbedding: true } : {}),
      };
      const body = await this.client.memoryItems.search(request);
      await this.refresh(body.items);
      for (const item of body.items) {
        const entry = { ...this.itemOf(item), score: undefined };
        if (!skip(entry)) found.push(entry);
      }
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

  /**
   * Starts the TTL of each read item that has one again (`refreshOnRead`): agentstate has no
   * write that moves only an expiry, so the item is put again as it is (its value, its
   * embedding, its TTL: `expiresAt - updatedAt` of its last put), on the version just read.
   * That is a new version of the item and a `memory.changed` event (what the read returns keeps
   * the `updatedAt` it read, as LangGraph's stores do); a put that came in between (`412`) set
   * an expiry of its own and is left alone.
   */
  private async refresh(items: readonly MemoryItem[]): Promise<void> {
    if (!this.refreshOnRead) return;
    await Promise.all(
      items.map(async (item) => {
        if (item.expiresAt === undefined) return;
        // agentstate keeps an expiry in whole seconds (the put's second plus its TTL): round up.
        const ttlSeconds = Math.ceil((Date.parse(item.expiresAt) - Date.parse(item.updatedAt)) / 1000);
        const request = { value: item.value, ttlSeconds, ...(item.embedding ? { embedding: item.embedding } : {}) };
        try {
          await this.client.memoryItems.put(item.namespace, item.key, request, { ifMatch: item.version });
        } catch (error) {
          if (!AgentStateError.is(error, 'version_mismatch') && !AgentStateError.is(error, 'not_found')) throw error;
        }
      }),
    );
  }

  /** Whether reads fetch embeddings: a refresh puts an item again, and must not drop its vector. */
  private refreshesEmbedded(): boolean {
    return this.refreshOnRead && this.index !== undefined;
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

/** An embedding from the model, checked against the index's dimensions before it is sent. */
function checkedVector(vector: number[] | undefined, dims: number): number[] {
  if (!Array.isArray(vector) || vector.length !== dims) {
    throw new RangeError(`the embeddings model returned ${vector?.length ?? 'no'} numbers; the index has dims ${dims}`);
  }
  return vector;
}

/** LangGraph's namespace match: labels in order, `*` matching any one label. */
function matches({ matchType, path }: MatchCondition, namespace: readonly string[]): boolean {
  if (path.length > namespace.length) return false;
  const start = matchType === 'prefix' ? 0 : namespace.length - path.length;
  return path.every((label, index) => label === '*' || namespace[start + index] === label);
}
