import { decodeStoredJson, type Json } from '../../core/json/json.js';
import type { Item } from './table-client.js';

/**
 * One codec per item kind: how a record becomes an item and back. The stores write and read
 * items only through these, the stream parser (stream-images.ts) reads documents through the
 * same decoders, and the tests build raw items with them. The changes of a session's log
 * have theirs in log-items.ts, its node index in node-index.ts. Key shapes are in
 * keys.ts, conditions in the store of each item; JSON values (state, config, messages) are
 * stored as JSON text: verbatim, whatever the keys or number sizes, and one attribute.
 *
 * Each kind's codec is a module of its own (session-item.ts, version-item.ts,
 * document-item.ts, decision-item.ts, agent-item.ts, idempotency-item.ts), imported whole as
 * a namespace (`import * as agentItem from '../agents/agent-item.js'`): esbuild then bundles only the
 * functions a function's routes call (decide decodes agents but never encodes one, so it
 * carries no sealing of secrets), which it cannot do for the methods of one object. This
 * module holds what they share.
 */

/** JSON text back to JSON, numbers verbatim (core/json/json.ts); an absent attribute is null. */
export function parseJsonText(value: unknown): Json {
  return typeof value === 'string' ? decodeStoredJson(value) : null;
}

export function stringOrNull(value: unknown): string | null {
  return typeof value === 'string' ? value : null;
}

/** What a sealed secret is bound to: the item that holds it, so it cannot be moved to another. */
export function secretOwner(key: Item): string {
  return `${String(key.pk)}|${String(key.sk)}`;
}
