import { type AgentStateApi, AgentStateError, createClient, defaultRetry, type Json } from '@agentstate/client';
import type { RunnableConfig } from '@langchain/core/runnables';
import {
  BaseCheckpointSaver,
  type ChannelVersions,
  type Checkpoint,
  type CheckpointListOptions,
  type CheckpointMetadata,
  type CheckpointTuple,
  getCheckpointId,
  maxChannelVersion,
  type PendingWrite,
  type SerializerProtocol,
  TASKS,
} from '@langchain/langgraph-checkpoint';
import { checkedPrefix, nodeIdOf, noteKeyOf, SessionIds } from './ids.js';
import {
  type CheckpointState,
  type CheckpointWrite,
  checkpointIdIn,
  checkpointOf,
  checkpointState,
  encodeCheckpoint,
  isCheckpointState,
  mergedWritesPatch,
  metadataOf,
  newChannelsOnly,
  pendingWritesOf,
  putAgain,
  type WritesPatch,
  withNotes,
  writesNote,
  writesPatch,
} from './layout.js';
import { CHECKPOINT_ROLE, CheckpointOrder, type ListCandidate, SessionCheckpoints } from './list-order.js';
import { inBatches, NamespaceRegistry } from './namespaces.js';
import { NewCheckpoints, type Parents } from './new-checkpoints.js';
import { chainTicks, OwnPuts } from './own-puts.js';
import { COPY_THREAD_KEY, type PruneStrategy, ThreadLifetime } from './threads.js';
import { ttlSecondsOf } from './ttl.js';
import { WriteTurns } from './write-turns.js';

/** Options of `new AgentStateSaver(…)`. */
export interface AgentStateSaverOptions {
  /** The agentstate API: `http://localhost:4000` for `npm start`, the stack's `ApiUrl` in AWS. */
  baseUrl?: string;
  /** An API key of the tenant the threads belong to. */
  apiKey?: string;
  /**
   * Starts every session id this saver uses (`<prefix>@<thread id>`): savers with different
   * prefixes never see each other's threads. 1–64 of `A-Z a-z 0-9 . _ : -`. Without one, a
   * thread's session has the thread's own id (escaped where it must be).
   */
  prefix?: string;
  /** A client to share (its key, retries and timeouts); `baseUrl` and `apiKey` are then not needed. */
  client?: AgentStateApi;
  /** LangGraph's serializer; its JSON is stored as JSON, so the inspector shows channel values as they are. */
  serde?: SerializerProtocol;
  /**
   * `{ defaultTtl }`: minutes a thread lives after its last checkpoint (each namespace's
   * session gets agentstate's idle expiry, `ttlSeconds`); then it reads as never written and its
   * storage is freed. None by default.
   */
  ttl?: { defaultTtl?: number };
}

/**
 * Checkpoints whose states a `list` reads at a time (about one page of versions), with their
 * pending writes: as many as one request may ask the notes of (`GET …/versions?notesOf=`, 200).
 */
const LIST_BATCH = 200;
/**
 * The most bytes of node ids one `notesOf` carries: API Gateway takes 10,240 bytes of request
 * line and headers together, so a batch of long ids is cut shorter (200 uuid6 ids are 7,800).
 */
const NOTES_OF_BYTES = 7_000;
/** The most versions one page of a session's history holds (`GET …/versions?limit=`, API.md). */
const VERSIONS_PAGE = 500;
/**
 * Versions of history `list` reads per checkpoint it needs before it reads those checkpoints one
 * by one instead: a step's checkpoint and the writes of its tasks are a few versions each.
 */
const HISTORY_PER_CHECKPOINT = 8;

/** How long writes wait for the `put` of their checkpoint (see `awaitingPut`). */
const PUT_WAIT_MS = 30_000;

/**
 * Reads and writes a checkpoint put again may take while other processes keep writing to it
 * (see `replaceAt`): with the client's backoff, over 30 s of waiting in all.
 */
const PUT_AGAIN_ATTEMPTS = 10;

/** What one note may hold (docs/api.md, "a note beside a node"): writes beyond it go into the state (see `putWrites`). */
const NOTE_LIMIT_BYTES = 256 * 1024;

/** The most bytes of writes one merge patch carries (see `writeInTurn`): far below a request's limit. */
const WRITES_BATCH_BYTES = 512 * 1024;

/** `putWrites` calls of one checkpoint waiting for their turn, to be sent as one merge patch. */
interface WritesBatch {
  writes: Array<{ patch: WritesPatch; done: (error?: unknown) => void }>;
  bytes: number;
}

/**
 * A LangGraph checkpoint saver on agentstate, over its HTTP API (docs/langgraph.md).
 *
 * - A thread is a session (one per checkpoint namespace; a subgraph's namespace is a session of
 *   its own, listed in its thread's session at the root node).
 * - A checkpoint is a node of that session's tree, under its parent checkpoint's node: replays,
 *   `updateState` on a past checkpoint and forks are branches of the tree.
 * - The state at the node holds the checkpoint, its metadata and its channel values; `put`
 *   appends the node and sets its state in one request (agentstate stores the version as its
 *   change from the parent's, so unchanged channels cost the wire, not the table).
 * - Pending writes are notes beside the node, one per `putWrites` call: blind writes outside the
 *   session's log, so a step's writes go beside the next `put` and never race it.
 *
 * `getTuple` is one request (none for a subgraph's first read in a new run, see `NewCheckpoints`), `put` one,
 * `putWrites` one (neither write with an `Idempotency-Key`, see `resent`).
 */
export class AgentStateSaver extends BaseCheckpointSaver {
  private readonly client: AgentStateApi;
  private readonly ids: SessionIds;
  private readonly namespaces: NamespaceRegistry;
  private readonly threads: ThreadLifetime;
  /**
   * Who waits for a checkpoint's `put`, by session and node. LangGraph's loop chains its `put`s
   * one after the other but sends a step's `putWrites` without waiting for them, so the writes
   * of a checkpoint may arrive before the checkpoint does:
   *
   *   put(c1) ── append c1 with its state ──▶ put(c2) ── append c2 with its state ──▶
   *   putWrites(c2) ──▶ ✗ c2 not there yet ┄┄┄┄┄┄┄┄┄┄┄┄┄┄┄┄┄┄┄┄┄┄┄┄┄┄┄┄┄┄▶ patch c2's writes
   *
   * Such writes wait here for the `put` of their checkpoint by this saver (the one process that
   * runs the step writes both), at most `PUT_WAIT_MS`. A `put` is one request that creates the
   * node and its state together, so a write finds either no node or the checkpoint's own state.
   */
  private readonly awaitingPut = new Map<string, Set<() => void>>();
  /** The `put`s this saver has under way, by session and node (settled, never rejected): their writes wait for them. */
  private readonly putsUnderWay = new Map<string, Promise<unknown>>();
  /** This saver's puts under way, which its reads of the thread wait for (see `OwnPuts`). */
  private readonly ownPuts = new OwnPuts();
  /** The checkpoints LangGraph made in this process, whose subgraph namespaces need no read (see `NewCheckpoints`). */
  private readonly newCheckpoints = new NewCheckpoints();
  /** This saver's writes to each session, one at a time (see `WriteTurns`). */
  private readonly turns = new WriteTurns();
  /** Per session and node, the writes that wait for their turn and have not started (see `writeInTurn`). */
  private readonly waitingWrites = new Map<string, WritesBatch>();

  constructor(options: AgentStateSaverOptions) {
    super(options.serde);
    if (options.client) {
      this.client = options.client;
    } else {
      if (!options.baseUrl || !options.apiKey) throw new TypeError('AgentStateSaver needs baseUrl and apiKey (or a client)');
      this.client = createClient({ baseUrl: options.baseUrl, apiKey: options.apiKey });
    }
    this.ids = new SessionIds(checkedPrefix(options.prefix));
    this.namespaces = new NamespaceRegistry(this.client);
    this.threads = new ThreadLifetime(
      this.client,
      this.ids,
      this.namespaces,
      options.ttl?.defaultTtl === undefined ? undefined : ttlSecondsOf(options.ttl.defaultTtl),
    );
  }

  /**
   * The session that holds a thread's checkpoints (of one namespace; the thread's own by default):
   * `<prefix>@<thread id>`, escaped where the id has characters agentstate ids do not take.
   */
  sessionIdOf(threadId: string, checkpointNs = ''): Promise<string> {
    return this.ids.of(threadName(threadId), checkpointNs);
  }

  override async getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined> {
    const threadId = config.configurable?.thread_id as unknown;
    if (threadId === undefined) return undefined;
    const thread = threadName(threadId);
    const checkpointNs = namespaceOf(config);
    const checkpointId = getCheckpointId(config);
    const sessionId = await this.ids.of(thread, checkpointNs);
    await this.ownPuts.settled(thread, checkpointNs);
    if (checkpointId) {
      this.newCheckpoints.read(thread, checkpointNs, checkpointId);
      const state = await this.stateAt(sessionId, nodeIdOf(checkpointId));
      // A node whose `put` did not get to write its state still holds its parent's.
      if (!state || checkpointIdIn(state) !== checkpointId) return undefined;
      return this.tupleOf(sessionId, state, thread);
    }
    if (checkpointNs !== '' && this.holdsNothing(thread, checkpointNs, config.configurable?.checkpoint_map as Parents)) {
      return undefined;
    }
    // The head is the checkpoint put last (the one LangGraph resumes from); a node appended by a
    // `put` that did not finish holds its parent's state, which is then the latest.
    const state = await this.stateAt(sessionId, undefined);
    if (!state) return undefined;
    this.newCheckpoints.read(thread, checkpointNs, checkpointIdIn(state));
    return this.tupleOf(sessionId, state, thread);
  }

  /**
   * Whether a subgraph's namespace is known to hold nothing without a request: the checkpoint
   * its task belongs to (`parents`, the read's checkpoint map) was made in this process and this
   * saver put nothing in the namespace (see `NewCheckpoints`).
   */
  private holdsNothing(thread: string, checkpointNs: string, parents: Parents): boolean {
    return this.newCheckpoints.holdsNothing(thread, checkpointNs, parents, (parentNs) =>
      this.ownPuts.checkpointsUnderWay(thread, parentNs),
    );
  }

  override async *list(config: RunnableConfig, options: CheckpointListOptions = {}): AsyncGenerator<CheckpointTuple> {
    const { before, filter } = options;
    let remaining = options.limit;
    const threadId = config.configurable?.thread_id as unknown;
    const checkpointNs = config.configurable?.checkpoint_ns as string | undefined;
    const onlyId = config.configurable?.checkpoint_id as string | undefined;
    const beforeId = before?.configurable?.checkpoint_id as string | undefined;

    await this.ownPuts.settled(threadId === undefined ? undefined : threadName(threadId), checkpointNs);
    const threads = await this.sessionsOf(threadId === undefined ? undefined : threadName(threadId), checkpointNs);
    // Each session's checkpoints newest first by checkpoint id, a page of nodes at a time
    // (`GET …/nodes`), merged into one order: no more of a session is read than the list yields.
    const range = { ...(beforeId === undefined ? {} : { before: beforeId }), ...(onlyId === undefined ? {} : { only: onlyId }) };
    const sessions = [...threads.keys()].map((sessionId) => new SessionCheckpoints(this.client, sessionId, range));
    const order = new CheckpointOrder(sessions);
    // Each session's history, read a page at a time as far back as the checkpoints yielded need
    // (made once a page of its nodes said its newest version).
    const histories = new Map<string, History>();
    const historyOf = (session: SessionCheckpoints) => {
      let history = histories.get(session.sessionId);
      if (!history) {
        history = new History(this.client, session.sessionId, session.newest);
        histories.set(session.sessionId, history);
      }
      return history;
    };

    // States are read a batch at a time (no more than `limit` still needs), each with its pending
    // writes (the notes of the batch's nodes, in the same request), so a `list` with a limit reads
    // about as many nodes, states and notes as it yields: two requests for any limit up to a batch
    // (200 uuid6 checkpoints, fewer with long ids) whose versions fit one page of history, and
    // about two more per further batch.
    // A batch that yields fewer than it read (a `filter` that leaves checkpoints out) makes the
    // next one twice as large, up to `LIST_BATCH`: a rare match far back is a few pages, not a
    // page and a state read per checkpoint passed.
    let widen = 1;
    for (;;) {
      if (remaining !== undefined && remaining <= 0) return;
      const most = remaining === undefined ? LIST_BATCH : Math.min(Math.max(remaining, 1) * widen, LIST_BATCH);
      const slice = await nextBatch(order, most);
      if (slice.length === 0) return;
      for (const session of sessions) if (slice.some((candidate) => candidate.sessionId === session.sessionId)) historyOf(session);
      const states = await this.statesOf(slice, histories);
      let yielded = 0;
      for (const { candidate, state } of states) {
        if (!state || checkpointIdIn(state) !== candidate.checkpointId) continue;
        if (checkpointNs !== undefined && state.checkpoint_ns !== checkpointNs) continue;
        if (filter) {
          const metadata = (await metadataOf(this.serde, state)) as Record<string, unknown>;
          if (!Object.entries(filter).every(([key, value]) => metadata[key] === value)) continue;
        }
        if (remaining !== undefined) {
          if (remaining <= 0) return;
          remaining -= 1;
        }
        yielded += 1;
        const thread = threads.get(candidate.sessionId) ?? state.thread_id;
        this.newCheckpoints.read(thread, state.checkpoint_ns, candidate.checkpointId);
        yield await this.tupleOf(candidate.sessionId, state, thread);
      }
      if (yielded < slice.length) widen *= 2;
    }
  }

  override async put(
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    // Left out, every channel is new (LangGraph's own tests call it so, as MemorySaver takes it).
    newVersions?: ChannelVersions,
  ): Promise<RunnableConfig> {
    // Noted before anything is awaited, so this saver's reads of the thread wait for it (see `OwnPuts`).
    const threadId = config.configurable?.thread_id as unknown;
    const settle = threadId === undefined ? () => {} : this.ownPuts.begin(threadName(threadId), namespaceOf(config), checkpoint.id);
    if (threadId !== undefined) {
      const thread = threadName(threadId);
      const checkpointNs = namespaceOf(config);
      if (checkpointNs !== '') {
        const parents = (config.configurable?.checkpoint_map ?? (metadata as { parents?: Parents } | undefined)?.parents) as Parents;
        this.newCheckpoints.childPutBegins(thread, checkpointNs, parents);
      }
      this.newCheckpoints.putBegins(thread, checkpointNs, checkpoint.id);
    }
    try {
      return await this.putCheckpoint(config, checkpoint, metadata, newVersions);
    } finally {
      settle();
    }
  }

  private async putCheckpoint(
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    newVersions: ChannelVersions | undefined,
  ): Promise<RunnableConfig> {
    const threadId = config.configurable?.thread_id as unknown;
    if (threadId === undefined) {
      throw new Error('Failed to put checkpoint: the RunnableConfig has no "thread_id" in its "configurable" property.');
    }
    const thread = threadName(threadId);
    const checkpointNs = namespaceOf(config);
    const parentId = config.configurable?.checkpoint_id as string | undefined;
    const sessionId = await this.ids.of(thread, checkpointNs);
    const nodeId = nodeIdOf(checkpoint.id);
    const write = await encodeCheckpoint(this.serde, checkpoint, metadata, newVersions);

    // A subgraph's namespace starts without a parent: its thread's session learns of it then.
    // Its patch takes the thread session's turn, so it does not race the parent graph's writes there.
    const register =
      checkpointNs !== '' && !parentId
        ? this.ids.of(thread, '').then((root) => this.turns.inTurn(root, () => this.namespaces.register(root, checkpointNs, sessionId)))
        : Promise.resolve();
    // Noted before it is sent, so the writes LangGraph sends for this checkpoint while it is on its
    // way queue behind it instead of arriving first and answering `404` (a request each).
    this.turns.notePut(sessionId, nodeId);
    this.turns.notePutOf(sessionId, checkpoint.id);
    const written = this.turns.inTurn(sessionId, () =>
      this.writeCheckpoint({ sessionId, nodeId, parentId, thread, checkpointNs, checkpoint, metadata, write }),
    );
    const key = `${sessionId} ${nodeId}`;
    const underWay = Promise.all([register, written]);
    const settled = underWay.then(
      () => undefined,
      () => undefined,
    );
    this.putsUnderWay.set(key, settled);
    try {
      await underWay;
    } catch (error) {
      this.turns.forgetPut(sessionId, nodeId);
      throw error;
    } finally {
      if (this.putsUnderWay.get(key) === settled) this.putsUnderWay.delete(key);
    }
    for (const arrived of this.awaitingPut.get(key) ?? []) arrived();
    return { configurable: { thread_id: thread, checkpoint_ns: checkpointNs, checkpoint_id: checkpoint.id } };
  }

  override async putWrites(config: RunnableConfig, writes: PendingWrite[], taskId: string, taskPath = ''): Promise<void> {
    const threadId = config.configurable?.thread_id as unknown;
    const checkpointId = config.configurable?.checkpoint_id as string | undefined;
    if (threadId === undefined)
      throw new Error('Failed to put writes: the RunnableConfig has no "thread_id" in its "configurable" property.');
    if (checkpointId === undefined) {
      throw new Error('Failed to put writes: the RunnableConfig has no "checkpoint_id" in its "configurable" property.');
    }
    if (writes.length === 0) return;
    const sessionId = await this.ids.of(threadName(threadId), namespaceOf(config));
    const nodeId = nodeIdOf(checkpointId);
    const key = `${sessionId} ${nodeId}`;
    const stored = await writesPatch(this.serde, checkpointId, writes, taskId, taskPath);
    const note = writesNote(stored) as unknown as Json;
    // A note beside the checkpoint's node: one blind write outside the session's log, so a
    // step's writes go beside the next `put` instead of waiting for it or racing it. Writes too
    // large for a note are a merge patch of the node's state, in this saver's turn on the session.
    // Neither has an Idempotency-Key (its record would cost two more DynamoDB writes): sent
    // again, they set the same members to the same values (see `resent`).
    const write =
      JSON.stringify(note).length <= NOTE_LIMIT_BYTES
        ? async () => {
            const noteKey = await noteKeyOf(taskId, Object.keys(writesNote(stored)));
            await resent(() => this.client.tree.putNote(sessionId, nodeId, noteKey, note, { idempotencyKey: false }));
          }
        : () => this.writeInTurn(sessionId, nodeId, stored);
    // Listening before the first try, so a put that finishes while it fails is not missed.
    const put = this.whenPut(key);
    try {
      // The writes of a checkpoint this saver is putting, or is still to put in the run under
      // way (LangGraph chains the puts, and sends a step's writes without waiting), wait for it.
      const underWay = this.putsUnderWay.get(key);
      const waits = underWay !== undefined || (!this.turns.wasPut(sessionId, nodeId) && this.turns.expectsPut(sessionId, checkpointId));
      if (underWay) await underWay;
      else if (waits) await put.arrived;
      // LangGraph sends the run's next `put` as this one answers: it goes out first, and the
      // server takes that append's claim for this note's tip read (one DynamoDB request less,
      // docs/architecture.md "Notes beside nodes").
      if (waits) await chainTicks();
      const afterOwnPut = this.turns.wasPut(sessionId, nodeId) && !this.putsUnderWay.has(key);
      try {
        await write();
      } catch (error) {
        if (!AgentStateError.is(error, 'node_not_found') && !AgentStateError.is(error, 'session_not_found')) throw error;
        // Sent after this saver's put of the checkpoint had landed, the node is gone (the put
        // failed, or the thread was deleted since): no put is coming to wait for. Else a put
        // of this saver or another process's may bring it.
        if (afterOwnPut || !(await put.arrived)) throw error;
        await write();
      }
    } finally {
      put.cancel();
    }
  }

  override async deleteThread(threadId: string): Promise<void> {
    const thread = threadName(threadId);
    this.newCheckpoints.forgetThread(thread);
    const root = await this.ids.of(thread, '');
    const children = await this.namespaces.sessionsOf(root);
    await inBatches([...children, root], (sessionId) => this.deleteSession(sessionId));
  }

  /**
   * Copies every checkpoint and pending write of a thread (every namespace) to a thread that has
   * none, as LangGraph's `copy_thread`: the copy is independent afterwards (see `ThreadLifetime.copy`).
   */
  async copyThread(sourceThreadId: string, targetThreadId: string): Promise<void> {
    this.newCheckpoints.forgetThread(threadName(targetThreadId));
    await this.threads.copy(threadName(sourceThreadId), threadName(targetThreadId));
  }

  /**
   * LangGraph's `prune`: `keep_latest` (the default) leaves each thread only its latest
   * checkpoint of every namespace; `delete` deletes the threads (see `ThreadLifetime.prune`).
   */
  async prune(threadIds: readonly string[], options: { strategy?: PruneStrategy } = {}): Promise<void> {
    for (const thread of threadIds) this.newCheckpoints.forgetThread(threadName(thread));
    await this.threads.prune(threadIds.map(threadName), options.strategy ?? 'keep_latest', this);
  }

  /**
   * Sends writes of a checkpoint in this saver's turn on the session. The writes of one
   * checkpoint that wait for a turn together (a step's tasks, which LangGraph's loop sends at
   * once: a fan-out of 100 sends 100) go as one merge patch, one request and one version
   * instead of one each in a line: merging the patches is the same as applying them in order.
   * A batch that fails is sent again one write at a time, so each call gets its own answer.
   */
  private writeInTurn(sessionId: string, nodeId: string, patch: WritesPatch): Promise<void> {
    const key = `${sessionId} ${nodeId}`;
    const bytes = JSON.stringify(patch).length;
    let batch = this.waitingWrites.get(key);
    if (!batch || batch.bytes + bytes > WRITES_BATCH_BYTES) {
      const opened: WritesBatch = { writes: [], bytes: 0 };
      batch = opened;
      this.waitingWrites.set(key, opened);
      void this.turns.inTurn(sessionId, async () => {
        // Started: later writes wait for the next turn.
        if (this.waitingWrites.get(key) === opened) this.waitingWrites.delete(key);
        await this.sendWrites(sessionId, nodeId, opened);
      });
    }
    const joined = batch;
    joined.bytes += bytes;
    return new Promise<void>((resolve, reject) => {
      joined.writes.push({ patch, done: (error) => (error === undefined ? resolve() : reject(error)) });
    });
  }

  /** Sends a batch of writes (see `writeInTurn`); settles each of its calls, never throws. */
  private async sendWrites(sessionId: string, nodeId: string, batch: WritesBatch): Promise<void> {
    const send = (patch: WritesPatch) =>
      resent(() => this.client.state.patch(sessionId, patch as unknown as Json, { node: nodeId, idempotencyKey: false }));
    try {
      await send(mergedWritesPatch(batch.writes.map((write) => write.patch)));
      for (const write of batch.writes) write.done();
    } catch (error) {
      if (batch.writes.length === 1) return void batch.writes[0]?.done(error);
      for (const write of batch.writes) {
        try {
          await send(write.patch);
          write.done();
        } catch (alone) {
          write.done(alone);
        }
      }
    }
  }

  /** Resolves `arrived` with true when this saver has put the checkpoint, false after `PUT_WAIT_MS`. */
  private whenPut(key: string): { arrived: Promise<boolean>; cancel: () => void } {
    let done: (arrived: boolean) => void = () => {};
    const arrived = new Promise<boolean>((resolve) => {
      done = resolve;
    });
    const onPut = () => done(true);
    const timer = setTimeout(() => done(false), PUT_WAIT_MS);
    const waiting = this.awaitingPut.get(key) ?? new Set();
    waiting.add(onPut);
    this.awaitingPut.set(key, waiting);
    const cancel = () => {
      clearTimeout(timer);
      waiting.delete(onPut);
      if (waiting.size === 0 && this.awaitingPut.get(key) === waiting) this.awaitingPut.delete(key);
    };
    return { arrived, cancel };
  }

  // ---- reads -------------------------------------------------------------------------------

  /** The checkpoint state at a node (the head when `nodeId` is undefined), if there is one. */
  private async stateAt(sessionId: string, nodeId: string | undefined): Promise<CheckpointState | undefined> {
    try {
      const view = await this.client.state.get(sessionId, nodeId === undefined ? { notes: true } : { node: nodeId, notes: true });
      return isCheckpointState(view.state) ? withNotes(view.state, view.notes) : undefined;
    } catch (error) {
      if (AgentStateError.is(error, 'node_not_found')) return undefined;
      throw error;
    }
  }

  /**
   * The states of some checkpoint nodes (at most `LIST_BATCH`), by the versions they point at,
   * with their pending writes. The versions of a session's checkpoints are read from its history,
   * newest first, a page at a time (`History`): a thread's recent checkpoints and what their steps
   * wrote since are its newest versions, so one page holds the states of a `list` of up to a few
   * hundred checkpoints; the first page read for a batch carries the notes of the batch's nodes.
   * A checkpoint alone in its session, or one whose version the pages do not hold, is read by
   * itself, at its node, with its notes. Only the listed checkpoints' notes are read: never every
   * node's of the thread, which grow with it.
   */
  private async statesOf(
    candidates: ListCandidate[],
    histories: ReadonlyMap<string, History>,
  ): Promise<Array<{ candidate: ListCandidate; state: CheckpointState | undefined }>> {
    const bySession = new Map<string, ListCandidate[]>();
    for (const candidate of candidates) bySession.set(candidate.sessionId, [...(bySession.get(candidate.sessionId) ?? []), candidate]);
    const notesOf = new Map<string, Record<string, Record<string, Json>>>();
    await inBatches([...bySession], async ([sessionId, some]) => {
      const oldest = Math.min(...some.map((candidate) => candidate.stateVersion).filter((version) => version > 0));
      // Not back through a long history for a few old checkpoints (`before` far back): those are read one by one.
      const history = histories.get(sessionId);
      if (some.length >= 2 && history && history.versionsTo(oldest) <= Math.max(VERSIONS_PAGE, HISTORY_PER_CHECKPOINT * some.length)) {
        notesOf.set(sessionId, await history.readBackTo(oldest, [...new Set(some.map((candidate) => candidate.nodeId))]));
      }
    });
    return inBatches(candidates, async (candidate) => {
      const history = histories.get(candidate.sessionId);
      const notes = notesOf.get(candidate.sessionId);
      const state =
        notes && history?.has(candidate.stateVersion)
          ? withNotes(history.stateOf(candidate.stateVersion) as CheckpointState, notes[candidate.nodeId])
          : await this.nodeState(candidate);
      return { candidate, state };
    });
  }

  /**
   * A checkpoint's state at its node with its notes (one request). A node whose state is not its
   * own checkpoint's (its put did not finish) is left out by the caller, as its notes would not
   * be the checkpoint's.
   */
  private async nodeState(candidate: ListCandidate): Promise<CheckpointState | undefined> {
    if (candidate.stateVersion === 0) return undefined;
    return this.stateAt(candidate.sessionId, candidate.nodeId);
  }

  /**
   * The tuple of a checkpoint's state, in `thread`: the thread whose session holds it, which is
   * not the thread the state names when the session is a copy (`copyThread`).
   */
  private async tupleOf(sessionId: string, state: CheckpointState, thread: string): Promise<CheckpointTuple> {
    const { checkpoint_ns, parent } = state;
    const thread_id = thread;
    const [checkpoint, metadata, pendingWrites] = await Promise.all([
      checkpointOf(this.serde, state),
      metadataOf(this.serde, state),
      pendingWritesOf(this.serde, state),
    ]);
    if (checkpoint.v < 4 && parent) await this.migratePendingSends(sessionId, checkpoint, parent);
    return {
      config: { configurable: { thread_id, checkpoint_ns, checkpoint_id: checkpointIdIn(state) } },
      checkpoint,
      metadata,
      pendingWrites,
      ...(parent ? { parentConfig: { configurable: { thread_id, checkpoint_ns, checkpoint_id: parent } } } : {}),
    };
  }

  /**
   * Checkpoints before format 4 kept the sends of a step as the parent's pending writes to the
   * `__pregel_tasks` channel; LangGraph reads them as that channel's value.
   */
  private async migratePendingSends(sessionId: string, checkpoint: Checkpoint, parentId: string): Promise<void> {
    const parent = await this.stateAt(sessionId, nodeIdOf(parentId));
    const writes = parent ? await pendingWritesOf(this.serde, parent) : [];
    checkpoint.channel_values[TASKS] = writes.filter(([, channel]) => channel === TASKS).map(([, , value]) => value);
    const versions = Object.values(checkpoint.channel_versions);
    checkpoint.channel_versions[TASKS] = versions.length > 0 ? maxChannelVersion(...versions) : this.getNextVersion(undefined);
  }

  /**
   * The sessions a `list` reads, each with its thread: one thread's (every namespace, or one), or
   * every thread's. A session's thread is the one its id names; a hashed id does not say, and a
   * copy's metadata then does (`undefined`: the thread its states name).
   */
  private async sessionsOf(thread: string | undefined, checkpointNs: string | undefined): Promise<Map<string, string | undefined>> {
    if (thread !== undefined) {
      const root = await this.ids.of(thread, '');
      if (checkpointNs === '') return new Map([[root, thread]]);
      if (checkpointNs !== undefined) return new Map([[await this.ids.of(thread, checkpointNs), thread]]);
      return new Map([root, ...(await this.namespaces.sessionsOf(root))].map((sessionId) => [sessionId, thread]));
    }
    const sessions = new Map<string, string | undefined>();
    const prefix = this.ids.start === '' ? {} : { prefix: this.ids.start };
    for await (const session of this.client.sessions.iterate({ ...prefix, limit: 500 })) {
      const decoded = this.ids.decode(session.sessionId);
      if (decoded.kind === 'foreign') continue;
      if (decoded.kind === 'named' && checkpointNs !== undefined && decoded.checkpointNs !== checkpointNs) continue;
      const copiedFor = session.metadata?.[COPY_THREAD_KEY];
      sessions.set(session.sessionId, decoded.kind === 'named' ? decoded.threadId : typeof copiedFor === 'string' ? copiedFor : undefined);
    }
    return sessions;
  }

  // ---- writes ------------------------------------------------------------------------------

  /**
   * The checkpoint's node and its state, in one request: the node appended under its parent's
   * node (or under `root`) with the checkpoint's state as the new node's whole state (API.md
   * section 3), so no reader ever sees the node without its checkpoint, and no write of the
   * checkpoint can land before it (`putWrites` waits for this `put`, see `awaitingPut`).
   */
  private async writeCheckpoint(put: {
    sessionId: string;
    nodeId: string;
    parentId: string | undefined;
    thread: string;
    checkpointNs: string;
    checkpoint: Checkpoint;
    metadata: CheckpointMetadata;
    write: CheckpointWrite;
  }): Promise<void> {
    const { sessionId, nodeId, parentId, thread, checkpointNs, write } = put;
    const message = { id: nodeId, role: CHECKPOINT_ROLE, content: summary(put.checkpoint, put.metadata, checkpointNs) };
    // Under its parent: every channel value it carries (layout.ts says why).
    const underParent = parentId
      ? await this.append(sessionId, nodeIdOf(parentId), message, checkpointState(thread, checkpointNs, write, parentId))
      : 'missing';
    if (underParent === 'appended') return;
    // No parent, one this session does not have, or a checkpoint id put again under another
    // parent (its node stays where it is): the state is all the checkpoint's own. A fork
    // (`updateState(config, …, "__copy__")`, put with no new versions) copies a checkpoint of
    // this thread, so every value it carries is one the thread stored at that version: a saver
    // that keeps values by version (MemorySaver, LangGraph's SQL savers) reads them all back.
    const fork = (put.metadata as { source?: string }).source === 'fork';
    const state = checkpointState(thread, checkpointNs, fork ? write : newChannelsOnly(write), parentId ?? null);
    if (underParent === 'missing' && (await this.append(sessionId, 'root', message, state)) === 'appended') {
      // A checkpoint under `root` is the first of its session (or of a session that expired): it gets the expiry.
      await this.threads.expire(sessionId);
      return;
    }
    await this.replaceAt(sessionId, nodeId, state, write);
  }

  /**
   * Sets the state of a checkpoint's node that is there already: a checkpoint put again keeps
   * its pending writes and its values (`putAgain`). Read and written with `If-Match`, so a write
   * of another process that lands between is read again, not lost; this saver's own writes of the
   * checkpoint sent before this `put` have landed (they took their turn before it). Writes of
   * other processes that keep landing make it read again, after a backoff, up to `PUT_AGAIN_ATTEMPTS` times.
   */
  private async replaceAt(sessionId: string, nodeId: string, state: CheckpointState, write: CheckpointWrite): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      const view = await this.client.state.get(sessionId, { node: nodeId });
      const next = isCheckpointState(view.state) ? putAgain(view.state, state, write) : state;
      try {
        await this.client.state.replace(sessionId, next as unknown as Json, { node: nodeId, ifMatch: view.version });
        return;
      } catch (error) {
        if (!AgentStateError.is(error, 'version_mismatch') || attempt >= PUT_AGAIN_ATTEMPTS) throw error;
        await backoff(attempt);
      }
    }
  }

  /**
   * Appends the checkpoint's node under `parentNode` (which moves the session's head to it) with
   * `state` as its whole state. A node that is there already under that parent (a retried `put`)
   * is taken as appended, its state set again.
   */
  private async append(
    sessionId: string,
    parentNode: string,
    message: { id: string; role: string; content: string },
    state: CheckpointState,
  ): Promise<'appended' | 'missing' | 'elsewhere'> {
    const request = { parentId: parentNode, messages: [message], replaceState: state as unknown as Json };
    try {
      await resent(() => this.client.messages.append(sessionId, request, { idempotencyKey: false }));
      return 'appended';
    } catch (error) {
      if (AgentStateError.is(error, 'node_not_found')) return 'missing';
      // The same checkpoint id put again under another parent: its node stays where it is.
      if (AgentStateError.is(error, 'node_exists')) return 'elsewhere';
      throw error;
    }
  }

  private async deleteSession(sessionId: string): Promise<void> {
    try {
      await this.client.sessions.delete(sessionId);
    } catch (error) {
      if (!AgentStateError.is(error, 'session_not_found')) throw error;
    }
  }
}

/**
 * A session's versions as `list` reads them: its history (`GET …/versions`), newest first, one
 * page at a time and only as far back as asked, each page going on from the last one's cursor.
 */
class History {
  private readonly states = new Map<number, CheckpointState | undefined>();
  private cursor: string | undefined;
  /** The oldest version the pages read so far reach down to (exclusive: it is not read yet). */
  private readTo: number;
  private done = false;

  constructor(
    private readonly client: AgentStateApi,
    private readonly sessionId: string,
    /** The session's newest version, as the pages of its nodes (or its tree) said. */
    newest: number,
  ) {
    this.readTo = newest + 1;
    this.done = newest === 0;
  }

  /**
   * Reads pages until they reach `version` (or the history's end), the first one with the notes
   * of `notesOf` (at most 200 nodes), and returns those notes by node. When the pages read
   * before reach that far already, one more version is read to carry them.
   */
  async readBackTo(version: number, notesOf: readonly string[]): Promise<Record<string, Record<string, Json>>> {
    let notes: Record<string, Record<string, Json>> | undefined;
    const page = async (limit: number) => {
      const read = await this.client.versions.list(this.sessionId, {
        limit,
        ...(this.cursor && !this.done ? { cursor: this.cursor } : {}),
        ...(notes === undefined ? { notesOf } : {}),
      });
      notes ??= read.notes ?? {};
      if (this.done) return;
      for (const listed of read.versions) {
        this.states.set(listed.version, isCheckpointState(listed.state) ? listed.state : undefined);
        this.readTo = Math.min(this.readTo, listed.version);
      }
      this.cursor = read.next;
      if (!read.next) this.done = true;
    };
    while (!this.done && this.readTo > version) await page(Math.min(VERSIONS_PAGE, this.readTo - version));
    if (notes === undefined) await page(1);
    return notes ?? {};
  }

  /** How many versions, newer than `version` and down to it, are still to read. */
  versionsTo(version: number): number {
    return this.done ? 0 : Math.max(0, this.readTo - version);
  }

  /** Whether the pages read hold `version` with a checkpoint's state. */
  has(version: number): boolean {
    return this.states.get(version) !== undefined;
  }

  stateOf(version: number): CheckpointState | undefined {
    return this.states.get(version);
  }
}

/**
 * Failures after which the append wrote nothing, or wrote and lost its answer. Not a timeout:
 * the first attempt may still be running, and two appends of one new node at once may both make it.
 */
const RESENDABLE = new Set(['network_error', 'throttled', 'unavailable']);

/**
 * Sends a write again after a failure that may have lost its answer (up to the client's default
 * attempts, with its backoff). `put`'s append and `putWrites`' patch go without an
 * `Idempotency-Key`: its record would cost two more DynamoDB writes per call, and neither needs
 * one. Sent again, the append finds its node under the same parent and sets the same state (no
 * write of that checkpoint can come between: its `putWrites` wait for this `put`), a note is
 * put again with the same value, and a patch sets the same members of the checkpoint's writes
 * to the same values.
 */
async function resent<T>(send: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await send();
    } catch (error) {
      const again = error instanceof AgentStateError && RESENDABLE.has(error.code) && attempt < defaultRetry.attempts;
      if (!again) throw error;
      await backoff(attempt);
    }
  }
}

/** Waits the client's default backoff after failed attempt `attempt` (random, up to base·2^(attempt-1), capped). */
function backoff(attempt: number): Promise<void> {
  const ceiling = Math.min(defaultRetry.maxDelayMs, defaultRetry.baseDelayMs * 2 ** (attempt - 1));
  return new Promise((resolve) => setTimeout(resolve, Math.random() * ceiling));
}

/**
 * The next batch of `list`'s checkpoints, in its order: at most `most` and `LIST_BATCH`, and no
 * more than fit `NOTES_OF_BYTES` of node ids in the request that reads their notes; at least one
 * while any is left.
 */
async function nextBatch(order: CheckpointOrder, most: number): Promise<ListCandidate[]> {
  const batch: ListCandidate[] = [];
  let bytes = 0;
  while (batch.length < Math.min(most, LIST_BATCH)) {
    // A session that has no node left reads a page of the whole batch's size, not the rest of the
    // batch: the next batch would otherwise start with another request for it.
    const next = await order.peek(Math.min(most, LIST_BATCH));
    if (!next) break;
    // Each id as the query carries it, and its separator (`%2C`).
    const size = encodeURIComponent(next.nodeId).length + 3;
    if (batch.length > 0 && bytes + size > NOTES_OF_BYTES) break;
    bytes += size;
    order.take(next);
    batch.push(next);
  }
  return batch;
}

function threadName(threadId: unknown): string {
  const thread = typeof threadId === 'number' ? String(threadId) : threadId;
  if (typeof thread !== 'string' || thread === '') {
    throw new TypeError(`thread_id must be a non-empty string (got ${JSON.stringify(threadId)})`);
  }
  return thread;
}

function namespaceOf(config: RunnableConfig): string {
  const namespace = (config.configurable?.checkpoint_ns as unknown) ?? '';
  if (typeof namespace !== 'string') throw new TypeError(`checkpoint_ns must be a string (got ${JSON.stringify(namespace)})`);
  return namespace;
}

/** One line the inspector's tree shows for the node: the step, its source, and what wrote it. */
function summary(checkpoint: Checkpoint, metadata: CheckpointMetadata, checkpointNs: string): string {
  const writers = Object.keys((metadata as { writes?: Record<string, unknown> | null }).writes ?? {});
  const step = `step ${metadata.step} · ${metadata.source}${writers.length > 0 ? ` · ${writers.join(', ')}` : ''}`;
  return `${checkpointNs === '' ? '' : `[${checkpointNs}] `}${step} · ${checkpoint.id}`;
}
