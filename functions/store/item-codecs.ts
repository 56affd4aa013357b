import type { StateFields } from '../core/fields.js';
import { ROOT_NODE } from '../core/ids.js';
import { decodeStoredJson, encodeStoredJson, type Json, type JsonObject } from '../core/json.js';
import {
  type AgentRecord,
  type DecisionOutcome,
  type DecisionRecord,
  type DocumentKind,
  type DocumentRecord,
  type DocumentRef,
  type DoneDecision,
  type NodeRecord,
  type RecordedChange,
  type SessionMeta,
  type SessionScope,
  type Tip,
  VERSION_CAUSES,
  type VersionCause,
  type VersionRecord,
} from '../core/model.js';
import type { IdempotencyClaim, StoredResponse } from '../core/ports.js';
import { emptyTip } from '../core/tree.js';
import { DOCUMENT_ITEM_KIND, SLOT_ITEM_KIND } from './item-kinds.js';
import { keys, slotOf } from './keys.js';
import { decodeLineage, encodeLineage } from './lineage.js';
import { decodeText, type EncodedState, encodeText, pieceKeysOf, textBytesOf } from './state-codec.js';
import { tableKeys } from './table.js';
import type { Item } from './table-client.js';

/**
 * One codec per item kind: how a record becomes an item and back. The stores write and read
 * items only through these, the stream parser (stream-images.ts) reads versions and documents
 * through the same decoders, and the tests build raw items with them. Key shapes are in
 * keys.ts, conditions in the store of each item; JSON values (state, config, messages) are
 * stored as JSON text: verbatim, whatever the keys or number sizes, and one attribute.
 */

/** JSON text back to JSON, numbers verbatim (core/json.ts); an absent attribute is null. */
function parseJsonText(value: unknown): Json {
  return typeof value === 'string' ? decodeStoredJson(value) : null;
}

function stringOrNull(value: unknown): string | null {
  return typeof value === 'string' ? value : null;
}

// ---- the session: S#<tenant>#<session> / S (also in the activity index) ----------------

export const sessionItem = {
  key: (scope: SessionScope): Item => ({ pk: keys.session(scope), sk: keys.sessionSort }),

  encode(scope: SessionScope, meta: SessionMeta): Item {
    return {
      ...sessionItem.key(scope),
      [tableKeys.sessionsIndex.partitionKey]: keys.tenantSessions(scope.tenant),
      [tableKeys.sessionsIndex.sortKey]: keys.activity(meta.updatedAt, meta.sessionId),
      sessionId: meta.sessionId,
      agentId: meta.agentId,
      userId: meta.userId,
      metadata: meta.metadata === null ? null : encodeStoredJson(meta.metadata),
      createdAt: meta.createdAt,
      updatedAt: meta.updatedAt,
    };
  },

  decode(item: Item): SessionMeta {
    return {
      sessionId: String(item.sessionId),
      agentId: stringOrNull(item.agentId),
      userId: stringOrNull(item.userId),
      metadata: parseJsonText(item.metadata) as JsonObject | null,
      createdAt: String(item.createdAt),
      updatedAt: String(item.updatedAt),
    };
  },
};

// ---- a message node: N#<node> ----------------------------------------------------------

export const nodeItem = {
  key: (scope: SessionScope, nodeId: string): Item => ({ pk: keys.session(scope), sk: keys.node(nodeId) }),

  encode(scope: SessionScope, node: NodeRecord): Item {
    return {
      ...nodeItem.key(scope, node.id),
      id: node.id,
      parentId: node.parentId,
      depth: node.depth,
      role: node.role,
      message: node.message === null ? undefined : encodeStoredJson(node.message),
      stateVersion: node.stateVersion,
      ancestors: node.ancestors,
      createdAt: node.createdAt,
    };
  },

  /** The node id in an item's `N#…` sort key. */
  idOf: (item: Item): string => String(item.sk).slice(keys.nodePrefix.length),

  decode(item: Item): NodeRecord {
    const id = nodeItem.idOf(item);
    const isRoot = id === ROOT_NODE;
    return {
      id,
      // The root's item only ever holds its pointer; it has no parent and no depth.
      parentId: isRoot ? null : stringOrNull(item.parentId),
      depth: isRoot ? 0 : Number(item.depth),
      role: stringOrNull(item.role),
      message: parseJsonText(item.message) as JsonObject | null,
      stateVersion: Number(item.stateVersion ?? 0),
      ancestors: (item.ancestors as string[] | undefined) ?? [],
      createdAt: String(item.createdAt ?? ''),
    };
  },
};

// ---- the V#<slot> items: versions, head markers, tombstones ----------------------------

/** Where the head is, carried by every version and marker item: the tip says it in one read. */
interface TipAttributes {
  head: { id: string; version: number; depth: number };
  /** When the write moved the session's activity itself (see `Tip.touchedAt`). */
  touchedAt: string | null;
  agentId: string | null;
}

/** What a tip item holds besides the head: a version, or a head marker with its sequence. */
type TipBody = { version: EncodedVersion } | { markerSeq: number };

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
function encodeChange(record: VersionRecord, state: EncodedState): EncodedState | null {
  if (state.pieces.length === 0 && (record.basePieces ?? []).length === 0) return null;
  const change = record.change ?? {};
  const candidates: RecordedChange[] = [
    change,
    ...(change.jsonPatch === undefined ? [] : [{ jsonPatch: change.jsonPatch }]),
    ...(change.patch === undefined ? [] : [{ patch: change.patch }]),
  ];
  for (const candidate of candidates) {
    const text = encodeStoredJson(candidate);
    if (Buffer.byteLength(text, 'utf8') > CHANGE_LIMIT_BYTES) continue;
    const encoded = encodeText(TEXTS.change, text);
    if (encoded.pieces.length === 0) return encoded;
  }
  // Still recorded, empty: the event says the states are large and carries no change.
  return encodeText(TEXTS.change, '{}');
}

export const versionItem = {
  key: (scope: SessionScope, version: number): Item => ({ pk: keys.session(scope), sk: keys.slot(version) }),

  /** A version's state and commands as the state codec keeps them (the pieces are not written here). */
  encodeTexts(record: VersionRecord): EncodedVersion {
    const state = encodeText(TEXTS.state, encodeStoredJson(record.state));
    return {
      record,
      state,
      commands: record.commands ? encodeText(TEXTS.commands, encodeStoredJson(record.commands)) : null,
      change: encodeChange(record, state),
    };
  },

  /** The sort keys of the pieces a version item's texts are made of (none when inline). */
  pieceKeys: (item: Item): string[] => [...pieceKeysOf(item, TEXTS.state), ...pieceKeysOf(item, TEXTS.commands)],

  /** The state of a version item (read whole, or projected to its state attributes). */
  decodeState: (item: Item, pieces: ReadonlyMap<string, Item>): Json => parseJsonText(decodeText(item, TEXTS.state, pieces)),

  /** Bytes of the JSON text of a version item's state, read or not. */
  stateBytes: (item: Item): number => textBytesOf(item, TEXTS.state),

  /** A version's own attributes; the head's come with it from `tipItem`. */
  attributes(encoded: EncodedVersion): Item {
    const { record } = encoded;
    return {
      kind: SLOT_ITEM_KIND.version,
      version: record.version,
      node: record.node,
      prevVersion: record.prevVersion,
      cause: record.cause,
      author: record.author,
      decisionId: record.decisionId,
      createdAt: record.createdAt,
      ...encoded.state.attributes,
      agent: encodeStoredJson(record.agent),
      lineage: record.lineage.length > 0 ? encodeLineage(record.lineage) : undefined,
      ...(encoded.commands ? encoded.commands.attributes : {}),
      ...(encoded.change ? encoded.change.attributes : {}),
    };
  },

  /** Whether an item is a recorded version (a slot may hold a marker or a tombstone instead). */
  is: (item: Item | undefined): item is Item => item?.kind === SLOT_ITEM_KIND.version,

  /**
   * The version an item records. `pieces` holds the piece items its texts are made of (see
   * `pieceKeys`); with `null`, a state kept in pieces is left unread (`state: null`,
   * `stateUnread: true`), for readers that need only its size or its change.
   */
  decode(item: Item, pieces: ReadonlyMap<string, Item> | null = new Map()): VersionRecord {
    const cause = String(item.cause);
    const pieceKeys = versionItem.pieceKeys(item);
    const unread = pieces === null && pieceKeys.length > 0;
    const text = (name: string) => (unread ? null : decodeText(item, name, pieces ?? new Map()));
    const commands = text(TEXTS.commands);
    const change = decodeText(item, TEXTS.change);
    return {
      version: Number(item.version),
      node: String(item.node),
      prevVersion: Number(item.prevVersion ?? 0),
      // Causes are a closed set; an item from a newer writer with a cause this code does not
      // know reads as the plain write it most likely is.
      cause: (VERSION_CAUSES as readonly string[]).includes(cause) ? (cause as VersionCause) : 'patch',
      author: stringOrNull(item.author),
      decisionId: stringOrNull(item.decisionId),
      createdAt: String(item.createdAt),
      state: parseJsonText(text(TEXTS.state)),
      agent: parseJsonText(item.agent),
      lineage: decodeLineage(item.lineage),
      sessionAgentId: stringOrNull(item.agentId),
      commands: commands === null ? null : (decodeStoredJson(commands) as Json[]),
      // Known without reading for a state in pieces (an inline state's size is its text's).
      ...(pieceKeys.length > 0 ? { pieces: pieceKeys, stateBytes: versionItem.stateBytes(item) } : {}),
      ...(unread ? { stateUnread: true } : {}),
      ...(change === null ? {} : { change: decodeStoredJson(change) as unknown as RecordedChange }),
    };
  },
};

export const tipItem = {
  /** Projection of a tip read that needs no state: the head and the slot's kind. */
  summary: {
    ProjectionExpression: 'pk, sk, #kind, #seq, version, head, headVersion, headDepth, touchedAt, agentId, createdAt',
    ExpressionAttributeNames: { '#kind': 'kind', '#seq': 'seq' },
  },

  encode(scope: SessionScope, slot: number, tip: TipAttributes, body: TipBody): Item {
    return {
      ...versionItem.key(scope, slot),
      head: tip.head.id,
      headVersion: tip.head.version,
      headDepth: tip.head.depth,
      touchedAt: tip.touchedAt ?? undefined,
      agentId: tip.agentId ?? undefined,
      ...('version' in body ? versionItem.attributes(body.version) : { kind: SLOT_ITEM_KIND.marker, seq: body.markerSeq }),
    };
  },

  /** The tip a session's top slot item says (none: the empty tip); `pieces` as for `versionItem.decode`. */
  decode(item: Item | undefined, options: { withState: boolean }, pieces: ReadonlyMap<string, Item> = new Map()): Tip {
    if (!item) return emptyTip();
    const slot = slotOf(String(item.sk));
    if (item.kind === SLOT_ITEM_KIND.tombstone) {
      return { ...emptyTip(), kind: 'closing', slot, since: stringOrNull(item.createdAt) };
    }
    const head = {
      head: String(item.head),
      headVersion: Number(item.headVersion),
      headDepth: Number(item.headDepth),
      touchedAt: stringOrNull(item.touchedAt),
      agentId: stringOrNull(item.agentId),
    };
    if (item.kind === SLOT_ITEM_KIND.marker) {
      return { kind: 'marker', slot, markerSeq: Number(item.seq), version: slot - 1, ...head, latest: null };
    }
    return { kind: 'version', slot, version: slot, ...head, latest: options.withState ? versionItem.decode(item, pieces) : null };
  },
};

export const tombstoneItem = {
  /** The item a delete closes a session with, in the slot the next write would take. */
  encode: (scope: SessionScope, slot: number, createdAt: string): Item => ({
    ...versionItem.key(scope, slot),
    kind: SLOT_ITEM_KIND.tombstone,
    createdAt,
  }),
};

// ---- commit documents: R#<run> in the session, P#<tenant>#<user> / P, G#<tenant> / G --------

/** Whose commit wrote a document version: its change event's session and author. */
interface DocumentOrigin {
  sessionId: string | null;
  author: string | null;
}

export const documentItem = {
  key(ref: DocumentRef): Item {
    switch (ref.kind) {
      case 'run':
        return { pk: keys.session(ref.scope), sk: keys.run(ref.id) };
      case 'profile':
        return { pk: keys.profile(ref.tenant, ref.id), sk: keys.profileSort };
      case 'shared':
        return { pk: keys.shared(ref.tenant), sk: keys.sharedSort };
    }
  },

  /** The document an item's key names, or null when the key is not one of `kind`'s. */
  refOf(kind: DocumentKind, item: Item): DocumentRef | null {
    const pk = String(item.pk ?? '');
    const sk = String(item.sk ?? '');
    switch (kind) {
      case 'run': {
        const partition = /^S#([^#]+)#([^#]+)$/.exec(pk);
        const id = sk.startsWith(keys.run('')) ? sk.slice(keys.run('').length) : '';
        return partition && id ? { kind, scope: { tenant: partition[1] as string, sessionId: partition[2] as string }, id } : null;
      }
      case 'profile': {
        const partition = /^P#([^#]+)#([^#]+)$/.exec(pk);
        return partition && sk === keys.profileSort ? { kind, tenant: partition[1] as string, id: partition[2] as string } : null;
      }
      case 'shared': {
        const partition = /^G#([^#]+)$/.exec(pk);
        return partition && sk === keys.sharedSort ? { kind, tenant: partition[1] as string } : null;
      }
    }
  },

  encode(ref: DocumentRef, record: DocumentRecord, origin: DocumentOrigin, expiresAt?: number): Item {
    return {
      ...documentItem.key(ref),
      kind: DOCUMENT_ITEM_KIND[record.kind],
      version: record.version,
      state: encodeStoredJson(record.state),
      updatedAt: record.updatedAt,
      // For the change event: whose commit this was (stream-images.ts reads them back).
      sessionId: origin.sessionId ?? undefined,
      author: origin.author,
      ...(expiresAt === undefined ? {} : { [tableKeys.timeToLive]: expiresAt }),
    };
  },

  decode(ref: DocumentRef, item: Item): DocumentRecord {
    return {
      kind: ref.kind,
      id: ref.kind === 'shared' ? 'shared' : ref.id,
      version: Number(item.version),
      state: parseJsonText(item.state),
      updatedAt: stringOrNull(item.updatedAt),
    };
  },

  originOf: (item: Item): DocumentOrigin => ({ sessionId: stringOrNull(item.sessionId), author: stringOrNull(item.author) }),
};

// ---- decisions: D#<decision> and the session's lease L ---------------------------------

export const decisionItem = {
  key: (scope: SessionScope, decisionId: string): Item => ({ pk: keys.session(scope), sk: keys.decision(decisionId) }),

  encode: (scope: SessionScope, record: DoneDecision, expiresAt: number): Item => ({
    ...decisionItem.key(scope, record.decisionId),
    status: record.status,
    attempts: record.attempts,
    outcome: encodeStoredJson(record.outcome),
    [tableKeys.timeToLive]: expiresAt,
  }),

  decode(decisionId: string, item: Item): DecisionRecord {
    const attempts = Number(item.attempts ?? 0);
    if (item.status === 'done' && typeof item.outcome === 'string') {
      return { decisionId, status: 'done', attempts, outcome: decodeStoredJson(item.outcome) as unknown as DecisionOutcome };
    }
    return { decisionId, status: 'failed', attempts };
  },
};

export const leaseItem = {
  key: (scope: SessionScope): Item => ({ pk: keys.session(scope), sk: keys.lease }),

  encode: (scope: SessionScope, holder: string, untilMs: number): Item => ({
    ...leaseItem.key(scope),
    holder,
    leaseUntil: untilMs,
    // TTL removes a lease its holder never released, a minute after it ran out.
    [tableKeys.timeToLive]: Math.ceil(untilMs / 1000) + 60,
  }),
};

// ---- agents: A#<tenant> / A#<agent> ----------------------------------------------------

export const agentItem = {
  key: (tenant: string, agentId: string): Item => ({ pk: keys.agents(tenant), sk: keys.agent(agentId) }),

  encode: (tenant: string, agent: AgentRecord): Item => ({
    ...agentItem.key(tenant, agent.agentId),
    agentId: agent.agentId,
    parentId: agent.parentId,
    worker: agent.worker ?? undefined,
    config: encodeStoredJson(agent.config),
    stateFields: agent.stateFields ? encodeStoredJson(agent.stateFields) : undefined,
    createdAt: agent.createdAt,
    updatedAt: agent.updatedAt,
  }),

  decode(item: Item): AgentRecord {
    const worker = item.worker as { url?: string; secret?: string | null; timeoutMs?: number | null } | undefined;
    return {
      agentId: String(item.agentId),
      parentId: stringOrNull(item.parentId),
      worker: worker?.url
        ? { url: worker.url, secret: worker.secret ?? null, timeoutMs: worker.timeoutMs == null ? null : Number(worker.timeoutMs) }
        : null,
      config: parseJsonText(item.config),
      stateFields: parseJsonText(item.stateFields) as StateFields | null,
      createdAt: String(item.createdAt),
      updatedAt: String(item.updatedAt),
    };
  },
};

// ---- Idempotency-Key claims: I#<tenant>#<key> / I --------------------------------------

export const idempotencyItem = {
  key: (tenant: string, key: string): Item => ({ pk: keys.idempotency(tenant, key), sk: keys.idempotencySort }),

  /** A pending claim: its holder's fingerprint, until when it counts as alive, and its expiry. */
  encode: (tenant: string, key: string, claim: { fingerprint: string; lockedUntil: number; expiresAt: number }): Item => ({
    ...idempotencyItem.key(tenant, key),
    fingerprint: claim.fingerprint,
    status: 'pending',
    lockedUntil: claim.lockedUntil,
    [tableKeys.timeToLive]: claim.expiresAt,
  }),

  /** The name the state codec keeps a done claim's answer under (`response`, `responseZ`, …). */
  responseText: 'response',

  /** The claim that holds a key: done with its answer, or still in progress; `pieces` as `decodeText` takes them. */
  decodeHolder(item: Item, pieces: ReadonlyMap<string, Item> = new Map()): Exclude<IdempotencyClaim, { outcome: 'claimed' }> {
    const fingerprint = String(item.fingerprint);
    const response = item.status === 'done' ? decodeText(item, idempotencyItem.responseText, pieces) : null;
    if (response !== null) {
      return { outcome: 'done', fingerprint, response: decodeStoredJson(response) as unknown as StoredResponse };
    }
    return { outcome: 'in_progress', fingerprint, lockedUntil: Number(item.lockedUntil) };
  },
};
