import { decodeStoredJson, encodeStoredJson, type JsonObject } from '../../core/json/json.js';
import type { MemoryCandidate, MemoryItem, Namespace } from '../../core/memory/memory.js';
import { pathKey } from '../../core/memory/memory.js';
import { indexedFields } from '../../core/memory/memory-filter.js';
import { MEMORY_ITEM_KIND } from '../table/item-kinds.js';
import * as keys from '../table/keys.js';
import { tableKeys } from '../table/table.js';
import type { Item } from '../table/table-client.js';

/**
 * The memory items' codecs (keys.ts has the key shapes, memory-store.ts the conditions):
 *
 *   M#<tenant>#<path>   K#<key>     kind mem: value (JSON text, verbatim), version, createdAt,
 *                                   updatedAt, author, expiresAt? (TTL), and for the memory
 *                                   index mu (<updatedAt>#<key>), mf (the short scalar fields
 *                                   as JSON text), mp (true: mf leaves fields out), vs (value bytes)
 *                                   kind mem:deleted: a delete's tombstone (deletedAt, author)
 *   MN#<tenant>         <path>/     a namespace that holds items (kept by the change hook)
 *   MH#<tenant>#<path>#<key>   <createdAt>#<0…42>   a replaced version (kept by the change hook)
 */

/** The tenant and namespace of a memory item's partition key, or null when it is not one. */
export function namespaceOfPartition(pk: unknown): { tenant: string; namespace: string[] } | null {
  const match = /^M#([^#]+)#([^#]+)$/.exec(String(pk ?? ''));
  return match ? { tenant: match[1] as string, namespace: (match[2] as string).split('/') } : null;
}

function keyOfSort(sk: unknown): string {
  return String(sk ?? '').slice(keys.memoryKeyPrefix.length);
}

function parseJsonText(value: unknown): JsonObject | null {
  return typeof value === 'string' ? (decodeStoredJson(value) as JsonObject) : null;
}

function optionalNumber(value: unknown): number | undefined {
  return typeof value === 'number' ? value : undefined;
}

/** Epoch seconds as the ISO time the API shows. */
function isoFromSeconds(seconds: number): string {
  return new Date(seconds * 1000).toISOString();
}

/**
 * An embedding as the item keeps it (`ve`): its numbers as 32-bit floats in the platform's byte
 * order (little-endian on every platform Lambda and Node run on), 4 bytes each, where JSON text
 * takes some 20. Read back through a copy, so the floats start 4-byte aligned.
 */
export function embeddingBytes(vector: readonly number[]): Uint8Array {
  return new Uint8Array(Float32Array.from(vector).buffer);
}

export function floatsOf(bytes: Uint8Array): Float32Array {
  return new Float32Array(bytes.slice().buffer);
}

export const memoryItem = {
  key: (tenant: string, namespace: Namespace, key: string): Item => ({
    pk: keys.memoryNamespace(tenant, namespace),
    sk: keys.memoryKey(key),
  }),

  /** The attributes a put sets (besides version and createdAt, which the write's expression decides); `ve`: the embedding's bytes (memory-vectors.ts). */
  attributes(value: JsonObject, updatedAt: string, key: string, author: string | null, embedding?: Uint8Array): Item {
    const { fields, partial } = indexedFields(value);
    const text = encodeStoredJson(value);
    return {
      kind: MEMORY_ITEM_KIND.item,
      value: text,
      updatedAt,
      author: author ?? undefined,
      mu: keys.memoryRecency(updatedAt, key),
      mf: encodeStoredJson(fields),
      mp: partial ? true : undefined,
      vs: Buffer.byteLength(text, 'utf8'),
      ve: embedding,
    };
  },

  /** Whether an item is live at `nowSeconds`: an item (not a tombstone) whose expiry, if any, is still ahead. */
  isLive(item: Item | undefined, nowSeconds: number): item is Item {
    if (item?.kind !== MEMORY_ITEM_KIND.item) return false;
    const expiresAt = item[tableKeys.timeToLive];
    return typeof expiresAt !== 'number' || expiresAt > nowSeconds;
  },

  /** The item as the API shows it; its embedding only `withEmbedding` (as the numbers its 32-bit floats are). */
  decode(item: Item, options: { withEmbedding?: boolean } = {}): MemoryItem {
    const place = namespaceOfPartition(item.pk);
    const expiresAt = optionalNumber(item[tableKeys.timeToLive]);
    const embedding = options.withEmbedding && item.ve instanceof Uint8Array ? { embedding: Array.from(floatsOf(item.ve)) } : {};
    return {
      namespace: place?.namespace ?? [],
      key: keyOfSort(item.sk),
      value: parseJsonText(item.value) as JsonObject,
      version: Number(item.version),
      createdAt: String(item.createdAt),
      updatedAt: String(item.updatedAt),
      ...(expiresAt === undefined ? {} : { expiresAt: isoFromSeconds(expiresAt) }),
      ...embedding,
    };
  },

  /** An entry of the memory index: what a search decides on before it fetches the value. */
  candidate(entry: Item): MemoryCandidate {
    const expiresAt = optionalNumber(entry[tableKeys.timeToLive]);
    return {
      namespace: namespaceOfPartition(entry.pk)?.namespace ?? [],
      key: keyOfSort(entry.sk),
      fields: (parseJsonText(entry.mf) ?? {}) as JsonObject,
      partial: entry.mp === true,
      valueBytes: Number(entry.vs ?? 0),
      ...(expiresAt === undefined ? {} : { expiresAt }),
    };
  },
};

/**
 * The attribute of a namespace's entry that counts the items created in it, each put that
 * created one adding to it after writing the item (namespace-entries.ts says what for).
 */
export const NAMESPACE_CREATIONS = 'creations';

export const namespaceEntry = {
  key: (tenant: string, namespace: Namespace): Item => ({ pk: keys.memoryNamespaces(tenant), sk: pathKey(namespace) }),
  /** The namespace an entry's sort key names (`users/u1/facts/` → its ids). */
  namespaceOf: (item: Item): string[] => String(item.sk).replace(/\/$/, '').split('/'),
};

export const historyItem = {
  partition: (tenant: string, namespace: Namespace, key: string) => keys.memoryHistory(tenant, namespace, key),

  key: (tenant: string, item: Pick<MemoryItem, 'namespace' | 'key' | 'createdAt' | 'version'>): Item => ({
    pk: keys.memoryHistory(tenant, item.namespace, item.key),
    sk: keys.memoryHistoryVersion(item.createdAt, item.version),
  }),

  encode(tenant: string, item: MemoryItem, expiresAt: number): Item {
    return {
      ...historyItem.key(tenant, item),
      value: encodeStoredJson(item.value),
      version: item.version,
      createdAt: item.createdAt,
      updatedAt: item.updatedAt,
      itemExpiresAt: item.expiresAt,
      [tableKeys.timeToLive]: expiresAt,
    };
  },

  decode(namespace: Namespace, key: string, item: Item): MemoryItem {
    return {
      namespace: [...namespace],
      key,
      value: parseJsonText(item.value) as JsonObject,
      version: Number(item.version),
      createdAt: String(item.createdAt),
      updatedAt: String(item.updatedAt),
      ...(typeof item.itemExpiresAt === 'string' ? { expiresAt: item.itemExpiresAt } : {}),
    };
  },
};
