import type { AllowedAgents } from '../agents/acting-agent.js';
import { encodedSize, type Json, jsonEqual } from '../json/json.js';
import { applyJsonPatch, type PatchOperation } from '../json/json-patch.js';
import { mergePatch } from '../json/merge-patch.js';
import { AgentStateError } from '../kernel/errors.js';
import { ROOT_NODE } from '../kernel/ids.js';
import { openCursor, sealCursor } from '../kernel/sealing.js';
import type { Caller } from '../model/fields.js';
import { ANSWER_ITEMS_BYTES } from '../model/limits.js';
import type { DecisionSummary, NodeNotes, Page, SessionScope, VersionRecord } from '../model/model.js';
import { type AnswerKeeper, StaleTipError } from '../model/ports.js';
import { versionAt } from '../write/next-version.js';
import { type AttemptContext, othersWaiting, QueueBehindOthers, retryOnStaleTip } from '../write/write-retry.js';
import {
  checkedWrite,
  checkIfMatch,
  pointedVersion,
  sessionNotFound,
  storedState,
  type VersionPrecondition,
  visibleState,
} from '../write/write-target.js';
import { notesWithin, sealNotesCursor } from './note-pages.js';
import { SessionTreeService } from './session-tree-service.js';
import { emptyState, type StateView, stateView, type VersionView, versionView, type WriteResult } from './session-views.js';

export type { NodeView, SessionView, StateView, TreeNodeView, VersionView, WriteResult } from './session-views.js';

/** Where a state write lands and who makes it; both `patchState` and `replaceState` take these. */
export interface StateWriteOptions {
  /** Target node; the head when absent. */
  node?: string;
  /** The version(s) the caller expects the target to be at (`If-Match`). */
  ifMatch?: VersionPrecondition;
  /**
   * The acting agent (`X-Agent-Id`): recorded as the version's author, and with typed fields
   * the write is computed on its view. Null or absent: no agent, the whole state.
   */
  caller?: Caller;
  /** The agents of a key limited to some (null or absent: not limited): it writes only in its conversations. */
  allowed?: AllowedAgents;
  /** Under an `Idempotency-Key`: the answer to keep in the version the write records (ports.ts, TipChange.kept). */
  keep?: AnswerKeeper<WriteResult>;
}

/**
 * Sessions, the message tree, state and its versions (API.md sections 2–5), on top of a
 * `SessionStore`. Pure orchestration: every decision is made here, every byte is stored there.
 * The sessions and the tree are SessionTreeService's (session-tree-service.ts); what this
 * class adds is the state group's.
 */
export class SessionService extends SessionTreeService {
  // ---- state ----------------------------------------------------------------------------

  async readState(
    scope: SessionScope,
    at: { node?: string; version?: number; notes?: boolean },
    caller: Caller = null,
  ): Promise<StateView> {
    if (at.version !== undefined) {
      const record = at.version === 0 ? null : await this.store.getVersion(scope, at.version);
      if (!record) {
        if (!(await this.targets.sessionExists(scope))) return emptyState(scope, at.node ?? ROOT_NODE);
        if (at.version === 0) return emptyState(scope, ROOT_NODE);
        throw new AgentStateError('version_not_found', `version ${at.version} does not exist`, { version: at.version });
      }
      // Every version carries the session's agent, so time travel needs no other read.
      const schema = await this.schemas(scope.tenant, record.sessionAgentId ?? null);
      return stateView(scope, record.node, record, schema, caller);
    }
    // A node's notes are read beside it when it is named (the head's once the tip said which it is).
    const window = { bytes: ANSWER_ITEMS_BYTES };
    const [target, named] = await Promise.all([
      // The tip read tells, at no cost, whether a session with nothing written exists: whether a
      // note may be there (LangGraph's first read of a new thread), or whether a named node unknown
      // to the tip is a session's that does not exist, without reading the session item.
      this.targets.resolve(scope, at.node, { forRead: true, ...(at.notes || at.node !== undefined ? { sessionItem: true } : {}) }),
      at.notes && at.node !== undefined ? this.store.readNotes(scope, at.node, window) : undefined,
    ]);
    if (!target) return { ...emptyState(scope, at.node ?? ROOT_NODE), ...(at.notes ? { notes: {} } : {}) };
    const schema = await this.schemas(scope.tenant, target.tip.agentId);
    const view = stateView(scope, target.nodeId, target.current, schema, caller);
    if (!at.notes) return view;
    // A session that does not exist, or reads as unknown (being deleted, or expired), shows no
    // notes, as it shows no state: none are read.
    const unknown = target.tip.kind === 'closing' || (target.tip.kind === 'empty' && target.tip.absent === true);
    const read = unknown ? { records: [], cut: false } : (named ?? (await this.store.readNotes(scope, target.nodeId, window)));
    // The notes that fit beside the state in one answer; `notesNext` goes on with the rest.
    const part = notesWithin(read, target.tip.incarnation, ANSWER_ITEMS_BYTES - encodedSize(view), false);
    return {
      ...view,
      notes: part.notes[target.nodeId] ?? {},
      ...(part.rest ? { notesNext: sealNotesCursor(part.rest, scope, [target.nodeId]) } : {}),
    };
  }

  /** Applies `patch` (RFC 7396 JSON merge patch) to the state at the target node (`PATCH`). */
  patchState(scope: SessionScope, patch: Json, options: StateWriteOptions = {}): Promise<WriteResult> {
    return this.writeState(scope, options, 'patch', (current) => mergePatch(current, patch));
  }

  /** Applies RFC 6902 operations, in order and all or nothing, to the state at the target node (`PATCH`). */
  jsonPatchState(scope: SessionScope, operations: readonly PatchOperation[], options: StateWriteOptions = {}): Promise<WriteResult> {
    return this.writeState(scope, options, 'patch', (current) => applyJsonPatch(current, operations));
  }

  /** Replaces the state at the target node with `state` (`PUT`). */
  replaceState(scope: SessionScope, state: Json, options: StateWriteOptions = {}): Promise<WriteResult> {
    return this.writeState(scope, options, 'replace', () => state);
  }

  /**
   * Records a new version at the target node unless the result equals the current state.
   * A lost race re-reads and recomputes `next`, so no update is ever lost; with `ifMatch`, a
   * moved target answers `412 version_mismatch` instead. With typed fields, the write is
   * computed on the caller's view and merged back, so fields outside that view are never touched.
   */
  private writeState(
    scope: SessionScope,
    options: StateWriteOptions,
    cause: 'patch' | 'replace',
    next: (current: Json) => Json,
  ): Promise<WriteResult> {
    const caller = options.caller ?? null;
    /** Whether the attempt's tip is a replica's that no put has confirmed yet. */
    let unconfirmed = false;
    const once = async (attempt: AttemptContext, fromReplica: boolean): Promise<WriteResult> => {
      const target = await this.targets.forWrite(scope, options.node, fromReplica);
      unconfirmed = target.tip.replica === true;
      const { tip, nodeId, pointer, schema, sessionAgentId, sessionUserId, sessionListed, sessionLifetime, sessionTouchedAt } = target;
      await this.checkKeyAccess(scope.tenant, sessionAgentId, { allowed: options.allowed, caller }, 'write the state of');
      checkIfMatch(target, options.ifMatch);
      // A blind write joins the writers already waiting for this session rather than jump them.
      if (options.ifMatch === undefined && othersWaiting(tip, attempt, this.now())) throw new QueueBehindOthers();
      const stored = storedState(target);
      const nextState = checkedWrite(target, caller, next);
      const answer = (state: Json) => visibleState(schema, caller, state);
      if (jsonEqual(nextState, stored)) {
        return {
          sessionId: scope.sessionId,
          node: nodeId,
          version: pointer,
          prevVersion: pointer,
          state: answer(stored),
          changed: false,
        };
      }
      const { version, change } = versionAt(target, { state: nextState, at: this.now().toISOString(), cause, author: caller });
      const result: WriteResult = {
        sessionId: scope.sessionId,
        node: nodeId,
        version: version.version,
        prevVersion: pointer,
        state: answer(nextState),
        changed: true,
      };
      const kept = options.keep?.(result);
      await this.store.commit(scope, {
        ...change,
        ...(kept ? { kept } : {}),
        // A first write creates the session item in the same transaction. After that a state
        // write is one conditional PutItem: the session's activity (`updatedAt`, the list
        // order) is moved by the change hook, off the request's path (API.md section 2 lets
        // it trail the write by a moment).
        touchSessionAt: tip.kind === 'empty' ? version.createdAt : undefined,
        mayCreateSession: tip.kind === 'empty',
        sessionAgentId,
        sessionUserId,
        ...(sessionListed === undefined ? {} : { sessionListed }),
        ...(sessionLifetime ? { lifetime: sessionLifetime } : {}),
        ...(sessionTouchedAt ? { sessionTouchedAt } : {}),
        contended: attempt.raced || attempt.queued === true,
      });
      return result;
    };
    return retryOnStaleTip(
      this.retry,
      async (attempt) => {
        // A writer's first look is at a replica (half the read units), which its put confirms: it
        // claims the place after the tip it read, so it lands only if that tip was the newest.
        // An answer without that put may be the replica's (a 412, a "no change", a 404): the
        // write is then done again from a consistent read, as before.
        if (attempt.attempt === 1 && !attempt.queued) {
          unconfirmed = false;
          const answered = await once(attempt, true).catch((error: unknown) => {
            if (unconfirmed && isRedoneConsistently(error)) return undefined;
            throw error;
          });
          if (answered && (answered.changed || !unconfirmed)) return answered;
        }
        return once(attempt, false);
      },
      undefined,
      this.turnsOf(scope, options.ifMatch !== undefined),
    );
  }

  // ---- versions -------------------------------------------------------------------------

  async getVersion(scope: SessionScope, version: number, caller: Caller = null): Promise<VersionView> {
    const record = await this.store.getVersion(scope, version);
    if (record) return versionView(record, await this.schemas(scope.tenant, record.sessionAgentId ?? null), caller);
    if (!(await this.targets.sessionExists(scope))) throw sessionNotFound(scope);
    throw new AgentStateError('version_not_found', `version ${version} does not exist`, { version });
  }

  /**
   * The session's decisions, newest first (API.md section 13): who decided each, and how the
   * decision got there. No state is in it, so it is the same for every caller.
   */
  async listDecisions(scope: SessionScope, options: { limit: number; cursor?: string }): Promise<Page<DecisionSummary>> {
    const page = await this.store.listDecisions(scope, options);
    if (page.items.length === 0 && !options.cursor && !(await this.targets.sessionExists(scope))) throw sessionNotFound(scope);
    return page;
  }

  /**
   * History, newest first. With `node`, only the lineage of that node's current state: its
   * version, that version's `prevVersion`, and so on back to the first. Versions retention
   * pruned are left out, and the page says where history was cut (`pruned: {before}`).
   */
  async listVersions(
    scope: SessionScope,
    options: { node?: string; limit: number; cursor?: string; notesOf?: readonly string[] },
    caller: Caller = null,
  ): Promise<VersionPage> {
    // Every version carries the session's agent: the schema is known from the records read.
    const schemaOf = (records: VersionRecord[]) => this.schemas(scope.tenant, records[0]?.sessionAgentId ?? null);
    if (options.node === undefined) {
      // The named nodes' notes are read beside the page; the page says which life is the session's.
      const [page, noted] = await Promise.all([
        this.store.listVersions(scope, { limit: options.limit, cursor: options.cursor, bytes: ANSWER_ITEMS_BYTES }),
        options.notesOf === undefined ? undefined : this.store.readNotesOf(scope, options.notesOf, { bytes: ANSWER_ITEMS_BYTES }),
      ]);
      if (page.items.length === 0 && !options.cursor && !(await this.targets.sessionExists(scope))) {
        throw sessionNotFound(scope);
      }
      const schema = await schemaOf(page.items);
      const listed = versionPage(
        page.items.map((record) => versionView(record, schema, caller)),
        page.next,
        page.prunedBefore,
      );
      if (noted === undefined || options.notesOf === undefined) return listed;
      if (page.incarnation === undefined) return { ...listed, notes: {} };
      // The named nodes' notes that fit beside the page in one answer; `notesNext` goes on with the rest.
      const part = notesWithin(noted, page.incarnation, ANSWER_ITEMS_BYTES - encodedSize(listed.items), false);
      return { ...listed, notes: part.notes, ...(part.rest ? { notesNext: sealNotesCursor(part.rest, scope, options.notesOf) } : {}) };
    }

    // A lineage page after the first goes on below the last version the one before listed.
    const records: VersionRecord[] = [];
    let prunedBefore: number | undefined;
    let from: VersionRecord | null;
    if (options.cursor !== undefined) {
      const after = decodeLineageCursor(options.cursor, scope, options.node);
      from = await this.store.getVersion(scope, after).catch((error: unknown) => {
        // Pruned since the page before was read: history ends there.
        if (error instanceof AgentStateError && error.code === 'version_pruned') return null;
        throw error;
      });
      if (!from) return versionPage([], undefined, after);
    } else {
      from = await this.lineageStart(scope, options.node);
      if (from) records.push(from);
    }
    let filled = false;
    if (from && records.length < options.limit) {
      // A lineage page ends by bytes too, as a page of the session's versions does (store's listVersions).
      const left = ANSWER_ITEMS_BYTES - records.reduce((sum, record) => sum + encodedSize(record.state) + encodedSize(record.agent), 0);
      const lineage = await this.store.getLineage(scope, from, options.limit - records.length, {
        left,
        atLeastOne: records.length === 0,
      });
      records.push(...lineage.versions);
      prunedBefore = lineage.prunedBefore;
      filled = lineage.filled === true;
    }
    const last = records.at(-1);
    // More while the last one listed has a previous version (a cut found first ends the list).
    const next =
      last && last.prevVersion > 0 && (records.length === options.limit || filled)
        ? encodeLineageCursor(last.version, scope, options.node)
        : undefined;
    const schema = await schemaOf(records);
    return versionPage(
      records.map((record) => versionView(record, schema, caller)),
      next,
      prunedBefore,
    );
  }

  /** The version a node points at, where its lineage starts (read again if it was pruned under the read). */
  private async lineageStart(scope: SessionScope, node: string): Promise<VersionRecord | null> {
    for (let attempt = 1; ; attempt++) {
      const target = await this.targets.resolve(scope, node, { forRead: false, withState: false });
      if (!target || (await this.targets.sessionMissing(scope, target.tip))) throw sessionNotFound(scope);
      if (target.pointer === 0) return null;
      try {
        return await pointedVersion(this.store, scope, target.pointer, target.tip);
      } catch (error) {
        if (!(error instanceof StaleTipError) || attempt >= 3) throw error;
      }
    }
  }
}

/** A page of versions, with where history was cut when it was. */
export interface VersionPage extends Page<VersionView> {
  prunedBefore?: number;
  /** With `notesOf`: the notes of those of the named nodes that have any, by node. */
  notes?: Record<string, NodeNotes>;
  /** With `notesOf`, when more notes are left than the answer carries: where `GET …/notes` goes on. */
  notesNext?: string;
}

function versionPage(items: VersionView[], next: string | undefined, prunedBefore: number | undefined): VersionPage {
  return { items, ...(next ? { next } : {}), ...(prunedBefore === undefined ? {} : { prunedBefore }) };
}

// ---- lineage cursors --------------------------------------------------------------------

/** The list a lineage cursor belongs to: the lineage of one node of one session of one tenant. */
function lineageList(scope: SessionScope, node: string): string {
  // `after`: a cursor names the last version listed (before retention, the next one to list).
  return JSON.stringify(['lineage-after', scope.tenant, scope.sessionId, node]);
}

/** A lineage cursor: the last version listed, sealed for its list (sealing.ts). */
function encodeLineageCursor(version: number, scope: SessionScope, node: string): string {
  return sealCursor(version, lineageList(scope, node));
}

function decodeLineageCursor(cursor: string, scope: SessionScope, node: string): number {
  const version = openCursor(cursor, lineageList(scope, node));
  if (typeof version === 'number' && Number.isSafeInteger(version) && version > 0) return version;
  throw new AgentStateError('invalid_request', 'cursor is not valid for this list', { field: 'cursor' });
}

/**
 * What a state write read from a replica does again from a consistent read: an answer its put did
 * not confirm. A put that lost its place (a lost race, or a replica behind) is retried as any lost
 * race is (write-retry.ts): the next attempt reads consistently, and the change it makes says it
 * raced, so that the writers behind it take turns.
 */
function isRedoneConsistently(error: unknown): boolean {
  return error instanceof AgentStateError && error.status < 500 && error.status !== 429;
}
