import type { AllowedAgents } from '../agents/acting-agent.js';
import type { JsonObject } from '../json/json.js';
import { AgentStateError } from '../kernel/errors.js';
import { ID_RULE, isValidId, requireId } from '../kernel/ids.js';
import type { Page } from '../model/model.js';

/**
 * Memory items (API.md section 10): JSON objects an agent accumulates and looks up later,
 * under a namespace path of 1–8 ids, readable from any session of the tenant. This module
 * holds the aggregate's model, its limits, the limited-key rule, and its persistence port;
 * the use cases are in memory-service.ts, the DynamoDB adapter in store/memory/memory-store.ts.
 */

/** A namespace: 1–8 ids, `["users","u1","facts"]` (`users/u1/facts` in a URL). */
export type Namespace = readonly string[];

const MAX_NAMESPACE_DEPTH = 8;
/** The largest value, as encoded UTF-8 JSON: 256 KiB (`413 payload_too_large`). */
export const MEMORY_VALUE_LIMIT_BYTES = 256 * 1024;
/** The longest `ttlSeconds`: ten years. */
export const MAX_TTL_SECONDS = 10 * 365 * 24 * 60 * 60;

/** An item as the API returns it. */
export interface MemoryItem {
  namespace: string[];
  key: string;
  value: JsonObject;
  /** 1, 2, 3, … from when the item was created; a deleted or expired item starts again at 1. */
  version: number;
  createdAt: string;
  updatedAt: string;
  /** When the item expires (it is never returned after), present only for an item put with `ttlSeconds`. */
  expiresAt?: string;
  /** The item's embedding, as stored (32-bit floats), only when asked for (`includeEmbedding`). */
  embedding?: number[];
  /** In a search with `vector`: the cosine of the item's embedding and the vector. */
  score?: number;
}

/** An item that has an embedding of the dimensions a search asks for, its value not decoded yet. */
export interface VectorCandidate {
  readonly vector: Float32Array;
  /** The short scalar fields of the value, as the memory index keeps them (`MemoryCandidate`). */
  readonly fields: JsonObject;
  readonly partial: boolean;
  /** The item (its value decoded on the first call). */
  item(): MemoryItem;
}

/** An item's entry in its namespace's embedding pages: the code a search estimates its cosine from. */
export interface CodedEntry {
  readonly namespace: Namespace;
  readonly key: string;
  readonly code: Uint8Array;
}

/** Which item a request addresses; the tenant always comes from the API key. */
export interface MemoryAddress {
  readonly tenant: string;
  readonly namespace: Namespace;
  readonly key: string;
}

/** The condition a put or delete is made under (`If-Match`, `If-None-Match: *`). */
export type MemoryPrecondition =
  | { readonly kind: 'none' }
  /** `If-Match: "7"` (or `"7", "8"`): the live item is at one of these versions. */
  | { readonly kind: 'version'; readonly versions: readonly number[] }
  /** `If-Match: *`: a live item exists. */
  | { readonly kind: 'exists' }
  /** `If-None-Match: *`: no live item exists (a deleted or expired one counts as none). */
  | { readonly kind: 'absent' };

export interface MemoryWrite {
  readonly value: JsonObject;
  /**
   * Seconds from the put until the item expires; absent: never. The store counts them from the
   * same instant it stamps `updatedAt` with, so `expiresAt - updatedAt` is the TTL to the second.
   */
  readonly ttlSeconds?: number;
  /** The acting agent (`X-Agent-Id`): the change event's `author`. */
  readonly author: string | null;
  readonly condition: MemoryPrecondition;
  /** The caller's embedding of the item (memory-vector.ts); absent: the item has none. */
  readonly embedding?: readonly number[];
}

/** What a put came to: the item after it, or the precondition that failed with the current version (0: none). */
export type MemoryPutResult =
  | { readonly outcome: 'written'; readonly item: MemoryItem; readonly created: boolean }
  | { readonly outcome: 'precondition_failed'; readonly currentVersion: number }
  /** The namespace's embeddings have other dimensions; nothing was written. */
  | { readonly outcome: 'dimensions_mismatch'; readonly dimensions: number };

export type MemoryDeleteResult =
  | { readonly outcome: 'deleted' }
  | { readonly outcome: 'absent' }
  | { readonly outcome: 'precondition_failed'; readonly currentVersion: number };

/**
 * The namespaces a caller may touch, as path prefixes: `null` for every namespace of the
 * tenant; for a key limited to agents, `agents/<agent>` of each of its agents and `shared`.
 */
export type NamespaceRoots = ReadonlyArray<Namespace> | null;

/** One index entry a search reads before it fetches anything: enough to decide on most filters. */
export interface MemoryCandidate {
  namespace: string[];
  key: string;
  /** The short scalar top-level fields of the value (`fields` of a filter decides on these first). */
  fields: JsonObject;
  /** Whether the value has top-level fields that `fields` leaves out (long strings, objects, arrays). */
  partial: boolean;
  /** Epoch seconds, when the item expires. */
  expiresAt?: number;
  /** The value's encoded size, so that a page stays within what a response may carry. */
  valueBytes: number;
}

/**
 * A search's walk through the index, newest first over every namespace it covers. The store
 * reads the index a page at a time as the walk goes; `position()` is a cursor that resumes
 * right after the last entry `next()` gave.
 */
export interface MemoryWalk {
  /** The next entry without taking it (null at the end). */
  peek(): Promise<MemoryCandidate | null>;
  /** Takes the next entry (null at the end). */
  next(): Promise<MemoryCandidate | null>;
  /** Whether the walk may give more: false only when every namespace is known to be exhausted. */
  mayHaveMore(): boolean;
  position(): string;
}

/** Whether a read returns the items' embeddings (`includeEmbedding`). */
export interface EmbeddingOption {
  withEmbedding?: boolean;
}

export interface MemoryStore {
  get(address: MemoryAddress, options?: EmbeddingOption): Promise<MemoryItem | null>;
  /** The live items among `items` (one request per 100), in no particular order. */
  getMany(tenant: string, items: ReadonlyArray<{ namespace: Namespace; key: string }>, options?: EmbeddingOption): Promise<MemoryItem[]>;
  put(address: MemoryAddress, write: MemoryWrite): Promise<MemoryPutResult>;
  delete(address: MemoryAddress, condition: MemoryPrecondition, author: string | null): Promise<MemoryDeleteResult>;
  /**
   * The namespaces that hold items under any of `prefixes` (which never overlap), in path
   * order; with `maxDepth`, each cut to that many ids and given once.
   */
  listNamespaces(
    tenant: string,
    options: { prefixes: ReadonlyArray<Namespace>; maxDepth?: number; limit: number; cursor?: string },
  ): Promise<Page<string[]>>;
  /** Up to `max` namespaces that hold items under any of `prefixes`. */
  namespacesWithin(tenant: string, prefixes: ReadonlyArray<Namespace>, max: number): Promise<string[][]>;
  /**
   * Walks the items of `namespaces`, newest first, from `cursor` on. A cursor is valid only for
   * a walk with the same `binding` (the search's prefix and filter); another is `400`.
   */
  walk(tenant: string, namespaces: ReadonlyArray<Namespace>, options: { cursor?: string; pageSize: number; binding: string }): MemoryWalk;
  /**
   * The code (memory-vector.ts `embeddingCode`) of every embedding kept in the pages of
   * `namespaces`, handed to `visit` as it is read, consistently (a put's code is there as soon
   * as the put answered). A code may be left over from an item since deleted or changed: the
   * search checks what it ranks against the item. Answers the namespaces whose pages could not
   * hold every code, which `scanEmbeddings` searches instead.
   */
  scanCodes(
    tenant: string,
    namespaces: ReadonlyArray<Namespace>,
    dimensions: number,
    visit: (entry: CodedEntry) => void,
  ): Promise<Namespace[]>;
  /**
   * Every live item of `namespaces` with an embedding of `dimensions` numbers, handed to
   * `visit` as it is read, read consistently (a put is seen as soon as it answered).
   */
  scanEmbeddings(
    tenant: string,
    namespaces: ReadonlyArray<Namespace>,
    dimensions: number,
    visit: (candidate: VectorCandidate) => void,
  ): Promise<void>;
  /** The live item's versions, newest first: `item` itself, then the versions it replaced. */
  history(tenant: string, item: MemoryItem, options: { limit: number; cursor?: string }): Promise<Page<MemoryItem>>;
}

/** `users/u1/facts` or `["users","u1","facts"]` as a checked namespace (`400 invalid_id` / `invalid_request`). */
export function requireNamespace(segments: readonly unknown[], field: string, options: { minDepth?: number } = {}): string[] {
  const minDepth = options.minDepth ?? 1;
  if (segments.length < minDepth || segments.length > MAX_NAMESPACE_DEPTH) {
    throw new AgentStateError(
      'invalid_request',
      `${field} must have ${minDepth === 0 ? 'at most' : `1 to`} ${MAX_NAMESPACE_DEPTH} ids; it has ${segments.length}`,
      { field, maxDepth: MAX_NAMESPACE_DEPTH },
    );
  }
  return segments.map((segment, index) => {
    if (!isValidId(segment)) {
      throw new AgentStateError('invalid_id', `${field}[${index}] must be ${ID_RULE}`, { field });
    }
    return segment;
  });
}

/** Whether `value` is a namespace as a body names it: an array of 1–8 ids. */
export function isNamespacePath(value: unknown): value is string[] {
  return Array.isArray(value) && value.length >= 1 && value.length <= MAX_NAMESPACE_DEPTH && value.every(isValidId);
}

/** An item's key: an id (`400 invalid_id`). */
export function requireMemoryKey(value: unknown): string {
  return requireId(value, 'key');
}

/**
 * The limited-key rule of API.md section 10: a key limited to agents touches only namespaces
 * that begin with `agents/<one of its agents>` or `shared`. Every other key touches them all.
 */
export function namespaceRoots(allowed: AllowedAgents): NamespaceRoots {
  if (!allowed) return null;
  return [...allowed.map((agentId) => ['agents', agentId]), ['shared']];
}

/** Whether `namespace` is inside one of `roots` (null: every namespace). */
export function withinRoots(namespace: Namespace, roots: NamespaceRoots): boolean {
  return roots === null || roots.some((root) => startsWith(namespace, root));
}

/** Whether `namespace` begins with every id of `prefix`, id by id (`users/u1` does not begin `users/u10`). */
function startsWith(namespace: Namespace, prefix: Namespace): boolean {
  return prefix.length <= namespace.length && prefix.every((segment, index) => namespace[index] === segment);
}

/**
 * The prefixes a listing or search under `prefix` may read, given `roots`: `[prefix]` when it
 * lies inside a root, the roots that lie under it otherwise, nothing when it meets none.
 * They never overlap, and come in path order.
 */
export function readablePrefixes(prefix: Namespace, roots: NamespaceRoots): Namespace[] {
  if (roots === null || withinRoots(prefix, roots)) return [prefix];
  return roots
    .filter((root) => startsWith(root, prefix))
    .map((root) => [...root])
    .sort((a, b) => (pathKey(a) < pathKey(b) ? -1 : 1));
}

/**
 * A namespace as the text that orders namespaces: its ids joined by `/`, with a trailing `/`,
 * so that a namespace sorts right before everything under it and `users/u1/` never begins
 * `users/u10/`. The store keeps its namespace list in this order.
 */
export function pathKey(namespace: Namespace): string {
  return namespace.length === 0 ? '' : `${namespace.join('/')}/`;
}
