import { type IncomingMessage, lookupsOf, planChain } from './chain.js';
import { AgentStateError } from './errors.js';
import type { Caller } from './fields.js';
import { newId, ROOT_NODE } from './ids.js';
import { type Json, type JsonObject, jsonEqual } from './json.js';
import { applyJsonPatch, type PatchOperation } from './json-patch.js';
import { mergePatch } from './merge-patch.js';
import type { MessagePath } from './message-path.js';
import type { Page, SessionMeta, SessionScope, Tip, VersionRecord } from './model.js';
import type { SessionListOptions, SessionStore } from './ports.js';
import { messagePreview } from './preview.js';
import { othersWaiting, QueueBehindOthers, type RetryPolicy, retryOnStaleTip } from './retry.js';
import { openCursor, sealCursor } from './sealing.js';
import {
  emptyState,
  type NodeView,
  nodeView,
  type SessionView,
  type StateView,
  stateView,
  type TreeNodeView,
  type VersionView,
  versionView,
  type WriteResult,
} from './session-views.js';
import { pointerOf, rootNode, versionAt } from './tree.js';
import {
  checkedWrite,
  checkIfMatch,
  nodeNotFound,
  type SchemaSource,
  sessionNotFound,
  storedState,
  type VersionPrecondition,
  visibleState,
  WriteTargets,
} from './write-target.js';

export type { IncomingMessage } from './chain.js';
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
}

export type { SchemaSource } from './write-target.js';

export interface ServiceOptions {
  now?: () => Date;
  retry?: Partial<RetryPolicy>;
  /** Where typed fields come from; without it every state is untyped. */
  schemas?: SchemaSource;
}

/**
 * Sessions, the message tree, state and its versions (API.md sections 2–5), on top of a
 * `SessionStore`. Pure orchestration: every decision is made here, every byte is stored there.
 */
export class SessionService {
  private readonly now: () => Date;
  private readonly retry: Partial<RetryPolicy>;
  private readonly schemas: SchemaSource;
  private readonly targets: WriteTargets;

  constructor(
    private readonly store: SessionStore,
    options: ServiceOptions = {},
  ) {
    this.now = options.now ?? (() => new Date());
    this.retry = options.retry ?? {};
    this.schemas = options.schemas ?? (async () => null);
    this.targets = new WriteTargets(store, this.schemas);
  }

  // ---- sessions -------------------------------------------------------------------------

  async createSession(
    tenant: string,
    input: { sessionId?: string; agentId?: string | null; userId?: string | null; metadata?: JsonObject | null },
  ): Promise<SessionView> {
    const at = this.now().toISOString();
    const meta: SessionMeta = {
      sessionId: input.sessionId ?? newId(),
      agentId: input.agentId ?? null,
      userId: input.userId ?? null,
      metadata: input.metadata ?? null,
      createdAt: at,
      updatedAt: at,
    };
    // Retried while a delete of the same id is still erasing it (StaleTipError).
    await retryOnStaleTip(this.retry, () => this.store.createSession({ tenant, sessionId: meta.sessionId }, meta));
    return { ...meta, head: ROOT_NODE, version: 0 };
  }

  async getSession(scope: SessionScope): Promise<SessionView> {
    const [meta, tip] = await Promise.all([this.store.getMeta(scope), this.store.readTip(scope, { withState: false })]);
    if (!meta || tip.kind === 'closing') throw sessionNotFound(scope);
    return { ...meta, head: tip.head, version: tip.version };
  }

  /** Most recently active first; with `prefix`, only ids that start with it (pages may be sparse). */
  listSessions(tenant: string, options: SessionListOptions): Promise<Page<SessionMeta>> {
    return this.store.listSessions(tenant, options);
  }

  async deleteSession(scope: SessionScope): Promise<void> {
    if (!(await this.store.deleteSession(scope))) throw sessionNotFound(scope);
  }

  // ---- state ----------------------------------------------------------------------------

  async readState(scope: SessionScope, at: { node?: string; version?: number }, caller: Caller = null): Promise<StateView> {
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
    const target = await this.targets.resolve(scope, at.node, { forRead: true });
    if (!target) return emptyState(scope, at.node ?? ROOT_NODE);
    const schema = await this.schemas(scope.tenant, target.tip.agentId);
    return stateView(scope, target.nodeId, target.current, schema, caller);
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
    return retryOnStaleTip(this.retry, async (attempt) => {
      const target = await this.targets.forWrite(scope, options.node);
      const { tip, nodeId, pointer, schema, sessionAgentId, sessionUserId } = target;
      checkIfMatch(target, options.ifMatch);
      // A blind write joins the writers already waiting for this session rather than jump them.
      if (options.ifMatch === undefined && othersWaiting(tip, attempt, this.now())) throw new QueueBehindOthers();
      const stored = storedState(target);
      const nextState = checkedWrite(target, caller, next);
      const answer = (state: Json) => visibleState(schema, caller, state);
      if (jsonEqual(nextState, stored)) {
        return { sessionId: scope.sessionId, node: nodeId, version: pointer, prevVersion: pointer, state: answer(stored), changed: false };
      }
      const { version, change } = versionAt(target, { state: nextState, at: this.now().toISOString(), cause, author: caller });
      await this.store.commit(scope, {
        ...change,
        // A first write creates the session item in the same transaction. After that a state
        // write is one conditional PutItem: the session's activity (`updatedAt`, the list
        // order) is moved by the change hook, off the request's path (API.md section 2 lets
        // it trail the write by a moment).
        touchSessionAt: tip.kind === 'empty' ? version.createdAt : undefined,
        mayCreateSession: tip.kind === 'empty',
        sessionAgentId,
        sessionUserId,
        contended: attempt.raced,
      });
      return {
        sessionId: scope.sessionId,
        node: nodeId,
        version: version.version,
        prevVersion: pointer,
        state: answer(nextState),
        changed: true,
      };
    });
  }

  // ---- message tree ---------------------------------------------------------------------

  /**
   * Appends `messages` as a chain under `parentId` (the head by default) and moves the head
   * to the last one. Leading messages that already exist under the same parent are taken as
   * already there, so a client can resend a conversation prefix safely.
   */
  async appendMessages(
    scope: SessionScope,
    input: { messages: IncomingMessage[]; parentId?: string },
  ): Promise<{ nodes: NodeView[]; head: string }> {
    const lookups = lookupsOf(input.messages, input.parentId);

    return retryOnStaleTip(this.retry, async () => {
      const { tip, nodes: known } = await this.store.readTipWithNodes(scope, lookups, { withState: false });
      const parent = this.targets.nodeById(tip, known, input.parentId ?? tip.head);

      const at = this.now().toISOString();
      const { chain, created, last, anchor } = planChain({ parent, messages: input.messages, known, tip, at });
      const session = await this.targets.sessionOf(scope, tip);

      if (created.length > 0 || last.id !== tip.head) {
        await this.store.commit(scope, {
          basedOn: tip,
          head: { id: last.id, version: pointerOf(last, tip), depth: last.depth, place: last.place },
          newNodes: created,
          parent: anchor,
          touchSessionAt: at,
          mayCreateSession: tip.kind === 'empty',
          sessionAgentId: session.agentId,
          sessionUserId: session.userId,
        });
      }
      // Pointers as of the tip read: a reused node that was the head has its pointer there.
      return { nodes: chain.map((node) => nodeView(node, tip)), head: last.id };
    });
  }

  /** Moves the head to an existing node: the way a client switches branch. */
  async switchHead(scope: SessionScope, nodeId: string): Promise<{ head: string }> {
    return retryOnStaleTip(this.retry, async () => {
      const { tip, nodes } = await this.store.readTipWithNodes(scope, [nodeId], { withState: false });
      await this.targets.requireSession(scope, tip);
      const target = nodes.get(nodeId) ?? (nodeId === ROOT_NODE ? rootNode('') : null);
      if (!target) throw nodeNotFound(nodeId);
      if (target.id === tip.head) return { head: tip.head };
      await this.store.commit(scope, {
        basedOn: tip,
        head: { id: target.id, version: target.stateVersion, depth: target.depth, place: target.place },
        newNodes: [],
        touchSessionAt: this.now().toISOString(),
        mayCreateSession: false,
      });
      return { head: target.id };
    });
  }

  async getNode(scope: SessionScope, nodeId: string): Promise<NodeView> {
    const isRoot = nodeId === ROOT_NODE;
    const [{ tip, nodes }, meta] = await Promise.all([
      this.store.readTipWithNodes(scope, [nodeId], { withState: false }),
      // The root is as old as its session; its index, if any, only holds its pointer.
      isRoot ? this.store.getMeta(scope) : Promise.resolve(null),
    ]);
    const node = nodes.get(nodeId);
    if (isRoot) {
      if (!meta && !node && tip.kind === 'empty') throw sessionNotFound(scope);
      return nodeView({ ...(node ?? rootNode('')), createdAt: meta?.createdAt ?? '' }, tip);
    }
    if (node) return nodeView(node, tip);
    await this.targets.requireSession(scope, tip);
    throw nodeNotFound(nodeId);
  }

  /**
   * The head and every node, without bodies. With `preview`, each node also carries a short
   * snippet of its message (`messagePreview`), which its index keeps: the same requests.
   */
  async getTree(scope: SessionScope, options: { preview?: boolean } = {}): Promise<{ head: string; nodes: TreeNodeView[] }> {
    const preview = options.preview ?? false;
    const [{ tip, nodes }, meta] = await Promise.all([this.store.readTree(scope), this.store.getMeta(scope)]);
    if (!meta && nodes.length === 0 && tip.kind === 'empty') throw sessionNotFound(scope);
    const all = nodes.some((node) => node.id === ROOT_NODE) ? nodes : [rootNode(meta?.createdAt ?? ''), ...nodes];
    all.sort((a, b) => a.depth - b.depth || a.createdAt.localeCompare(b.createdAt) || a.id.localeCompare(b.id));
    return {
      head: tip.head,
      nodes: all.map((node) => ({
        id: node.id,
        parentId: node.parentId,
        depth: node.depth,
        role: node.role,
        stateVersion: pointerOf(node, tip),
        ...(preview ? { preview: node.preview !== undefined ? node.preview : messagePreview(node.message) } : {}),
      })),
    };
  }

  /**
   * The path root→node (the head by default), oldest first: the tip (with the newest changes,
   * or with the node's index), then the ranges of the log the path runs through, in parallel.
   */
  async getPath(scope: SessionScope, nodeId?: string): Promise<MessagePath> {
    const { tip, nodes } =
      nodeId === undefined
        ? { tip: await this.store.readTip(scope, { withState: false, recent: true }), nodes: new Map() }
        : await this.store.readTipWithNodes(scope, [nodeId], { withState: false });
    const targetId = nodeId ?? tip.head;
    if (targetId === ROOT_NODE) {
      await this.targets.requireSession(scope, tip);
      return { messages: [], ancestry: [ROOT_NODE] };
    }
    const target = nodes.get(targetId) ?? (targetId === tip.head ? tip.headNode : undefined);
    if (!target) {
      await this.targets.requireSession(scope, tip);
      throw nodeNotFound(targetId);
    }
    const { messages, ancestry } = await this.store.readPath(scope, tip, target);
    return { messages, ancestry };
  }

  // ---- versions -------------------------------------------------------------------------

  async getVersion(scope: SessionScope, version: number, caller: Caller = null): Promise<VersionView> {
    const record = await this.store.getVersion(scope, version);
    if (record) return versionView(record, await this.schemas(scope.tenant, record.sessionAgentId ?? null), caller);
    if (!(await this.targets.sessionExists(scope))) throw sessionNotFound(scope);
    throw new AgentStateError('version_not_found', `version ${version} does not exist`, { version });
  }

  /**
   * History, newest first. With `node`, only the lineage of that node's current state: its
   * version, that version's `prevVersion`, and so on back to the first.
   */
  async listVersions(
    scope: SessionScope,
    options: { node?: string; limit: number; cursor?: string },
    caller: Caller = null,
  ): Promise<Page<VersionView>> {
    // Every version carries the session's agent: the schema is known from the records read.
    const schemaOf = (records: VersionRecord[]) => this.schemas(scope.tenant, records[0]?.sessionAgentId ?? null);
    if (options.node === undefined) {
      const page = await this.store.listVersions(scope, { limit: options.limit, cursor: options.cursor });
      if (page.items.length === 0 && !options.cursor && !(await this.targets.sessionExists(scope))) {
        throw sessionNotFound(scope);
      }
      const schema = await schemaOf(page.items);
      return { items: page.items.map((record) => versionView(record, schema, caller)), ...(page.next ? { next: page.next } : {}) };
    }

    let start: number;
    let tip: Tip | undefined;
    if (options.cursor !== undefined) {
      start = decodeLineageCursor(options.cursor, scope, options.node);
    } else {
      const target = await this.targets.resolve(scope, options.node, { forRead: false, withState: false });
      if (!target || (await this.targets.sessionMissing(scope, target.tip))) throw sessionNotFound(scope);
      start = target.pointer;
      tip = target.tip;
    }
    const records: VersionRecord[] = [];
    if (start > 0) {
      const first = await this.store.getVersion(scope, start, tip);
      if (!first) throw new AgentStateError('invalid_request', 'cursor does not name a version of this session');
      records.push(first, ...(await this.store.getLineage(scope, first, options.limit - 1)));
    }
    const last = records[records.length - 1];
    const next = last && last.prevVersion > 0 ? encodeLineageCursor(last.prevVersion, scope, options.node) : undefined;
    const schema = await schemaOf(records);
    return { items: records.map((record) => versionView(record, schema, caller)), ...(next ? { next } : {}) };
  }
}

// ---- lineage cursors --------------------------------------------------------------------

/** The list a lineage cursor belongs to: the lineage of one node of one session of one tenant. */
function lineageList(scope: SessionScope, node: string): string {
  return JSON.stringify(['lineage', scope.tenant, scope.sessionId, node]);
}

/** A lineage cursor: the next version, sealed for its list (sealing.ts). */
function encodeLineageCursor(version: number, scope: SessionScope, node: string): string {
  return sealCursor(version, lineageList(scope, node));
}

function decodeLineageCursor(cursor: string, scope: SessionScope, node: string): number {
  const version = openCursor(cursor, lineageList(scope, node));
  if (typeof version === 'number' && Number.isSafeInteger(version) && version > 0) return version;
  throw new AgentStateError('invalid_request', 'cursor is not valid for this list', { field: 'cursor' });
}
