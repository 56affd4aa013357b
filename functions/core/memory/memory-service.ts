import { createHash } from 'node:crypto';
import { canonicalJson, encodedSize, isJsonObject, type Json } from '../json/json.js';
import { AgentStateError } from '../kernel/errors.js';
import type { Page } from '../model/model.js';
import {
  type EmbeddingOption,
  MAX_TTL_SECONDS,
  MEMORY_VALUE_LIMIT_BYTES,
  type MemoryCandidate,
  type MemoryItem,
  type MemoryPrecondition,
  type MemoryStore,
  type MemoryWalk,
  type Namespace,
  type NamespaceRoots,
  readablePrefixes,
  withinRoots,
} from './memory.js';
import { decideOnFields, type MemoryFilter, matchesMemoryFilter, parseFilter } from './memory-filter.js';
import { QueryVector, requireEmbedding, TopScores } from './memory-vector.js';

/**
 * The memory routes' use cases (API.md section 10). Every call names the caller's `roots`
 * (memory.ts `namespaceRoots`): outside them an item reads as absent and a write is
 * `403 forbidden`, so a key limited to one agent never learns what another agent keeps.
 */

/** Namespaces one search may span; a wider prefix is refused rather than read namespace by namespace. */
const MAX_SEARCH_NAMESPACES = 100;
/** Values one search page carries at most, so that the answer fits a Lambda response (6 MB). */
const SEARCH_PAGE_BYTES = 4 * 1024 * 1024;
/** Items a ranked search fetches at a time: one `BatchGetItem`. */
const RANKED_FETCH = 100;
/** Index entries and fetched values one search call reads at most before it answers with a cursor. */
const MAX_EXAMINED = 10_000;
const MAX_FETCHED = 1_000;
/** Index entries a filtered search reads a request; small entries, so a page is some 150 KB. */
const FILTERED_PAGE = 1_000;

export interface MemoryPutRequest {
  value: Json;
  ttlSeconds?: number;
  /** The caller's embedding of the item (memory-vector.ts). */
  embedding?: Json;
}

export interface MemorySearchRequest {
  namespacePrefix: Namespace;
  filter?: Json;
  limit: number;
  cursor?: string;
  /** Ranks by cosine similarity to this vector instead of by recency (memory-vector.ts). */
  vector?: Json;
  includeEmbedding?: boolean;
}

export class MemoryService {
  constructor(
    private readonly store: MemoryStore,
    private readonly now: () => number = Date.now,
  ) {}

  async get(tenant: string, roots: NamespaceRoots, namespace: Namespace, key: string, options: EmbeddingOption = {}): Promise<MemoryItem> {
    const item = withinRoots(namespace, roots) ? await this.store.get({ tenant, namespace, key }, options) : null;
    if (!item) throw notFound(namespace, key);
    return item;
  }

  async put(
    tenant: string,
    roots: NamespaceRoots,
    target: { namespace: Namespace; key: string },
    request: MemoryPutRequest,
    options: { condition: MemoryPrecondition; author: string | null },
  ): Promise<{ item: MemoryItem; created: boolean }> {
    requireWritable(target.namespace, roots);
    const value = request.value;
    if (!isJsonObject(value)) {
      throw new AgentStateError('invalid_request', 'value must be a JSON object', { field: 'value' });
    }
    const sizeBytes = encodedSize(value);
    if (sizeBytes > MEMORY_VALUE_LIMIT_BYTES) {
      throw new AgentStateError(
        'payload_too_large',
        `the value is ${sizeBytes} bytes; the value limit is ${MEMORY_VALUE_LIMIT_BYTES} bytes`,
        {
          limitBytes: MEMORY_VALUE_LIMIT_BYTES,
          sizeBytes,
        },
      );
    }
    const ttl = request.ttlSeconds;
    if (ttl !== undefined && (!Number.isSafeInteger(ttl) || ttl < 1 || ttl > MAX_TTL_SECONDS)) {
      throw new AgentStateError('invalid_request', `ttlSeconds must be an integer from 1 to ${MAX_TTL_SECONDS}`, { field: 'ttlSeconds' });
    }
    const embedding = request.embedding === undefined ? undefined : requireEmbedding(request.embedding, 'embedding');
    const result = await this.store.put(
      { tenant, ...target },
      {
        value,
        author: options.author,
        condition: options.condition,
        ...(ttl === undefined ? {} : { ttlSeconds: ttl }),
        ...(embedding === undefined ? {} : { embedding }),
      },
    );
    if (result.outcome === 'precondition_failed') throw versionMismatch(options.condition, result.currentVersion);
    if (result.outcome === 'dimensions_mismatch') {
      throw new AgentStateError(
        'invalid_request',
        `the embeddings of namespace ${target.namespace.join('/')} have ${result.dimensions} numbers; this one has ${embedding?.length}`,
        { field: 'embedding', dimensions: result.dimensions },
      );
    }
    return { item: result.item, created: result.created };
  }

  async delete(
    tenant: string,
    roots: NamespaceRoots,
    target: { namespace: Namespace; key: string },
    options: { condition: MemoryPrecondition; author: string | null },
  ): Promise<void> {
    requireWritable(target.namespace, roots);
    const result = await this.store.delete({ tenant, ...target }, options.condition, options.author);
    if (result.outcome === 'precondition_failed') throw versionMismatch(options.condition, result.currentVersion);
  }

  /** The namespaces under `prefix` the caller may read, in path order; with `maxDepth`, cut to it. */
  async listNamespaces(
    tenant: string,
    roots: NamespaceRoots,
    options: { prefix: Namespace; maxDepth?: number; limit: number; cursor?: string },
  ): Promise<Page<string[]>> {
    if (options.maxDepth !== undefined && options.maxDepth < options.prefix.length) {
      throw new AgentStateError('invalid_request', `maxDepth must be at least the depth of the prefix (${options.prefix.length})`, {
        field: 'maxDepth',
      });
    }
    const prefixes = readablePrefixes(options.prefix, roots);
    if (prefixes.length === 0) return { items: [] };
    return this.store.listNamespaces(tenant, { ...options, prefixes });
  }

  /**
   * Items under a namespace prefix that match `filter`, newest first. The index carries each
   * item's short fields, so most filters are decided there; values are fetched only for the
   * items that match (or that the short fields cannot decide on). A page holds at most
   * `limit` items and 4 MiB of values, and may hold fewer (a call reads at most 10,000 index
   * entries): follow `next` until it is absent.
   */
  async search(tenant: string, roots: NamespaceRoots, request: MemorySearchRequest): Promise<Page<MemoryItem>> {
    const filter = parseFilter(request.filter);
    const vector = request.vector === undefined ? undefined : new QueryVector(requireEmbedding(request.vector, 'vector'));
    if (vector && request.cursor !== undefined) {
      throw new AgentStateError('invalid_request', 'a search with vector answers its best `limit` items in one page: it takes no cursor', {
        field: 'cursor',
      });
    }
    const prefixes = readablePrefixes(request.namespacePrefix, roots);
    const namespaces = prefixes.length === 0 ? [] : await this.store.namespacesWithin(tenant, prefixes, MAX_SEARCH_NAMESPACES + 1);
    if (namespaces.length > MAX_SEARCH_NAMESPACES) {
      throw new AgentStateError(
        'invalid_request',
        `namespacePrefix covers more than ${MAX_SEARCH_NAMESPACES} namespaces; search a narrower prefix`,
        { field: 'namespacePrefix', maxNamespaces: MAX_SEARCH_NAMESPACES },
      );
    }
    if (vector) return this.ranked(tenant, namespaces, vector, filter, request);
    // Made even over no namespace: it checks the cursor.
    const walk = this.store.walk(tenant, namespaces, {
      pageSize: filter.length > 0 ? FILTERED_PAGE : request.limit + 1,
      binding: searchBinding(request.namespacePrefix, request.filter),
      ...(request.cursor === undefined ? {} : { cursor: request.cursor }),
    });
    const page = await this.collect(tenant, walk, filter, request.limit, { withEmbedding: request.includeEmbedding === true });
    return page;
  }

  /**
   * The items of `namespaces` that pass `filter` and have an embedding of the vector's
   * dimensions, ranked by cosine similarity, highest first: every such item is scored (exact,
   * no approximate index), its value decoded only when the filter needs it. At most `limit`
   * items and 4 MiB of values; no cursor.
   */
  /**
   * The best `limit` items by cosine, exactly. The codes in the namespaces' pages give each
   * item an estimate and a bound (`QueryVector.estimate`); the items are then fetched, with
   * their embeddings, in the order of the highest cosine each may have, scored exactly and
   * filtered on their values, until the best kept is at least what the next could reach. An
   * item never fetched could not have been among the best. A code left over from an item
   * deleted or changed costs a fetch, never a wrong answer, as the item itself is scored.
   */
  private async ranked(
    tenant: string,
    namespaces: ReadonlyArray<Namespace>,
    vector: QueryVector,
    filter: MemoryFilter,
    request: MemorySearchRequest,
  ): Promise<Page<MemoryItem>> {
    const best = new TopScores<{ item: MemoryItem; vector: Float32Array }>(request.limit);
    let estimates: Array<{ namespace: Namespace; key: string; highest: number; lowest: number }> = [];
    const unpaged = await this.store.scanCodes(tenant, namespaces, vector.dimensions, (entry) => {
      const estimate = vector.estimate(entry.code);
      if (estimate === null) return;
      estimates.push({
        namespace: entry.namespace,
        key: entry.key,
        highest: estimate.score + estimate.bound,
        lowest: estimate.score - estimate.bound,
      });
    });
    if (unpaged.length > 0) {
      // Their items are read whole instead; the codes their pages did hold are left out.
      const whole = new Set(unpaged.map((namespace) => namespace.join('/')));
      estimates = estimates.filter((entry) => !whole.has(entry.namespace.join('/')));
      await this.store.scanEmbeddings(tenant, unpaged, vector.dimensions, (candidate) => {
        const verdict = filter.length === 0 ? true : decideOnFields(filter, candidate.fields, candidate.partial);
        if (verdict === false) return;
        if (verdict === 'unknown' && !matchesMemoryFilter(filter, candidate.item().value)) return;
        best.offer(vector.cosine(candidate.vector), { item: candidate.item(), vector: candidate.vector });
      });
    }
    estimates.sort((a, b) => b.highest - a.highest);
    // The first fetch: every item whose highest reaches the limit-th best lowest (certain to be
    // needed); later ones go on in order while a filter or a left-over code leaves room.
    const surest = estimates.map((entry) => entry.lowest).sort((a, b) => b - a)[request.limit - 1] ?? Number.NEGATIVE_INFINITY;
    let fetch = Math.max(1, estimates.filter((entry) => entry.highest >= surest).length);
    for (let next = 0; next < estimates.length; ) {
      if (best.threshold() >= (estimates[next] as { highest: number }).highest) break;
      const batch = estimates.slice(next, next + Math.min(fetch, RANKED_FETCH));
      next += batch.length;
      fetch = RANKED_FETCH;
      for (const item of await this.store.getMany(tenant, batch, { withEmbedding: true })) {
        if (item.embedding?.length !== vector.dimensions) continue;
        if (filter.length > 0 && !matchesMemoryFilter(filter, item.value)) continue;
        const embedding = Float32Array.from(item.embedding);
        best.offer(vector.cosine(embedding), { item, vector: embedding });
      }
    }
    const items: MemoryItem[] = [];
    let bytes = 0;
    for (const { score, value } of best.best()) {
      const { embedding: _stored, ...item } = value.item;
      bytes += encodedSize(item.value);
      if (items.length > 0 && bytes > SEARCH_PAGE_BYTES) break;
      items.push({ ...item, ...(request.includeEmbedding ? { embedding: Array.from(value.vector) } : {}), score });
    }
    return { items };
  }

  /**
   * The live item's versions, newest first: the current one, then those it replaced (the
   * change hook keeps each replaced version for 30 days, a moment after the write).
   */
  async history(
    tenant: string,
    roots: NamespaceRoots,
    target: { namespace: Namespace; key: string },
    options: { limit: number; cursor?: string },
  ): Promise<Page<MemoryItem>> {
    const item = await this.get(tenant, roots, target.namespace, target.key);
    return this.store.history(tenant, item, options);
  }

  /**
   * Walks the index and keeps what matches, fetching values in batches of at most the items
   * still needed, so the page never overshoots `limit` and the walk's position is exactly
   * where the next page starts.
   */
  private async collect(
    tenant: string,
    walk: MemoryWalk,
    filter: MemoryFilter,
    limit: number,
    options: EmbeddingOption,
  ): Promise<Page<MemoryItem>> {
    const items: MemoryItem[] = [];
    let pending: MemoryCandidate[] = [];
    let bytes = 0;
    let examined = 0;
    let fetched = 0;
    const nowSeconds = Math.floor(this.now() / 1000);
    const flush = async () => {
      if (pending.length === 0) return;
      const found = await this.store.getMany(tenant, pending, options);
      fetched += pending.length;
      const byAddress = new Map(found.map((item) => [addressOf(item.namespace, item.key), item]));
      for (const candidate of pending) {
        const item = byAddress.get(addressOf(candidate.namespace, candidate.key));
        if (item && matchesMemoryFilter(filter, item.value)) items.push(item);
      }
      pending = [];
    };
    while (items.length + pending.length < limit && examined < MAX_EXAMINED && fetched + pending.length < MAX_FETCHED) {
      const candidate = await walk.peek();
      if (!candidate) break;
      if (items.length + pending.length > 0 && bytes + candidate.valueBytes > SEARCH_PAGE_BYTES) break;
      await walk.next();
      examined++;
      if (candidate.expiresAt !== undefined && candidate.expiresAt <= nowSeconds) continue;
      if (decideOnFields(filter, candidate.fields, candidate.partial) === false) continue;
      pending.push(candidate);
      bytes += candidate.valueBytes;
      if (items.length + pending.length >= limit) await flush();
    }
    await flush();
    return walk.mayHaveMore() ? { items, next: walk.position() } : { items };
  }
}

function addressOf(namespace: Namespace, key: string): string {
  return `${namespace.join('/')}#${key}`;
}

/** What a cursor is bound to: the prefix and filter of the search that made it. */
function searchBinding(prefix: Namespace, filter: Json | undefined): string {
  return createHash('sha256')
    .update(canonicalJson([prefix, filter ?? null]))
    .digest('base64url')
    .slice(0, 16);
}

function requireWritable(namespace: Namespace, roots: NamespaceRoots): void {
  if (withinRoots(namespace, roots)) return;
  throw new AgentStateError('forbidden', 'this key may write only namespaces that begin with agents/<one of its agents> or shared', {
    namespace: [...namespace],
  });
}

function notFound(namespace: Namespace, key: string): AgentStateError {
  return new AgentStateError('not_found', `no item ${key} in namespace ${namespace.join('/')}`, { namespace: [...namespace], key });
}

function versionMismatch(condition: MemoryPrecondition, currentVersion: number): AgentStateError {
  const detail =
    condition.kind === 'absent'
      ? 'the item exists (If-None-Match: *)'
      : currentVersion === 0
        ? 'the item does not exist'
        : `the item is at version ${currentVersion}`;
  return new AgentStateError('version_mismatch', detail, { currentVersion });
}
