import { decodeStoredJson, encodeStoredJson, type Json } from '../../core/json/json.js';
import type { RecordedChange, VersionRecord } from '../../core/model/model.js';
import { parseJsonText } from '../table/item-codecs.js';
import type { Item } from '../table/table-client.js';
import {
  type BaseText,
  baseTextOf,
  decodeText,
  decodeTextBytes,
  type EncodedState,
  encodeText,
  pieceKeysOf,
  readKeysOf,
  textBytesOf,
} from './state-codec.js';

// The JSON texts of a version (log-items.ts has the rest of a version's change). Imported as a
// namespace (item-codecs.ts): `versionItem.encodeTexts`.

/**
 * A version about to be written: its record, and its state and commands as the state codec
 * keeps them (inline, or pieces to put before the version item).
 */
export interface EncodedVersion {
  readonly record: VersionRecord;
  readonly state: EncodedState;
  readonly commands: EncodedState | null;
  /** The version's change, kept (inline) only when its state or the one before is in pieces. */
  readonly change: EncodedState | null;
}

/** The JSON texts of a version item, each kept by the state codec under its own name. */
const TEXTS = { state: 'state', commands: 'commands', change: 'change' } as const;

/**
 * The most of a change a version item keeps (JSON text): what an event carries at most
 * (API.md section 9, 64 KiB), and it must stay inline in the item.
 */
const CHANGE_LIMIT_BYTES = 64 * 1024;

/**
 * The change of a version whose state, or the one before it, is kept in pieces: its change
 * event carries it instead of the states. When both forms do not fit, the one that fits is
 * kept (an append's merge patch resends the whole array; its JSON Patch does not).
 */
async function encodeChange(record: VersionRecord, state: EncodedState): Promise<EncodedState | null> {
  if (!state.large && record.base === undefined) return null;
  const change = record.change ?? (record.workOutChange ? await record.workOutChange() : {});
  const candidates: RecordedChange[] = [
    change,
    ...(change.jsonPatch === undefined ? [] : [{ jsonPatch: change.jsonPatch }]),
    ...(change.patch === undefined ? [] : [{ patch: change.patch }]),
  ];
  for (const candidate of candidates) {
    const text = encodeStoredJson(candidate);
    if (Buffer.byteLength(text, 'utf8') > CHANGE_LIMIT_BYTES) continue;
    const encoded = encodeText(TEXTS.change, text);
    if (!encoded.large) return encoded;
  }
  // Still recorded, empty: the event says the states are large and carries no change.
  return encodeText(TEXTS.change, '{}');
}

/** A version's state and commands as the state codec keeps them (the pieces are not written here). */
export async function encodeTexts(record: VersionRecord): Promise<EncodedVersion> {
  // `base` is what this store's own decode put in `stored` (the core only passes it on).
  const state = encodeText(TEXTS.state, encodeStoredJson(record.state), (record.base as BaseText | undefined) ?? null);
  return {
    record,
    state,
    commands: record.commands ? encodeText(TEXTS.commands, encodeStoredJson(record.commands)) : null,
    change: await encodeChange(record, state),
  };
}

/** The attributes the texts of `encoded` occupy on the version's item. */
export const textAttributes = (encoded: EncodedVersion): Item => ({
  ...encoded.state.attributes,
  ...(encoded.commands ? encoded.commands.attributes : {}),
  ...(encoded.change ? encoded.change.attributes : {}),
});

/** The names of every attribute a version's state may occupy (for projections). */
export const stateAttributes = [
  TEXTS.state,
  `${TEXTS.state}Z`,
  `${TEXTS.state}P`,
  `${TEXTS.state}N`,
  `${TEXTS.state}S`,
  `${TEXTS.state}K`,
] as const;

/**
 * Every attribute that holds a version's content (its state, commands, change and agent config):
 * what pruning removes (store/log/history-prune.ts), leaving the item's place, its numbers and
 * the messages of a decision.
 */
export const contentAttributes = [
  ...Object.values(TEXTS).flatMap((text) => [text, `${text}Z`, `${text}P`, `${text}N`, `${text}S`, `${text}K`]),
  'agent',
] as const;

/** Whether a version item's content was pruned (history-prune.ts): it reads as `410 version_pruned`. */
export const isPruned = (item: Item): boolean => item[PRUNED_ATTRIBUTE] !== undefined;

/** When retention pruned a version (epoch ms), on its stripped item. */
export const PRUNED_ATTRIBUTE = 'pruned';

/** The sort keys of the pieces a version item's texts are made of (none when inline): what it keeps alive. */
export const pieceKeys = (item: Item): string[] => [...pieceKeysOf(item, TEXTS.state), ...pieceKeysOf(item, TEXTS.commands)];

/** The sort keys a reader of a version item fetches: the pieces, and the versions its state's splices are on. */
export const readKeys = (item: Item): string[] => [...readKeysOf(item, TEXTS.state), ...readKeysOf(item, TEXTS.commands)];

/**
 * The state of a version item, and what a version computed from it needs to know of it
 * (`stored`: null when it is inline).
 */
export function decodeStateAndBase(item: Item, pieces: ReadonlyMap<string, Item>): { state: Json; stored: BaseText | null } {
  const text = decodeTextBytes(item, TEXTS.state, pieces);
  return { state: parseJsonText(text?.toString('utf8')), stored: baseTextOf(item, TEXTS.state, text) };
}

/** The state of a version item (read whole, or projected to its state attributes). */
export const decodeState = (item: Item, pieces: ReadonlyMap<string, Item>): Json => parseJsonText(decodeText(item, TEXTS.state, pieces));

/** The commands of a version item (a commit's), or null. */
export function decodeCommands(item: Item, pieces: ReadonlyMap<string, Item>): Json[] | null {
  const text = decodeText(item, TEXTS.commands, pieces);
  return text === null ? null : (decodeStoredJson(text) as Json[]);
}

/** Bytes of the JSON text of a version item's state, read or not. */
export const stateBytes = (item: Item): number => textBytesOf(item, TEXTS.state);

/** What a version's record takes of an answer besides its state and agent config: its other fields, as JSON. */
const RECORD_FIELDS_BYTES = 512;

/** About the bytes of a version item as an answer lists it (state, agent config, other fields), read or not. */
export function listedBytes(item: Item): number {
  const agent = typeof item.agent === 'string' ? Buffer.byteLength(item.agent, 'utf8') : 4;
  return stateBytes(item) + agent + RECORD_FIELDS_BYTES;
}

/**
 * What a version item says of its state without reading it: its text's bytes, and the pieces it
 * is made of (its checkpoint's: none when inline). A copy counts what it must put from these.
 */
export function storedState(item: Item): { bytes: number; pieces: string[] } {
  return { bytes: stateBytes(item), pieces: pieceKeysOf(item, TEXTS.state) };
}

/** The change a version item keeps when its state, or the one before it, is in pieces (else null). */
export function decodeChange(item: Item): RecordedChange | null {
  const change = decodeText(item, TEXTS.change);
  return change === null ? null : (decodeStoredJson(change) as unknown as RecordedChange);
}
