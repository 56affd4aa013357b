import { decodeStoredJson, encodeStoredJson, type Json } from '../core/json.js';
import type { SessionScope } from '../core/model.js';
import type { Item } from './table-client.js';

/**
 * How a version item holds its state: the one seam between the session layout (which item a
 * version is, where it sits in the log, what else it carries) and the state payload (how a
 * state is laid out: inline JSON text today; compressed text or content-addressed pieces for
 * large states, issue 19). The version codec (item-codecs.ts) asks this module for the
 * attributes that store a state and for the items to write before the version; the stores ask
 * it what a read must fetch to rebuild a state, and hand it what they fetched.
 *
 *   write:  encodeState(scope, state) → { attributes, pieces }
 *           pieces are put first (any order, idempotently); then the one conditional write of
 *           the version item, which carries `attributes`. A write that loses its race leaves
 *           pieces nothing refers to, never a visible change.
 *   read:   stateReferences(item) → keys to fetch (none when the state is inline)
 *           decodeState(item, fetched) → the state
 *
 * Nothing outside this module reads or writes the attributes it names.
 */

/** What a state becomes on a version item. */
export interface EncodedState {
  /** Attributes of the version item that hold (or refer to) the state. */
  readonly attributes: Item;
  /** Items to write before the version item; empty when the state is inline. */
  readonly pieces: readonly Item[];
}

/** The version-item attributes a state may occupy, so that reads which need no state can leave them out. */
export const STATE_ATTRIBUTES: readonly string[] = ['state'];

/** The attributes (and any pieces) that hold `state` in a version item of `scope`. */
export function encodeState(_scope: SessionScope, state: Json): EncodedState {
  return { attributes: { state: encodeStoredJson(state) }, pieces: [] };
}

/** Keys of the items a read must fetch to rebuild the state of `item`; none when it is inline. */
export function stateReferences(_item: Item): Item[] {
  return [];
}

/**
 * The state a version item holds, from its own attributes and the items `stateReferences`
 * named (keyed by `pieceId`). An item without a state attribute (a read that left it out)
 * holds null.
 */
export function decodeState(item: Item, _fetched: ReadonlyMap<string, Item> = new Map()): Json {
  // Numbers verbatim, as every JSON text of the table (core/json.ts).
  return typeof item.state === 'string' ? decodeStoredJson(item.state) : null;
}

/** The key of a fetched piece in the map `decodeState` takes. */
export function pieceId(item: Item): string {
  return `${String(item.pk)}\u0000${String(item.sk)}`;
}
