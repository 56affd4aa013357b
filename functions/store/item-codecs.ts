import type { StateFields } from '../core/fields.js';
import { decodeStoredJson, encodeStoredJson, type Json, type JsonObject } from '../core/json.js';
import type {
  AgentRecord,
  DecisionOutcome,
  DecisionRecord,
  DocumentKind,
  DocumentRecord,
  DocumentRef,
  DoneDecision,
  RecordedChange,
  SessionMeta,
  SessionScope,
  VersionRecord,
} from '../core/model.js';
import type { IdempotencyClaim, StoredResponse } from '../core/ports.js';
import { openSecret, sealSecret } from '../core/sealing.js';
import { DOCUMENT_ITEM_KIND } from './item-kinds.js';
import { keys } from './keys.js';
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
import { tableKeys } from './table.js';
import type { Item } from './table-client.js';

/**
 * One codec per item kind: how a record becomes an item and back. The stores write and read
 * items only through these, the stream parser (stream-images.ts) reads documents through the
 * same decoders, and the tests build raw items with them. The changes of a session's log
 * have theirs in log-items.ts, its node index in node-index.ts. Key shapes are in
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

// ---- the JSON texts of a version (log-items.ts has the rest of a version's change) --------

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
  if (!state.large && record.base === undefined) return null;
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
    if (!encoded.large) return encoded;
  }
  // Still recorded, empty: the event says the states are large and carries no change.
  return encodeText(TEXTS.change, '{}');
}

export const versionItem = {
  /** A version's state and commands as the state codec keeps them (the pieces are not written here). */
  encodeTexts(record: VersionRecord): EncodedVersion {
    // `base` is what this store's own decode put in `stored` (the core only passes it on).
    const state = encodeText(TEXTS.state, encodeStoredJson(record.state), (record.base as BaseText | undefined) ?? null);
    return {
      record,
      state,
      commands: record.commands ? encodeText(TEXTS.commands, encodeStoredJson(record.commands)) : null,
      change: encodeChange(record, state),
    };
  },

  /** The attributes the texts of `encoded` occupy on the version's item. */
  textAttributes: (encoded: EncodedVersion): Item => ({
    ...encoded.state.attributes,
    ...(encoded.commands ? encoded.commands.attributes : {}),
    ...(encoded.change ? encoded.change.attributes : {}),
  }),

  /** The names of every attribute a version's state may occupy (for projections). */
  stateAttributes: [TEXTS.state, `${TEXTS.state}Z`, `${TEXTS.state}P`, `${TEXTS.state}N`, `${TEXTS.state}S`, `${TEXTS.state}K`] as const,

  /** The sort keys of the pieces a version item's texts are made of (none when inline): what it keeps alive. */
  pieceKeys: (item: Item): string[] => [...pieceKeysOf(item, TEXTS.state), ...pieceKeysOf(item, TEXTS.commands)],

  /** The sort keys a reader of a version item fetches: the pieces, and the versions its state's splices are on. */
  readKeys: (item: Item): string[] => [...readKeysOf(item, TEXTS.state), ...readKeysOf(item, TEXTS.commands)],

  /**
   * The state of a version item, and what a version computed from it needs to know of it
   * (`stored`: null when it is inline).
   */
  decodeStateAndBase(item: Item, pieces: ReadonlyMap<string, Item>): { state: Json; stored: BaseText | null } {
    const text = decodeTextBytes(item, TEXTS.state, pieces);
    return { state: parseJsonText(text?.toString('utf8')), stored: baseTextOf(item, TEXTS.state, text) };
  },

  /** The state of a version item (read whole, or projected to its state attributes). */
  decodeState: (item: Item, pieces: ReadonlyMap<string, Item>): Json => parseJsonText(decodeText(item, TEXTS.state, pieces)),

  /** The commands of a version item (a commit's), or null. */
  decodeCommands(item: Item, pieces: ReadonlyMap<string, Item>): Json[] | null {
    const text = decodeText(item, TEXTS.commands, pieces);
    return text === null ? null : (decodeStoredJson(text) as Json[]);
  },

  /** Bytes of the JSON text of a version item's state, read or not. */
  stateBytes: (item: Item): number => textBytesOf(item, TEXTS.state),

  /** The change a version item keeps when its state, or the one before it, is in pieces (else null). */
  decodeChange(item: Item): RecordedChange | null {
    const change = decodeText(item, TEXTS.change);
    return change === null ? null : (decodeStoredJson(change) as unknown as RecordedChange);
  },
};

// ---- commit documents: R#<run> in the session, P#<tenant>#<user> / P, A#<tenant> / G --------

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
        const partition = /^A#([^#]+)$/.exec(pk);
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

// ---- decisions: D#<decision>#<life> -----------------------------------------------------

export const decisionItem = {
  key: (scope: SessionScope, decisionId: string, incarnation: number): Item => ({
    pk: keys.session(scope),
    sk: keys.decision(decisionId, incarnation),
  }),

  encode: (scope: SessionScope, record: DoneDecision, incarnation: number, expiresAt: number): Item => ({
    ...decisionItem.key(scope, record.decisionId, incarnation),
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

/** What a sealed secret is bound to: the item that holds it, so it cannot be moved to another. */
export function secretOwner(key: Item): string {
  return `${String(key.pk)}|${String(key.sk)}`;
}

// ---- agents: A#<tenant> / A#<agent> ----------------------------------------------------

export const agentItem = {
  key: (tenant: string, agentId: string): Item => ({ pk: keys.agents(tenant), sk: keys.agent(agentId) }),

  encode: (tenant: string, agent: AgentRecord): Item => ({
    ...agentItem.key(tenant, agent.agentId),
    agentId: agent.agentId,
    parentId: agent.parentId,
    worker: agent.worker
      ? {
          ...agent.worker,
          secret: agent.worker.secret === null ? null : sealSecret(agent.worker.secret, secretOwner(agentItem.key(tenant, agent.agentId))),
        }
      : undefined,
    config: encodeStoredJson(agent.config),
    stateFields: agent.stateFields ? encodeStoredJson(agent.stateFields) : undefined,
    createdAt: agent.createdAt,
    updatedAt: agent.updatedAt,
  }),

  decode(item: Item): AgentRecord {
    const worker = item.worker as
      | { url?: string; secret?: string | null; timeoutMs?: number | null; messages?: { last?: number } | null }
      | undefined;
    return {
      agentId: String(item.agentId),
      parentId: stringOrNull(item.parentId),
      worker: worker?.url
        ? {
            url: worker.url,
            // A secret stored before secrets were sealed reads as it is (and is sealed when next written).
            secret: typeof worker.secret === 'string' ? openSecret(worker.secret, secretOwner(item)) : null,
            timeoutMs: worker.timeoutMs == null ? null : Number(worker.timeoutMs),
            ...(typeof worker.messages?.last === 'number' ? { messages: { last: Number(worker.messages.last) } } : {}),
          }
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

  /**
   * The claim that holds a key: done with its answer, still in progress, or unfinished (its
   * lock lapsed at `now` without an answer kept); `pieces` as `decodeText` takes them.
   */
  decodeHolder(item: Item, pieces: ReadonlyMap<string, Item>, now: number): Exclude<IdempotencyClaim, { outcome: 'claimed' }> {
    const fingerprint = String(item.fingerprint);
    const response = item.status === 'done' ? decodeText(item, idempotencyItem.responseText, pieces) : null;
    if (response !== null) {
      return { outcome: 'done', fingerprint, response: decodeStoredJson(response) as unknown as StoredResponse };
    }
    const lockedUntil = Number(item.lockedUntil);
    return { outcome: item.status === 'pending' && lockedUntil >= now ? 'in_progress' : 'unfinished', fingerprint, lockedUntil };
  },
};
