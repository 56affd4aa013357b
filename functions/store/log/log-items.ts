import { randomBytes } from 'node:crypto';
import { decodeStoredJson, encodeStoredJson, type Json, type JsonObject, stringifyJson } from '../../core/json/json.js';
import { AgentStateError } from '../../core/kernel/errors.js';
import { expiryOf, hasExpired, lifetimeOf, type StoredLifetime } from '../../core/model/lifetime.js';
import { ITEM_LIMIT_BYTES } from '../../core/model/limits.js';
import type { DecisionLease, DecisionSummary, DoneDecision, NodeRecord, SessionScope, Tip, VersionRecord } from '../../core/model/model.js';
import type { KeptAnswer } from '../../core/model/ports.js';
import { emptyTip, rootNode } from '../../core/model/tree.js';
import { decodeLineage, encodeLineage } from '../state/lineage.js';
import type { EncodedVersion } from '../state/version-item.js';
import * as versionItem from '../state/version-item.js';
import { FENCE_COPY_LIFE, FENCE_ERASURE, FENCE_HELD_UNTIL, FENCE_HOLDER, KIND_ATTRIBUTE, LOG_ITEM_KIND } from '../table/item-kinds.js';
import * as keys from '../table/keys.js';
import { type LogPosition, logPositionOf } from '../table/keys.js';
import { tableKeys } from '../table/table.js';
import type { Item } from '../table/table-client.js';
import { keptAttributes } from './kept-answers.js';
import { packText, packTextWith, unpackText, unpackTextWith } from './packed-text.js';
import { compactDecision, decisionOfItem, type StoredDecision } from './stored-decision.js';

export { unpackText };

/**
 * A run of the log a path read spans (paths.ts): [fromBase, fromSeq, bytes of the log before
 * it, toBase, toSeq, bytes of the log through it]. A change keeps the runs of its node's path.
 */
export type Run = readonly [number, number, number, number, number, number];

/**
 * The changes of a session's log (keys.ts: `V#<life>#<base>#<seq>`). Every change — a version,
 * an append, a head switch, a decision's lease or its end, a delete's fence — is one immutable
 * item, put once where the log's next place is, on the condition that the place is free; no
 * item is ever overwritten (but by the delete, which makes each a tombstone, and a follow's
 * mark while it is alone in its life: session-writes.ts, `loneMarkOf`). Each carries
 * forward what the next writer and every reader of the tip needs (`Carried`, attribute `t`):
 * where the head is and what it points at, the lease, the session's agent and user.
 *
 *   kind v  a version: version, node, prevVersion, cause, author, decisionId, createdAt,
 *           state (state-codec.ts), agent, lineage, commands; a decision's also its messages
 *   kind a  new message nodes (an append; a decision that changed no state)
 *   kind m  a head switch
 *   kind f  a WebSocket client followed the session: only what it carries (`f`, until when)
 *   kind l  a decision took the lease; kind r: it ended it with nothing else to record
 *   kind x  a delete's fence (`fence`: closing, closed), or a change the delete erased
 *
 * A change that makes message nodes holds their messages (`nodes`, compressed JSON text) and
 * where they hang (`chain`): the parent's place, the first node's depth, the version the nodes
 * start at, and the path to its last node as ranges of the log (paths.ts).
 */

/** Where a node's message is: the change that made it, and its position among that change's nodes. */
export interface NodePlace {
  /** The change: [base, seq] of its position in the node's life. */
  readonly s: readonly [number, number];
  /** Position of the node among the change's nodes. */
  readonly p: number;
  /** How many nodes that change made (a node with p = n - 1 ends its chain). */
  readonly n: number;
  /** The path to the change's last node, as ranges of the log (paths.ts). */
  readonly r: readonly Run[];
}

/** What every change carries forward from the one before (attribute `t`, JSON text). */
export interface Carried {
  /** The latest version of this life. */
  v: number;
  /** The head, the version it points at, its depth. */
  h: string;
  hv: number;
  hd: number;
  /** The version the head's index says; -1 while the head is one of the newest change's own nodes. */
  hx: number;
  /** Where the head's message is (absent for the root). */
  hp?: NodePlace;
  /** The newest change that made nodes ([base, seq]), so the next one knows whether it continues its range. */
  ln?: readonly [number, number];
  /** The session's agent and user. */
  ag: string | null;
  u: string | null;
  /** When a writer last moved the session's activity itself. */
  ta: string | null;
  /**
   * The session's lifetime settings (API.md section 12), absent when it has none: with this
   * change's `createdAt` they say when the session expires, so a read of the tip knows it.
   */
  lt?: StoredLifetime;
  /** A decision's lease, while it holds. */
  ls?: { k: string; u: number };
  /**
   * Whether this life of the session has anything written (a version, a node, a head move):
   * a log of nothing but decisions' leases and their ends reads as a session never written.
   */
  w?: true;
  /**
   * Until when (epoch seconds) the session may have WebSocket followers (`Tip.followersUntil`):
   * put by a follow (kind f), carried on by every change until it has passed.
   */
  f?: number;
  /**
   * Only follows so far in this life: the next other change is still the life's first (its
   * session item checked, its lifetime the deployment's defaults), as on an empty log.
   */
  fo?: 1;
  /** Bytes of the log so far, this change included (to split long path ranges into reads of about a MB). */
  b: number;
  /** Its writer lost a race for this place first (TipChange.contended); not carried forward. */
  c?: 1;
  /**
   * The copy that writes this life and has not opened it yet (SessionScope.copy): every change
   * of the copy carries it, the one that opens the session does not (`closeIfUnopened`).
   */
  cp?: string;
}

/** Where a change's nodes hang (attribute `chain`, JSON text). */
export interface Chain {
  /** The parent of the first node: its place, or null for the root. */
  up: { s: readonly [number, number]; p: number } | null;
  /** Depth of the first node. */
  d: number;
  /** The version the nodes point at when made (a decision's last node points at its own version). */
  p0: number;
  /** The path to the change's last node. */
  r: readonly Run[];
}

/**
 * The attribute (and its one value) of the change that opens a copy's session (log-writer.ts,
 * `opensCopy`), outside the carried part so that the stream's filter can see it: the change
 * hook releases the copy's held-back events when it arrives (stream-images.ts).
 */
export const OPENS_COPY_ATTRIBUTE = 'opens';
export const OPENS_COPY = 'copy';

/** A change of the log as the store reads it back. */
export interface LogEntry {
  readonly position: LogPosition;
  readonly kind: string;
  readonly createdAt: string;
  readonly carried: Carried;
  readonly item: Item;
  /** The node the version is anchored at (version changes only). */
  readonly versionNode: string | null;
  readonly chain: Chain | null;
  /** The messages of its nodes, in order. */
  readonly messages: readonly JsonObject[];
  readonly decision: StoredDecision | null;
  /** The changes just before it, when a tip read asked for them (newest first). */
  readonly recent?: readonly LogEntry[];
}

/** A fence or a tombstone: the life it ended, and whether its delete is still erasing. */
export interface FenceEntry {
  readonly position: LogPosition;
  readonly closing: boolean;
  readonly since: string | null;
  /** A delete's fence: the followers the closed life had (`Carried.f`), for the next life to carry on. */
  readonly followersUntil?: number;
  /** A closing fence: the eraser that holds it, until when (epoch ms; session-delete.ts `claim`). */
  readonly holder?: { eraser: string; until: number };
  /** A closing fence of a copy's life (its closed fence takes a TTL); of a user's erasure (that erasure's id). */
  readonly copyLife?: true;
  readonly erasure?: string;
}

// ---- JSON text and compressed JSON text ------------------------------------------------------

/** JSON text as the table keeps it, numbers verbatim (core/json/json.ts): the one place log items write JSON. */
export function jsonText(value: unknown): string {
  return encodeStoredJson(value);
}

export function parseJsonText<T = Json>(value: unknown): T {
  return (typeof value === 'string' ? decodeStoredJson(value) : null) as T;
}

/** About what DynamoDB counts for an item: names plus values (for `Carried.b`, not for billing). */
function approximateSize(item: Item): number {
  let bytes = 0;
  for (const [name, value] of Object.entries(item)) {
    bytes += name.length;
    if (typeof value === 'string') bytes += Buffer.byteLength(value);
    else if (value instanceof Uint8Array) bytes += value.byteLength;
    else if (typeof value === 'number') bytes += 8;
    else if (value !== undefined) bytes += Buffer.byteLength(stringifyJson(value) ?? '');
  }
  return bytes;
}

/** A short random id that a conditional write carries, to know its own item when the SDK retried it. */
export function newWriteId(): string {
  return randomBytes(12).toString('base64url');
}

// ---- reading changes --------------------------------------------------------------------------

/** A log item read back: a change, or a fence (or tombstone); null when it is neither. */
export function readLogItem(item: Item): LogEntry | FenceEntry | null {
  const position = logPositionOf(String(item.sk));
  if (!position) return null;
  if (item[KIND_ATTRIBUTE] === LOG_ITEM_KIND.tombstone) {
    return {
      position,
      closing: item.fence === 'closing',
      since: typeof item.createdAt === 'string' ? item.createdAt : null,
      ...(typeof item.f === 'number' ? { followersUntil: item.f } : {}),
      ...(typeof item[FENCE_HOLDER] === 'string' && typeof item[FENCE_HELD_UNTIL] === 'number'
        ? { holder: { eraser: item[FENCE_HOLDER], until: item[FENCE_HELD_UNTIL] } }
        : {}),
      ...(item[FENCE_COPY_LIFE] === undefined ? {} : { copyLife: true as const }),
      ...(typeof item[FENCE_ERASURE] === 'string' ? { erasure: item[FENCE_ERASURE] } : {}),
    };
  }
  const chain = parseJsonText<Chain | null>(item.chain);
  const carried = carriedOf(item, chain);
  const messagesText = unpackText(item.nodes);
  const messages = messagesText === null ? [] : (decodeStoredJson(messagesText) as JsonObject[]);
  return {
    position,
    kind: String(item[KIND_ATTRIBUTE]),
    createdAt: String(item.createdAt),
    carried,
    item,
    versionNode: item[KIND_ATTRIBUTE] === LOG_ITEM_KIND.version ? String(item.node) : null,
    chain,
    messages,
    decision: decisionOfItem(item, carried, messages),
  };
}

/**
 * What a change carries (`t`), with what `writtenCarried` left out because the same item holds
 * it: the head when it is the version's node, the head's path when it is the change's own chain's.
 */
function carriedOf(item: Item, chain: Chain | null): Carried {
  const text = unpackTextWith(item.t, carriedDictionary(item.createdAt));
  const written = parseJsonText<(Omit<Carried, 'h'> & { h?: string }) | null>(text);
  if (!written) return nothingCarried(item);
  const carried = { ...written, h: written.h ?? String(item.node) } as Carried;
  if (carried.hp && carried.hp.r === undefined) carried.hp = { ...carried.hp, r: chain?.r ?? [] };
  return carried;
}

/** `carried` as a change's item writes it: without what its own attributes repeat (see `carriedOf`). */
function writtenCarried(carried: Carried, own: Item, chain: Chain | undefined): object {
  const { h, hp, ...rest } = carried;
  const written: Record<string, unknown> = own.node === h ? { ...rest } : { h, ...rest };
  if (hp) written.hp = chain && jsonText(hp.r) === jsonText(chain.r) ? { s: hp.s, p: hp.p, n: hp.n } : hp;
  return written;
}

/**
 * What every change's carried part repeats: its names, and the change's own time (its `ta` is
 * mostly the same day and hour). With it, `t` is deflated to about half (a lease's 280 bytes to
 * some 130): each change carries it, so a read of the log's newest changes pays for it many times.
 */
const CARRIED_WORDS =
  '{"h":"","v":,"hv":,"hd":,"hx":-1,"ln":[,"ag":"","u":"","ta":"","w":true,"ls":{"k":"","u":},"b":,"hp":{"s":[,"p":0,"n":1,"r":[[0,1,0,';

function carriedDictionary(createdAt: unknown): string {
  return `${CARRIED_WORDS}${typeof createdAt === 'string' ? createdAt : ''}`;
}

/** What a change without its carried part (never written so; a hand-made item) is read as. */
function nothingCarried(item: Item): Carried {
  const version = typeof item.version === 'number' ? item.version : Number(item.version ?? 0);
  return { v: version, h: 'root', hv: version, hd: 0, hx: 0, ag: null, u: null, ta: null, w: true, b: 0 };
}

/**
 * Whether log items read newest first are one unbroken run of one life's log that a delete
 * has not closed: each the change right before the one above it (`nextPosition` backwards:
 * `(b, s)` follows `(b, s - 1)`, and `(u, 1)` follows version `u`). A read from a replica that
 * lags may miss the newest changes, never older ones alone; a gap, a fence at the top or an
 * empty read is read again consistently. Items of an earlier life below the run end it.
 * (A version retention removed also leaves a gap: only a read more, never a wrong answer.)
 */
export function isUnbrokenRun(items: readonly Item[]): boolean {
  const first = items[0];
  if (!first || first[KIND_ATTRIBUTE] === LOG_ITEM_KIND.tombstone) return false;
  let above = logPositionOf(String(first.sk));
  if (!above) return false;
  for (const item of items.slice(1)) {
    const position = logPositionOf(String(item.sk));
    if (!position) return false;
    if (position.incarnation !== above.incarnation) return true;
    if (item[KIND_ATTRIBUTE] === LOG_ITEM_KIND.tombstone) return false;
    const follows =
      above.seq > 1
        ? position.base === above.base && position.seq === above.seq - 1
        : item[KIND_ATTRIBUTE] === LOG_ITEM_KIND.version && Number(item.version) === above.base && position.base === above.base - 1;
    if (!follows) return false;
    above = position;
  }
  return true;
}

export function isFence(entry: LogEntry | FenceEntry | null): entry is FenceEntry {
  return entry !== null && 'closing' in entry;
}

/** The nodes a change made, as records, each with its place. */
export function nodesOf(entry: LogEntry): NodeRecord[] {
  const { chain, messages } = entry;
  if (!chain) return [];
  const last = messages.length - 1;
  return messages.map((message, index) => ({
    id: String(message.id),
    parentId: typeof message.parentId === 'string' ? message.parentId : null,
    depth: chain.d + index,
    role: typeof message.role === 'string' ? message.role : null,
    message,
    // A decision's last node is its head, anchored at the decision's own version.
    stateVersion: index === last && entry.versionNode === message.id ? Number(entry.item.version) : chain.p0,
    createdAt: entry.createdAt,
    place: { s: [entry.position.base, entry.position.seq], p: index, n: messages.length, r: chain.r } satisfies NodePlace,
  }));
}

/**
 * The record of a version change. `pieces` holds the piece items its texts are made of
 * (`versionItem.pieceKeys`); with `null`, a state kept in pieces is left unread (`state: null`,
 * `stateUnread: true`), for readers that need only its size or its change.
 */
export function versionOf(
  entry: Pick<LogEntry, 'item' | 'position' | 'carried'>,
  pieces: ReadonlyMap<string, Item> | null = new Map(),
): VersionRecord {
  const { item } = entry;
  const lineage = decodeLineage(item.lineage);
  const pieceKeys = versionItem.pieceKeys(item);
  const unread = pieces === null && pieceKeys.length > 0;
  const read = pieces ?? new Map<string, Item>();
  const decoded = unread ? null : versionItem.decodeStateAndBase(item, read);
  return {
    version: Number(item.version),
    node: String(item.node),
    prevVersion: Number(item.prevVersion ?? 0),
    cause: causeOf(item.cause),
    author: typeof item.author === 'string' ? item.author : null,
    decisionId: typeof item.decisionId === 'string' ? item.decisionId : null,
    createdAt: String(item.createdAt),
    state: decoded ? decoded.state : null,
    agent: parseJsonText(item.agent),
    lineage: lineage.map((entry) => entry.version),
    sessionAgentId: entry.carried.ag,
    commands: unread ? null : versionItem.decodeCommands(item, read),
    place: { incarnation: entry.position.incarnation, seq: entry.position.seq, lineage } satisfies VersionPlace,
    // Known without reading for a state in pieces (an inline state's size is its text's).
    ...(pieceKeys.length > 0 ? { stateBytes: versionItem.stateBytes(item) } : {}),
    ...(decoded?.stored ? { stored: decoded.stored } : {}),
    ...(unread ? { stateUnread: true as const } : {}),
    ...changeOf(item),
  };
}

/** The change a version keeps when its state, or the one before it, is large (version-item.ts). */
function changeOf(item: Item): { change?: NonNullable<VersionRecord['change']> } {
  const change = versionItem.decodeChange(item);
  return change === null ? {} : { change };
}

/** Where a version and its lineage window are (VersionRecord.place). */
export interface VersionPlace {
  readonly incarnation: number;
  /** Its seq among the changes after the version before it. */
  readonly seq: number;
  /** Its lineage window, each with its seq. */
  readonly lineage: ReadonlyArray<{ version: number; seq: number }>;
}

const CAUSES = ['patch', 'replace', 'decide', 'commit'] as const;

/** Causes are a closed set; one this code does not know reads as the plain write it most likely is. */
function causeOf(value: unknown): VersionRecord['cause'] {
  return (CAUSES as readonly unknown[]).includes(value) ? (value as VersionRecord['cause']) : 'patch';
}

/**
 * The tip a session's newest log item says. A fence that is still erasing closes the session;
 * a finished one (or a tombstone a lost fence left) starts the next life, empty.
 */
export function tipOf(entry: LogEntry | FenceEntry | null, options: { withState: boolean; pieces?: ReadonlyMap<string, Item> }): Tip {
  if (entry === null) return emptyTip(0);
  if (isFence(entry)) {
    // The session id's followers follow it into its next life.
    const followers = entry.followersUntil === undefined ? {} : { followersUntil: entry.followersUntil };
    const next = { ...emptyTip(entry.position.incarnation + 1), ...followers };
    return entry.closing
      ? { ...emptyTip(entry.position.incarnation), ...followers, kind: 'closing', since: entry.since, log: entry }
      : next;
  }
  const { carried } = entry;
  // A provisional change has no lifetime (`isProvisional`), whatever an older item may carry.
  const lifetime = carried.lt && !isProvisional(entry) ? lifetimeOf(carried.lt) : undefined;
  const recentNodes = nodesOf(entry);
  const head = recentNodes.at(-1)?.id === carried.h ? (recentNodes.at(-1) as NodeRecord) : null;
  const common = {
    incarnation: entry.position.incarnation,
    version: carried.v,
    head: carried.h,
    headVersion: carried.hv,
    headDepth: carried.hd,
    touchedAt: carried.ta,
    agentId: carried.ag,
    userId: carried.u,
    ...(lifetime ? { lifetime, expiresAtMs: expiryOf(lifetime, Date.parse(entry.createdAt)) } : {}),
    lease: carried.ls ? ({ holder: carried.ls.k, untilMs: carried.ls.u } satisfies DecisionLease) : null,
    ...(carried.f === undefined ? {} : { followersUntil: carried.f }),
    headNode: head ?? {
      ...rootNode(''),
      id: carried.h,
      depth: carried.hd,
      stateVersion: carried.hv,
      ...(carried.hp ? { place: carried.hp } : {}),
    },
    recentNodes,
    recentDecision: decisionOf(entry),
    ...(carried.c ? { contendedAt: entry.createdAt } : {}),
    log: entry,
  };
  if (!carried.w) return { ...common, kind: 'empty', version: 0, latest: null };
  if (entry.kind === LOG_ITEM_KIND.version) {
    return { kind: 'version', ...common, latest: options.withState ? versionOf(entry, options.pieces) : null };
  }
  return { kind: 'entry', ...common, latest: null };
}

/**
 * Whether a change is provisional: one of a life with nothing written yet (no version, node or
 * head move) that carries the table's TTL. Those are a follow's lone mark and a decision's lease
 * and its end put in such a life (session-writes.ts, `provisionalOf`): no session stands behind
 * them, and they go by themselves. So a provisional change has no lifetime, and the one rule
 * about it is here: the writer puts none on it, and a tip read from one (an item written before
 * this rule carries the deployment's idle lifetime) has none. A life made only of provisional
 * changes therefore reads as never written to every reader, however long ago they were made:
 * it never expires, so a `DELETE` of the id answers 404 and erases nothing, and no
 * `session.expired` is sent for it; the life's first write starts its lifetime (log-writer.ts).
 */
export function isProvisional(entry: LogEntry): boolean {
  return !entry.carried.w && typeof entry.item[tableKeys.timeToLive] === 'number' && typeof entry.item.writeId === 'string';
}

/**
 * The tip as a reader at `nowMs` sees it: a session whose expiry has come is closed (API.md
 * section 12: it reads as unknown, and the next write erases it and starts its next life, as
 * after a delete). The newest change stays in `log`, so that the write that erases it can claim
 * the place after it (session-delete.ts).
 */
export function closeIfExpired(tip: Tip, nowMs: number): Tip {
  if (tip.kind === 'closing' || !hasExpired(tip.expiresAtMs, nowMs)) return tip;
  return {
    ...emptyTip(tip.incarnation),
    agentId: tip.agentId,
    userId: tip.userId,
    ...(tip.followersUntil === undefined ? {} : { followersUntil: tip.followersUntil }),
    kind: 'closing',
    since: null,
    expiredAt: new Date(tip.expiresAtMs as number).toISOString(),
    log: tip.log,
  };
}

function decisionOf(entry: LogEntry): DoneDecision | null {
  const { decision } = entry;
  if (!decision) return null;
  return {
    decisionId: decision.id,
    status: 'done',
    attempts: decision.attempts,
    outcome: decision.outcome,
    incarnation: entry.position.incarnation,
  };
}

/** The store's reading of a tip's newest change (null for an empty or closing tip). */
export function entryOf(tip: Tip): LogEntry | null {
  const entry = tip.log as LogEntry | FenceEntry | undefined;
  return entry && !isFence(entry) ? entry : null;
}

// ---- writing changes --------------------------------------------------------------------------

/** The position the next change after `tip` claims: every writer that read the same tip picks the same one. */
export function nextPosition(tip: Tip): LogPosition {
  const entry = entryOf(tip);
  if (!entry) return { incarnation: tip.incarnation, base: 0, seq: 1 };
  const { incarnation, base, seq } = entry.position;
  // The version the change carries, not the tip's: a closed tip (an expiry, another's copy) says version 0.
  return entry.kind === LOG_ITEM_KIND.version ? { incarnation, base: entry.carried.v, seq: 1 } : { incarnation, base, seq: seq + 1 };
}

/** A change to write: its kind and own attributes, before the carried part and the key are added. */
export interface NewChange {
  readonly kind: string;
  readonly createdAt: string;
  readonly carried: Omit<Carried, 'b'>;
  readonly version?: { encoded: EncodedVersion; lineage: ReadonlyArray<{ version: number; seq: number }> };
  readonly chain?: Chain;
  readonly messages?: readonly JsonObject[];
  readonly decision?: StoredDecision;
  /** The answer of the request that made the change, under its `Idempotency-Key` claim (kept-answers.ts). */
  readonly kept?: KeptAnswer;
  /** It opens a copy's session (`OPENS_COPY_ATTRIBUTE`). */
  readonly opensCopy?: true;
}

/** The item of a change at `position`, with the bytes of the log so far (`before`) counted on. */
export function logItem(scope: SessionScope, position: LogPosition, change: NewChange, before: number): Item {
  const own: Item = {
    pk: keys.session(scope),
    sk: keys.logEntry(position),
    [KIND_ATTRIBUTE]: change.kind,
    createdAt: change.createdAt,
    // A change that keeps its request's answer is known by its claim's id (`ik`, new with every
    // claim and kept by one change only): no id of its own is written beside it.
    ...(change.kept ? {} : { writeId: newWriteId() }),
  };
  if (change.version) {
    const { encoded, lineage } = change.version;
    const { record } = encoded;
    Object.assign(own, {
      version: record.version,
      node: record.node,
      prevVersion: record.prevVersion,
      cause: record.cause,
      author: record.author,
      decisionId: record.decisionId,
      ...versionItem.textAttributes(encoded),
      agent: jsonText(record.agent),
      lineage: lineage.length > 0 ? encodeLineage(lineage) : undefined,
    });
  }
  if (change.chain && change.messages) {
    own.chain = jsonText(change.chain);
    own.nodes = packText(jsonText(change.messages));
  }
  if (change.decision) own.decision = packText(jsonText(compactDecision(change.decision, own, change.carried, change.messages)));
  Object.assign(own, keptAttributes(change.kept, own));
  if (change.opensCopy) own[OPENS_COPY_ATTRIBUTE] = OPENS_COPY;
  // The bytes counted include this item's own carried part, estimated from the part without `b`.
  const dictionary = carriedDictionary(change.createdAt);
  const carriedText = packTextWith(jsonText(writtenCarried({ ...change.carried, b: 0 }, own, change.chain)), dictionary);
  const size = approximateSize({ ...own, t: carriedText }) + 8;
  if (size > CHANGE_LIMIT_BYTES) throw changeTooLarge(size, own);
  return { ...own, t: packTextWith(jsonText(writtenCarried({ ...change.carried, b: before + size }, own, change.chain)), dictionary) };
}

/**
 * The most a change's item may take by `approximateSize`: DynamoDB's item limit, less room for
 * what that estimate leaves out (a number's bytes, the carried part's final `b`).
 */
const CHANGE_LIMIT_BYTES = ITEM_LIMIT_BYTES - 1024;

/**
 * `413 payload_too_large` for a change that would not fit one item, before anything is written:
 * the messages of one append (or of one decision's trigger and answer) are stored together in
 * the change, compressed, and text compresses where encoded binary does not, so 1 MiB of
 * messages may fit and 500 KB may not. A decision blames its worker when it added messages.
 */
function changeTooLarge(size: number, own: Item): AgentStateError {
  const messages =
    own.nodes instanceof Uint8Array ? own.nodes.byteLength : typeof own.nodes === 'string' ? Buffer.byteLength(own.nodes) : 0;
  return new AgentStateError(
    'payload_too_large',
    `the messages are stored together in one change of the session's log, which may take at most ${CHANGE_LIMIT_BYTES} bytes; ` +
      `compressed, they take ${messages} and the change ${size}: send them in several requests`,
    { limitBytes: CHANGE_LIMIT_BYTES, sizeBytes: size, field: 'messages' },
  );
}

/** The decision a change of the log completed, as the decisions list shows it; null for any other change. */
export function decisionSummaryOf(item: Item): DecisionSummary | null {
  const decision = decisionOfItem(item, carriedOf(item, parseJsonText<Chain | null>(item.chain)));
  if (!decision) return null;
  const { outcome } = decision;
  const routing = outcome.routing ?? [];
  return {
    decisionId: decision.id,
    agentId: outcome.decidedBy !== undefined ? outcome.decidedBy : (outcome.agentId ?? null),
    routedFrom: routing.length > 0 ? (outcome.agentId ?? null) : null,
    routing,
    version: outcome.version,
    createdAt: String(item.createdAt),
  };
}
