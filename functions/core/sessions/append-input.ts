import type { AllowedAgents } from '../agents/acting-agent.js';
import type { Json } from '../json/json.js';
import type { Caller } from '../model/fields.js';
import type { NodeRecord, SessionMeta, SessionScope, Tip, VersionRecord } from '../model/model.js';
import type { AnswerKeeper } from '../model/ports.js';
import type { SchemaSource, VersionPrecondition, WriteTarget, WriteTargets } from '../write/write-target.js';
import type { IncomingMessage } from './chain.js';
import type { NodeView } from './session-views.js';

// What an append (a turn: messages, and with them the new head's state) takes and answers, and
// what the new head's state is computed from (head-state.ts): shared by the tree's service, the
// state's, the copier and the handler, none of which owns it.

/** The new head's state an append writes with its messages: a merge patch, or a whole value. */
export type StateChange = { replace: false; value: Json } | { replace: true; value: Json };

export interface AppendInput {
  messages: IncomingMessage[];
  parentId?: string;
  /** The new head's state, written in the same change (API.md section 3). */
  state?: StateChange;
  /** The version the parent's state must be at (`If-Match`). */
  ifMatch?: VersionPrecondition;
  /**
   * Never from a request: the new version records these instead of the append's own (a copy,
   * session-copy.ts, keeps each version's agent config, cause and author as the source has them).
   */
  recordedAs?: RecordedAs;
  /**
   * Never from a request: the messages' ids are in no node of the session, so the append does
   * not look them up (a copy's: its session is its own until it opens, and a tree's ids are
   * distinct). A copy of 11,000 nodes read 11,000 index keys that could only be absent, about a
   * fifth of its time on DynamoDB Local.
   */
  newIds?: true;
  /**
   * Never from a request: the append is a copy's last change, and opens its session
   * (SessionScope.copy; ports.ts, `TipChange.opensCopy`): the change carries no mark, and its
   * transaction takes the session item's mark and TTL off. So the index of its nodes is owed by
   * the session's next write, as any append's, and not paid by an opening after it.
   */
  opensCopy?: true;
  /** Under an `Idempotency-Key`: the answer to keep in the change the append makes (ports.ts, TipChange.kept). */
  keep?: AnswerKeeper<AppendResult>;
}

/** What a copied version records as its source did. */
export interface RecordedAs {
  agent: Json;
  cause: VersionRecord['cause'];
  author: string | null;
}

/** `201` of an append; with a state, also the head's version and state after it. */
export interface AppendResult {
  nodes: NodeView[];
  head: string;
  version?: number;
  state?: Json;
  changed?: boolean;
}

/** What the new head's state of an append is computed from. */
export interface HeadStateInput {
  targets: WriteTargets;
  schemas: SchemaSource;
  scope: SessionScope;
  tip: Tip;
  head: NodeRecord;
  change: StateChange;
  caller: Caller;
  at: string;
  recordedAs?: RecordedAs;
  /** The session item, when the append read it (a first write of a life): not read again. */
  meta?: SessionMeta | null;
}

/** The new head's state, where it is written, and the version that records it (none when nothing changes). */
export interface HeadState {
  target: WriteTarget;
  state: Json;
  version: VersionRecord | undefined;
}

/**
 * Who makes a write, for what a key limited to agents may do (API.md section 7): the key's
 * agents (`allowed`, null when not limited) and the agent it acts as (`caller`).
 */
export interface KeyAccess {
  allowed: AllowedAgents;
  caller: Caller;
}
