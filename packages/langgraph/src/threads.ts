import { type AgentStateApi, AgentStateError } from '@agentstate/client';
import type { RunnableConfig } from '@langchain/core/runnables';
import type { ChannelVersions, Checkpoint, CheckpointMetadata, CheckpointTuple, PendingWrite } from '@langchain/langgraph-checkpoint';
import type { SessionIds } from './ids.js';
import { inBatches, type NamespaceRegistry } from './namespaces.js';

/** The metadata member that names a copy's thread (read where a hashed session id cannot say). */
export const COPY_THREAD_KEY = 'thread_id';

/** What `prune` keeps of each thread: its latest checkpoint of every namespace, or nothing. */
export type PruneStrategy = 'keep_latest' | 'delete';

/** The saver's own operations that pruning uses to write a thread's latest checkpoints again. */
export interface CheckpointWriter {
  getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined>;
  put(config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, newVersions?: ChannelVersions): Promise<RunnableConfig>;
  putWrites(config: RunnableConfig, writes: PendingWrite[], taskId: string): Promise<void>;
  deleteThread(threadId: string): Promise<void>;
}

/**
 * Copies and prunes of whole threads (LangGraph's `copy_thread` and `prune`; API.md section 12
 * for the copy underneath). A thread is a session per checkpoint namespace, its subgraph
 * namespaces listed at the thread session's `root` node, so each works on every session of the
 * thread and then points the registry of the thread's session at the right ones.
 */
export class ThreadLifetime {
  constructor(
    private readonly client: AgentStateApi,
    private readonly ids: SessionIds,
    private readonly namespaces: NamespaceRegistry,
    private readonly ttlSeconds: number | undefined,
  ) {}

  /**
   * Copies every checkpoint and pending write of `source` (every namespace) to `target`, which
   * must have none: agentstate copies each session whole on the server (`POST …/copy` with
   * `tree`), so each checkpoint of the copy reads what it reads in the source, with the same
   * ids. A `source` without checkpoints copies nothing. Not one transaction: a copy that fails
   * halfway leaves what it copied under `target` (deleting `target` clears it).
   */
  async copy(source: string, target: string): Promise<void> {
    const sourceRoot = await this.ids.of(source, '');
    const targetRoot = await this.ids.of(target, '');
    const namespaces = await this.namespaces.entriesOf(sourceRoot);
    // The thread's own session first: a target that exists fails the copy before anything is written.
    if (!(await this.copySession(sourceRoot, targetRoot, target))) return;
    const copies = new Map<string, string>();
    await inBatches([...namespaces], async ([checkpointNs, sessionId]) => {
      const copy = await this.ids.of(target, checkpointNs);
      if (await this.copySession(sessionId, copy, target)) copies.set(checkpointNs, copy);
    });
    // The copy of the registry still names the source's sessions: point it at the copies.
    await this.namespaces.point(targetRoot, copies);
  }

  /**
   * Prunes each thread: `delete` removes it, `keep_latest` leaves only the latest checkpoint of
   * each of its namespaces (with its pending writes; its `parentConfig` still names the parent,
   * which is gone, as LangGraph's own savers do). The latest checkpoints are first written to a
   * scratch thread, then the thread is deleted and the scratch copied back, so a prune that
   * stops halfway loses nothing: run again, it finishes (see `resume`). Between the delete and
   * the copy back, the thread reads as empty.
   */
  async prune(threadIds: readonly string[], strategy: PruneStrategy, saver: CheckpointWriter): Promise<void> {
    if (strategy !== 'keep_latest' && strategy !== 'delete') {
      throw new TypeError(`strategy must be "keep_latest" or "delete" (got ${JSON.stringify(strategy)})`);
    }
    for (const thread of threadIds) {
      if (strategy === 'delete') {
        await saver.deleteThread(thread);
        continue;
      }
      const scratch = scratchThreadOf(thread);
      if (await this.resume(thread, scratch, saver)) continue;
      const latest = await this.latestCheckpoints(thread, saver);
      if (latest.length === 0) continue;
      for (const tuple of latest) await putAgain(saver, scratch, tuple);
      // A checkpoint put under a parent does not list its namespace (only a namespace's first does).
      for (const tuple of latest) {
        const checkpointNs = namespaceIn(tuple);
        if (checkpointNs !== '')
          await this.namespaces.register(await this.ids.of(scratch, ''), checkpointNs, await this.ids.of(scratch, checkpointNs));
      }
      await saver.deleteThread(thread);
      await this.copy(scratch, thread);
      await saver.deleteThread(scratch);
    }
  }

  /** Gives a session the saver's expiry (an idle one: it restarts with every write). */
  async expire(sessionId: string): Promise<void> {
    if (this.ttlSeconds !== undefined) await this.client.sessions.update(sessionId, { ttlSeconds: this.ttlSeconds });
  }

  /**
   * Finishes a prune of `thread` that stopped halfway, if one did (true then). Its scratch
   * thread holds the latest checkpoints; when the thread is gone, or its registry still names
   * the scratch's sessions (the copy back stopped before pointing it), the copy back is redone.
   * When the thread is still whole, the scratch is dropped and the prune starts over.
   */
  private async resume(thread: string, scratch: string, saver: CheckpointWriter): Promise<boolean> {
    const scratchRoot = await this.ids.of(scratch, '');
    if (!(await this.exists(scratchRoot))) return false;
    const threadRoot = await this.ids.of(thread, '');
    const scratchSessions = new Set(await this.namespaces.sessionsOf(scratchRoot));
    const registry = await this.namespaces.sessionsOf(threadRoot);
    const copiedHalfway = registry.some((sessionId) => scratchSessions.has(sessionId));
    if ((await this.exists(threadRoot)) && !copiedHalfway) {
      await saver.deleteThread(scratch);
      return false;
    }
    await saver.deleteThread(thread);
    await this.copy(scratch, thread);
    await saver.deleteThread(scratch);
    return true;
  }

  /** The latest checkpoint of each namespace of a thread. */
  private async latestCheckpoints(thread: string, saver: CheckpointWriter): Promise<CheckpointTuple[]> {
    const root = await this.ids.of(thread, '');
    const namespaces = ['', ...(await this.namespaces.entriesOf(root)).keys()];
    const tuples = await inBatches(namespaces, (checkpointNs) =>
      saver.getTuple({ configurable: { thread_id: thread, checkpoint_ns: checkpointNs } }),
    );
    return tuples.filter((tuple): tuple is CheckpointTuple => tuple !== undefined);
  }

  /** Copies one session, whole, for `thread`; false when the source does not exist. */
  private async copySession(source: string, target: string, thread: string): Promise<boolean> {
    try {
      await this.client.sessions.copy(source, { sessionId: target, tree: true, metadata: { [COPY_THREAD_KEY]: thread } });
    } catch (error) {
      if (AgentStateError.is(error, 'session_not_found')) return false;
      if (AgentStateError.is(error, 'session_exists')) {
        throw new Error(`Failed to copy the thread: the target thread ${JSON.stringify(thread)} has checkpoints (delete it first)`);
      }
      throw error;
    }
    await this.expire(target);
    return true;
  }

  private async exists(sessionId: string): Promise<boolean> {
    try {
      await this.client.sessions.get(sessionId);
      return true;
    } catch (error) {
      if (AgentStateError.is(error, 'session_not_found')) return false;
      throw error;
    }
  }
}

/**
 * The thread a prune of `thread` writes its latest checkpoints to first: a name no caller's
 * thread is likely to take, tied to the thread so that a prune run again finds it.
 */
function scratchThreadOf(thread: string): string {
  return `${thread}\u0000prune`;
}

/** Puts a checkpoint and its pending writes in `thread`, under its parent's id (absent there). */
async function putAgain(saver: CheckpointWriter, thread: string, tuple: CheckpointTuple): Promise<void> {
  const checkpointNs = namespaceIn(tuple);
  const parentId = tuple.parentConfig?.configurable?.checkpoint_id as string | undefined;
  const config = { configurable: { thread_id: thread, checkpoint_ns: checkpointNs, ...(parentId ? { checkpoint_id: parentId } : {}) } };
  const written = await saver.put(config, tuple.checkpoint, tuple.metadata ?? { source: 'update', step: -1, parents: {} });
  const byTask = new Map<string, PendingWrite[]>();
  for (const [taskId, channel, value] of tuple.pendingWrites ?? []) byTask.set(taskId, [...(byTask.get(taskId) ?? []), [channel, value]]);
  for (const [taskId, writes] of byTask) await saver.putWrites(written, writes, taskId);
}

function namespaceIn(tuple: CheckpointTuple): string {
  return (tuple.config.configurable?.checkpoint_ns as string | undefined) ?? '';
}
