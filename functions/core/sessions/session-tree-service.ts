import type { AllowedAgents } from '../agents/acting-agent.js';
import { requireMayWorkIn } from '../agents/agent-access.js';
import type { Json, JsonObject } from '../json/json.js';
import { mergePatch } from '../json/merge-patch.js';
import { AgentStateError } from '../kernel/errors.js';
import { newId, ROOT_NODE } from '../kernel/ids.js';
import {
  checkLifetimeSettings,
  expiryOf,
  hasExpired,
  type LifetimeSettings,
  layerOf,
  NO_LIFETIME,
  resolveLifetime,
} from '../model/lifetime.js';
import { ANSWER_ITEMS_BYTES, checkMetadata, checkNoteSize } from '../model/limits.js';
import type { MessagePath } from '../model/message-path.js';
import type { NodeNotes, NoteResult, Page, SessionMeta, SessionScope } from '../model/model.js';
import type { QueueTicket, SessionListOptions, SessionStore, WriteQueue } from '../model/ports.js';
import { emptyTip, pointerOf, rootNode } from '../model/tree.js';
import { type HeadMove, requireMayMoveHeadTo } from '../write/head-move.js';
import { type AttemptContext, othersWaiting, QueueBehindOthers, type RetryPolicy, retryOnStaleTip } from '../write/write-retry.js';
import { checkIfMatch, liveMeta, nodeNotFound, type SchemaSource, sessionNotFound, WriteTargets } from '../write/write-target.js';
import { type AppendParts, appendChange, type HeadStateAt } from './append-change.js';
import type { AppendInput, AppendResult, HeadState, HeadStateInput, KeyAccess } from './append-input.js';
import { lookupsOf, planChain, suppliedIds } from './chain.js';
import { notesWithin, openNotesCursor, sealNotesCursor } from './note-pages.js';
import { checkListedMetadata, checkRelisting } from './session-lists.js';
import {
  type NodeView,
  nodeView,
  type SessionSummaryView,
  type SessionView,
  sessionSummaryView,
  sessionView,
  type TreeNodeView,
} from './session-views.js';
import { type NodePageQuery, type NodePageView, readNodePage, readTree } from './tree-reads.js';

/**
 * What `PATCH /v1/sessions/{sid}` may change (API.md sections 2 and 12): the metadata
 * (merge-patched), the user and the agent (null: none), and the lifetime.
 */
export interface SessionUpdate extends LifetimeSettings {
  metadata?: JsonObject | null;
  userId?: string | null;
  agentId?: string | null;
}

export interface ServiceOptions {
  now?: () => Date;
  retry?: Partial<RetryPolicy>;
  /** Where typed fields come from; without it every state is untyped. */
  schemas?: SchemaSource;
  /**
   * The tenant's agents (who is below whom), for the sessions a key limited to agents may work
   * in, and the lifetime each gives its new sessions.
   */
  agents?: (tenant: string) => Promise<readonly { agentId: string; parentId: string | null; lifetime?: LifetimeSettings | null }[]>;
  /** Writes the new head's state of an append that carries one (head-state.ts); without it, such an append is not taken. */
  headState?: (input: HeadStateInput) => Promise<HeadState>;
  /** Where blind writes to the session's log that lost a race wait their turn (write-retry.ts); without it they back off and retry. */
  queue?: WriteQueue;
}

/**
 * Sessions and their message tree (API.md sections 2 and 3), on top of a `SessionStore`:
 * what the sessions and tree groups use. SessionService (session-service.ts) adds the state
 * and its versions, which only the state group writes and reads, so that those two groups'
 * bundles carry none of it (JSON Patch, merge patch, typed-field writes, versions).
 */
export class SessionTreeService {
  protected readonly now: () => Date;
  protected readonly retry: Partial<RetryPolicy>;
  protected readonly schemas: SchemaSource;
  protected readonly targets: WriteTargets;
  protected readonly agents: NonNullable<ServiceOptions['agents']>;
  private readonly headState: ServiceOptions['headState'];
  protected readonly queue: WriteQueue | undefined;

  constructor(
    protected readonly store: SessionStore,
    options: ServiceOptions = {},
  ) {
    this.now = options.now ?? (() => new Date());
    this.retry = options.retry ?? {};
    this.schemas = options.schemas ?? (async () => null);
    this.agents = options.agents ?? (async () => []);
    this.headState = options.headState;
    this.queue = options.queue;
    this.targets = new WriteTargets(store, this.schemas, this.now);
  }

  // ---- sessions -------------------------------------------------------------------------

  async createSession(
    tenant: string,
    input: {
      sessionId?: string;
      agentId?: string | null;
      userId?: string | null;
      metadata?: JsonObject | null;
      /** Made by this copy, which opens it once written (SessionScope.copy, session-copy.ts). */
      copy?: string;
    },
    access?: KeyAccess,
  ): Promise<SessionView> {
    // A limited key opens conversations only where it may work in them.
    await this.checkKeyAccess(tenant, input.agentId ?? null, access, 'create');
    const at = this.now().toISOString();
    const meta: SessionMeta = {
      sessionId: input.sessionId ?? newId(),
      agentId: input.agentId ?? null,
      userId: input.userId ?? null,
      metadata: input.metadata ?? null,
      createdAt: at,
      updatedAt: at,
    };
    // The session starts with its agent's lifetime over the deployment's defaults (API.md section 12).
    const agentLifetime = meta.agentId === null ? undefined : await this.agentLifetime(tenant, meta.agentId);
    // Retried while a delete of the same id is still erasing it (StaleTipError).
    const created = await retryOnStaleTip(this.retry, () =>
      this.store.createSession(
        { tenant, sessionId: meta.sessionId, ...(input.copy === undefined ? {} : { copy: input.copy }) },
        meta,
        agentLifetime,
      ),
    );
    return sessionView(created, emptyTip());
  }

  async getSession(scope: SessionScope): Promise<SessionView> {
    const [meta, tip] = await Promise.all([this.store.getMeta(scope), this.store.readTip(scope, { withState: false })]);
    const live = liveMeta(meta, tip, this.now());
    if (!live) throw sessionNotFound(scope);
    return sessionView(live, tip);
  }

  /**
   * Most recently active first; with `prefix`, only ids that start with it (pages may be
   * sparse). A session its item says expired is left out (API.md section 12), so a page may be
   * short.
   */
  async listSessions(tenant: string, options: SessionListOptions): Promise<Page<SessionSummaryView>> {
    const page = await this.store.listSessions(tenant, options);
    const now = this.now().getTime();
    const items = page.items.filter((meta) => !hasExpired(meta.expiresAtMs, now)).map((meta) => sessionSummaryView(meta));
    return { items, ...(page.next ? { next: page.next } : {}) };
  }

  /**
   * `PATCH /v1/sessions/{sid}` (API.md sections 2 and 12): merge-patches the metadata, sets the
   * user and the agent, and changes the lifetime, field by field. Recorded as a change of the
   * log, so that it is a write like any other: it restarts an idle expiry, every later write
   * carries the new lifetime, user and agent (a profile commit, a decision's `profile`, a key
   * limited to agents all follow the tip's), and a delete or a user's erasure, which claim the
   * log's places too, either see it or make it fail. The session item and its entries in the
   * filtered lists move in the same transaction. Settings are checked before anything is written.
   */
  async updateSession(scope: SessionScope, input: SessionUpdate, access?: KeyAccess): Promise<SessionView> {
    checkLifetimeSettings(input, this.now().getTime());
    // Who a session belongs to decides which profile it writes and which agents' keys work in
    // it: only a key that is not limited may change that (API.md section 2), and a limited key
    // that names either field is refused whatever the session holds, so that the answer tells
    // nothing about the session.
    const reassigns = input.userId !== undefined || input.agentId !== undefined;
    if (reassigns && access?.allowed) {
      const field = input.userId !== undefined ? 'userId' : 'agentId';
      throw new AgentStateError('forbidden', `only a key that is not limited to agents may set the ${field} of a session`, {
        agents: access.allowed,
      });
    }
    const update = async (attempt: AttemptContext): Promise<SessionView> => {
      // The tip first, then the session item: the metadata is rewritten in the same transaction
      // that claims a log place, so an item read after the tip holds every metadata change up
      // to that tip (or a later one, whose claim makes this write's claim fail and retry). Read
      // side by side, the item could trail the tip, and the merge would drop a key another PATCH
      // had just landed.
      const tip = await this.store.readTip(scope, { withState: false });
      const live = liveMeta(await this.store.getMeta(scope), tip, this.now());
      if (!live) throw sessionNotFound(scope);
      // The item's user and agent, not the tip's: every change of them writes both, and the item
      // is what the session reads as (a session nothing was written to has no tip to carry them).
      await this.checkKeyAccess(scope.tenant, live.agentId, access, 'change');
      if (othersWaiting(tip, attempt, this.now())) throw new QueueBehindOthers();
      const current = tip.lifetime ?? live.lifetime ?? NO_LIFETIME;
      const lifetime = resolveLifetime(layerOf(current), input);
      const metadata = input.metadata === undefined ? undefined : (mergePatch(live.metadata, input.metadata) as JsonObject | null);
      if (metadata !== undefined) {
        checkMetadata(metadata);
        checkListedMetadata(metadata);
      }
      const updated: SessionMeta = {
        ...live,
        ...(metadata === undefined ? {} : { metadata }),
        ...(input.userId === undefined ? {} : { userId: input.userId }),
        ...(input.agentId === undefined ? {} : { agentId: input.agentId }),
      };
      checkRelisting(live, updated);
      const at = this.now().toISOString();
      const written = await this.store.commit(scope, {
        basedOn: tip,
        head: { id: tip.head, version: tip.headVersion, depth: tip.headDepth },
        newNodes: [],
        touchSessionAt: at,
        mayCreateSession: false,
        // Always carried: the tip of a session nothing was written to says neither yet.
        sessionAgentId: updated.agentId,
        sessionUserId: updated.userId,
        lifetime,
        settings: {
          ...(metadata === undefined ? {} : { metadata }),
          ...(input.userId === undefined ? {} : { userId: input.userId }),
          ...(input.agentId === undefined ? {} : { agentId: input.agentId }),
          lists: { before: live, after: updated },
        },
        contended: attempt.raced || attempt.queued === true,
      });
      const expiresAtMs = expiryOf(lifetime, Date.parse(at));
      return sessionView({ ...updated, updatedAt: at, lifetime, expiresAtMs }, { ...written, lifetime, expiresAtMs });
    };
    const view = await retryOnStaleTip(this.retry, update, undefined, this.turnsOf(scope, false));
    // What the new windows leave out is pruned without waiting for a write (a count window
    // moves only with writes, and the change hook sees no version in a settings change).
    if (input.retention && view.retention) await this.store.markPruneDue(scope);
    return view;
  }

  /** The lifetime an agent's registration gives its new sessions (absent: none, or no such agent). */
  private async agentLifetime(tenant: string, agentId: string): Promise<LifetimeSettings | undefined> {
    const agent = (await this.agents(tenant)).find((candidate) => candidate.agentId === agentId);
    return agent?.lifetime ?? undefined;
  }

  /**
   * Erases the session (what does not fit in `remainingMs`, the request's time left, the change
   * hook erases after the answer). A key limited to agents (`allowed`) may erase only a session
   * it may work in (`mayWorkIn`): `403 forbidden` otherwise, nothing erased.
   */
  async deleteSession(scope: SessionScope, allowed: AllowedAgents = null, remainingMs?: number): Promise<void> {
    if (allowed) {
      const meta = await this.store.getMeta(scope);
      await this.checkKeyAccess(scope.tenant, meta?.agentId ?? null, { allowed, caller: null }, 'delete');
    }
    if (!(await this.store.deleteSession(scope, remainingMs))) throw sessionNotFound(scope);
  }

  /**
   * What a key limited to agents may do in a session (API.md section 7): work only in its
   * conversations (`mayWorkIn`: `403 forbidden`), and where a write moves what the head reads
   * (`move`: from the head's version to another), change no declared field it may not write
   * (`403 field_forbidden`). Nothing to check for a key that is not limited.
   */
  protected async checkKeyAccess(
    tenant: string,
    sessionAgentId: string | null,
    access: KeyAccess | undefined,
    what: string,
    move?: HeadMove,
  ): Promise<void> {
    if (!access?.allowed || sessionAgentId === null) return;
    requireMayWorkIn(access.allowed, await this.agents(tenant), sessionAgentId, what);
    if (!move || move.from === move.to) return;
    await requireMayMoveHeadTo(this.store, move, await this.schemas(tenant, sessionAgentId), access.caller);
  }

  /**
   * Where a blind write to the session's log that lost a race waits its turn among the session's
   * writers (write-retry.ts); a guarded one (`If-Match`) answers 412 instead and never waits.
   */
  protected turnsOf(scope: SessionScope, guarded: boolean): (() => Promise<QueueTicket>) | undefined {
    const queue = this.queue;
    return queue && !guarded ? () => queue.join({ session: scope }) : undefined;
  }

  // ---- message tree ---------------------------------------------------------------------

  /**
   * Appends `messages` as a chain under `parentId` (the head by default) and moves the head
   * to the last one. Leading messages that already exist under the same parent are taken as
   * already there, so a client can resend a conversation prefix safely. With `state`, the new
   * head's state is written in the same change (API.md section 3): a merge patch or a whole
   * value on the state the head starts with, `ifMatch` checked against the parent's version,
   * all or nothing.
   */
  async appendMessages(scope: SessionScope, input: AppendInput, access?: KeyAccess): Promise<AppendResult> {
    // Ids known to be new are not looked up (`AppendInput.newIds`): only the parent is.
    const lookups = input.newIds ? (input.parentId === undefined ? [] : [input.parentId]) : lookupsOf(input.messages, input.parentId);
    const withState = input.state !== undefined;
    const append = async (attempt: AttemptContext): Promise<AppendResult> => {
      const { tip, nodes: known } = await this.store.readTipWithNodes(scope, lookups, {
        withState,
        // The ids read are the new messages' (one round), and a parent named is most often the
        // head, which the tip tells (any other parent is read after the tip; one that is also a
        // message's id is read as the messages' are).
        expectNew: true,
        ...(input.parentId === undefined || suppliedIds(input.messages).includes(input.parentId) ? {} : { expectHead: input.parentId }),
        // With an empty log, whether the session item is there, in the same read (append-change.ts).
        ...(scope.copy === undefined && !input.opensCopy ? { sessionItem: true } : {}),
      });
      // An append is a blind write: it joins the writers already waiting for this session.
      if (input.ifMatch === undefined && othersWaiting(tip, attempt, this.now())) throw new QueueBehindOthers();
      const parent = this.targets.nodeById(tip, known, input.parentId ?? tip.head);
      checkIfMatch({ nodeId: parent.id, pointer: pointerOf(parent, tip) }, input.ifMatch);

      const at = this.now().toISOString();
      const plan = planChain({ parent, messages: input.messages, known, tip, at });
      return appendChange(this.appendParts, { scope, input, access, planned: { tip, parent, at, attempt, plan } });
    };
    return retryOnStaleTip(this.retry, append, undefined, this.turnsOf(scope, input.ifMatch !== undefined));
  }

  /** What an append's change asks of this service once its tip is read (append-change.ts). */
  private get appendParts(): AppendParts {
    return {
      store: this.store,
      targets: this.targets,
      checkKeyAccess: (tenant, agentId, access, move) => this.checkKeyAccess(tenant, agentId, access, 'append to', move),
      headStateOf: (at) => this.headStateOf(at),
    };
  }

  /** The new head's state of an append that carries one, by the writer this service was given. */
  private headStateOf(at: HeadStateAt): Promise<HeadState> {
    const { scope, tip, head, input, caller, meta } = at;
    if (!this.headState || !input.state) throw new AgentStateError('internal', 'this service writes no state with an append');
    return this.headState({
      targets: this.targets,
      schemas: this.schemas,
      scope,
      tip,
      head,
      change: input.state,
      caller,
      at: at.at,
      ...(input.recordedAs ? { recordedAs: input.recordedAs } : {}),
      ...(meta === undefined ? {} : { meta }),
    });
  }

  /** Moves the head to an existing node: the way a client switches branch. */
  async switchHead(scope: SessionScope, nodeId: string, access?: KeyAccess): Promise<{ head: string }> {
    const switchTo = async (attempt: AttemptContext): Promise<{ head: string }> => {
      const { tip, nodes } = await this.store.readTipWithNodes(scope, [nodeId], { withState: false });
      await this.targets.requireSession(scope, tip);
      const target = nodes.get(nodeId) ?? (nodeId === ROOT_NODE ? rootNode('') : null);
      if (!target) throw nodeNotFound(nodeId);
      if (target.id === tip.head) return { head: tip.head };
      const session = await this.targets.sessionOf(scope, tip);
      await this.checkKeyAccess(scope.tenant, session.agentId, access, 'switch the head of', {
        scope,
        tip,
        from: tip.headVersion,
        to: pointerOf(target, tip),
      });
      await this.store.commit(scope, {
        basedOn: tip,
        head: { id: target.id, version: target.stateVersion, depth: target.depth, place: target.place },
        newNodes: [],
        touchSessionAt: this.now().toISOString(),
        mayCreateSession: false,
        contended: attempt.raced || attempt.queued === true,
      });
      return { head: target.id };
    };
    return retryOnStaleTip(this.retry, switchTo, undefined, this.turnsOf(scope, false));
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
   * The head and every node, without bodies, in parts (`GET …/tree`, tree-reads.ts). With
   * `preview`, each node also carries a short snippet of its message, which its index keeps.
   */
  getTree(
    scope: SessionScope,
    options: { preview?: boolean; notes?: boolean; cursor?: string } = {},
  ): Promise<{ head: string; nodes: TreeNodeView[]; next?: string; notes?: Record<string, NodeNotes>; notesNext?: string }> {
    return readTree(this.store, scope, options);
  }

  /** `GET …/nodes`: a page of the message nodes by id, from the last (tree-reads.ts). */
  listNodes(scope: SessionScope, options: NodePageQuery): Promise<NodePageView> {
    return readNodePage(this.store, this.targets, scope, options);
  }

  /**
   * `GET …/notes`: the notes of the named nodes (`nodeIds`), or of every node, in their order (node,
   * then key), as many as one answer carries (at least one), from where `cursor` says on: what
   * goes on from a read's `notesNext` (note-pages.ts). A later part reads the tip beside its notes:
   * a session deleted or expired since the first part is the cursor's no longer (`400`, as for
   * versions).
   */
  async readNotesPage(
    scope: SessionScope,
    options: { nodeIds?: readonly string[]; cursor?: string },
  ): Promise<{ notes: Record<string, NodeNotes>; next?: string }> {
    const from = options.cursor === undefined ? undefined : openNotesCursor(options.cursor, scope, options.nodeIds);
    const window = { ...(from?.after ? { after: from.after } : {}), bytes: ANSWER_ITEMS_BYTES };
    const [tip, read] = await Promise.all([
      this.store.readTip(scope, { withState: false }),
      options.nodeIds === undefined
        ? this.store.readNotes(scope, undefined, window)
        : this.store.readNotesOf(scope, options.nodeIds, window),
    ]);
    if (from !== undefined && (tip.kind === 'closing' || tip.incarnation !== from.life)) {
      throw new AgentStateError('invalid_request', 'cursor is not valid for this list: the session was deleted or expired since', {
        field: 'cursor',
      });
    }
    await this.targets.requireSession(scope, tip);
    const part = notesWithin(read, tip.incarnation, ANSWER_ITEMS_BYTES, true);
    return { notes: part.notes, ...(part.rest ? { next: sealNotesCursor(part.rest, scope, options.nodeIds) } : {}) };
  }

  /**
   * Puts a note beside a node (docs/api.md, "a note beside a node"): one blind put outside the
   * log, so notes never wait for each other nor for the log's writers (no version, event or
   * activity). The node must be in the session; a limited key writes only in its conversations.
   */
  async putNote(scope: SessionScope, nodeId: string, key: string, value: Json, access?: KeyAccess): Promise<NoteResult> {
    checkNoteSize(value);
    // The claim of an append of this session under way here, when one lands after this call, tells what the read would.
    const { tip, nodes } = await this.store.readTipWithNodes(scope, [nodeId], { withState: false, ownClaim: true });
    await this.targets.requireSession(scope, tip);
    const node = this.targets.nodeById(tip, nodes, nodeId);
    await this.checkKeyAccess(scope.tenant, (await this.targets.sessionOf(scope, tip)).agentId, access, 'write a note in');
    await this.store.putNote(scope, { incarnation: tip.incarnation, nodeId: node.id, key, value });
    return { sessionId: scope.sessionId, node: node.id, key };
  }

  /**
   * The path root→node (the head by default), oldest first: the tip (with the newest changes,
   * or with the node's index), then the ranges of the log the path runs through, in parallel.
   * With `last`, its last `last` messages only, and how many came before them (`omitted`).
   */
  async getPath(scope: SessionScope, nodeId?: string, options: { last?: number } = {}): Promise<MessagePath & { omitted?: number }> {
    const { tip, nodes } =
      nodeId === undefined
        ? { tip: await this.store.readTip(scope, { withState: false, recent: true, fromReplica: 'checked' }), nodes: new Map() }
        : await this.store.readTipWithNodes(scope, [nodeId], { withState: false });
    const targetId = nodeId ?? tip.head;
    if (targetId === ROOT_NODE) {
      await this.targets.requireSession(scope, tip);
      return { messages: [], ancestry: [ROOT_NODE], ...(options.last === undefined ? {} : { omitted: 0 }) };
    }
    const target = nodes.get(targetId) ?? (targetId === tip.head ? tip.headNode : undefined);
    if (!target) {
      await this.targets.requireSession(scope, tip);
      throw nodeNotFound(targetId);
    }
    // With `last`, only the changes that hold the path's last messages are read (paths.ts), so
    // a long conversation's newest part costs what it returns, and fits one answer.
    const { messages, ancestry, omitted } = await this.store.readPath(
      scope,
      tip,
      target,
      options.last === undefined ? {} : { last: options.last },
    );
    return options.last === undefined ? { messages, ancestry } : { messages, ancestry, omitted };
  }
}
