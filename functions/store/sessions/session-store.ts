import { PutCommand, TransactWriteCommand } from '@aws-sdk/lib-dynamodb';
import type { Json } from '../../core/json/json.js';
import { AgentStateError } from '../../core/kernel/errors.js';
import { ROOT_NODE } from '../../core/kernel/ids.js';
import { expiryOf, type Lifetime, type LifetimeSettings, layerOf, resolveLifetime } from '../../core/model/lifetime.js';
import type {
  ClosingTip,
  NodeRecord,
  NotesRead,
  NotesWindow,
  Page,
  SessionMeta,
  SessionScope,
  Tip,
  VersionRecord,
} from '../../core/model/model.js';
import { type SessionListOptions, type SessionStore, StaleTipError } from '../../core/model/ports.js';
import { rootNode } from '../../core/model/tree.js';
import type { PruneOptions, PruneReport } from '../log/history-prune.js';
import { entryOf, type VersionPlace } from '../log/log-items.js';
import { nodesOfLife, readNodesBefore } from '../log/node-index.js';
import { putNote, readNotes, readNotesOf } from '../log/node-notes.js';
import type { Due } from '../log/prune-due.js';
import { ERASE_RESERVE_MS, INLINE_ERASE_MS, isAbandonedCopyItem } from '../log/session-writes.js';
import { decodeLineage, type LineageEntry } from '../state/lineage.js';
import { piecesOf, sweepPieces } from '../state/state-pieces.js';
import * as versionItem from '../state/version-item.js';
import { KIND_ATTRIBUTE, LOG_ITEM_KIND } from '../table/item-kinds.js';
import * as keys from '../table/keys.js';
import { forEachInRange } from '../table/paging.js';
import { batchGet, conditions, type Item, isConditionFailure, isOwnWrite, type TableClient } from '../table/table-client.js';
import { entryItems } from './list-entries.js';
import { DynamoDbSessionHistory } from './session-history.js';
import * as sessionItem from './session-item.js';
import { listSessions } from './session-list.js';

/**
 * The session log (session-log.ts) with its history reads (session-history.ts), and what only
 * the sessions, tree, state and commits groups ask of it: creating, deleting and listing
 * sessions, the whole tree, retention and the sweep of unused pieces.
 */
/** How many times the copy's opening is tried when its claim loses a race. */
const OPEN_ATTEMPTS = 5;

/** `409 session_exists`. */
function sessionExists(scope: SessionScope): AgentStateError {
  return new AgentStateError('session_exists', `session ${scope.sessionId} already exists`, { sessionId: scope.sessionId });
}

export class DynamoDbSessionStore extends DynamoDbSessionHistory implements SessionStore {
  constructor(
    table: TableClient,
    pathSegmentBytes?: number,
    lifetimeDefaults?: Lifetime,
    /** How long a `DELETE` erases at most before it hands the rest to the change hook (`AGENTSTATE_DELETE_ERASE_MS`; tests make it small). */
    private readonly eraseBudgetMs?: number,
  ) {
    super(table, pathSegmentBytes, lifetimeDefaults);
  }

  /**
   * Deletes the session (session-delete.ts, a chunk of its own); false when there was none. It
   * erases until `remainingMs` (the request's time left) less `ERASE_RESERVE_MS`, or its budget,
   * whichever is first; what is left then, the change hook erases.
   */
  async deleteSession(scope: SessionScope, remainingMs?: number): Promise<boolean> {
    const erasing = Math.min(
      this.eraseBudgetMs ?? Number.POSITIVE_INFINITY,
      remainingMs === undefined ? INLINE_ERASE_MS : remainingMs - ERASE_RESERVE_MS,
    );
    return (await this.deleter.deleteSession(scope, undefined, { deadline: Date.now() + Math.max(0, erasing) })).found;
  }

  /**
   * The change hook's sweep of a session whose item TTL removed (API.md section 12: gone within
   * 48 h): carries out its expiry as the next write would, when its log agrees that it expired.
   */
  async sweepExpired(scope: SessionScope, expiredAt: string, unopened?: true): Promise<void> {
    await this.deleter.deleteSession(scope, { expiredAt, ...(unopened ? { unopened } : {}) });
  }

  /**
   * Closes the session for the erasure of a user (`owner`; null: of the whole tenant), while it
   * is that user's since the erasure began (session-delete.ts `closeOnly`): the life it closed;
   * null when it is not.
   */
  async closeForErasure(scope: SessionScope, owner: { userId: string; before: string; erasureId: string } | null): Promise<number | null> {
    return (await this.loadDeleter()).closeOnly(scope, owner);
  }

  /**
   * Erases a session an erasure closed in `life`, unless that delete is done already
   * (session-delete.ts `finishClosed`): false when the erase goes on past `deadline` (epoch ms).
   * `eraser`: the name its erasure's every run erases under.
   */
  async finishErasure(scope: SessionScope, life: number, options: { deadline?: number; eraser?: string } = {}): Promise<boolean> {
    return (await this.loadDeleter()).finishClosed(scope, life, options);
  }

  /**
   * The retention sweep's run of a delete whose fence closing `life` came due (its eraser's hold
   * ended without closing it: the eraser died, or its hand-off to the change hook was lost):
   * finishes the erase as the next `DELETE` of the id would, for `INLINE_ERASE_MS` at most or
   * until `deadline`, and hands on what is left; never closes a later life. Whether the fence is
   * closed.
   */
  async finishClosing(scope: SessionScope, life: number, deadline?: number): Promise<boolean> {
    const until = Math.min(deadline ?? Number.POSITIVE_INFINITY, Date.now() + INLINE_ERASE_MS);
    return (await this.loadDeleter()).finishClosed(scope, life, { deadline: until, markErasure: true });
  }

  /** The change hook's run of an erase a delete handed to it (session-delete.ts `finishHandedOff`): false when its time ran out first. */
  async finishDelete(scope: SessionScope, deadline?: number): Promise<boolean> {
    return (await this.loadDeleter()).finishHandedOff(scope, deadline);
  }

  /** Finishes the delete that closed `tip` when it was abandoned halfway (a commit that finds it). */
  async settleClosing(scope: SessionScope, tip: ClosingTip): Promise<void> {
    if (this.deleter.isAbandoned(tip)) await this.deleter.deleteSession(scope);
  }

  async createSession(scope: SessionScope, meta: SessionMeta, agentLifetime?: LifetimeSettings): Promise<SessionMeta> {
    // A session made while a delete erases its id would be erased with it, and one made over
    // the fence of a delete that stopped halfway would be erased by the write that finishes
    // that delete. So wait for a delete in progress (the caller retries), and finish one that
    // was abandoned (or carry out an expiry), before putting the session item.
    const tip = await this.readTip(scope, { withState: false });
    const plain = { tenant: scope.tenant, sessionId: scope.sessionId };
    if (tip.kind === 'closing') {
      // Another request's copy is being written into the id: taken, as by a session.
      if (tip.unopened && !this.deleter.isAbandoned(tip)) throw sessionExists(scope);
      if (!this.deleter.isAbandoned(tip)) throw new StaleTipError('the session is being deleted');
      // Not erased yet when it did not fit the time: the change hook goes on with it, and the caller waits.
      if (!(await this.deleter.deleteSession(plain)).erased) throw new StaleTipError('the session is being deleted');
    }
    const lifetime = resolveLifetime(this.lifetimeDefaults && layerOf(this.lifetimeDefaults), agentLifetime);
    const created: SessionMeta = { ...meta, lifetime, expiresAtMs: expiryOf(lifetime, Date.parse(meta.updatedAt)) };
    const writeId = crypto.randomUUID();
    const { copy } = scope;
    // Its metadata, if any, in an item of its own beside it, which the session item names (session-item.ts).
    const stamp = meta.metadata === null ? undefined : sessionItem.newMetadataStamp();
    const put = {
      TableName: this.table.tableName,
      Item: {
        ...(copy === undefined
          ? sessionItem.encode(scope, created, stamp)
          : sessionItem.encodeUnopened({ ...scope, copy }, created, this.table.nowSeconds(), stamp)),
        writeId,
      },
      ConditionExpression: conditions.itemIsNew,
      ReturnValuesOnConditionCheckFailure: 'ALL_OLD' as const,
    };
    // In every list it belongs to once this answers (API.md section 2): the session item is its
    // entry in the tenant's list, and its entries in its user's, agent's and metadata's lists
    // (list-entries.ts) are written with it, all or nothing. A copy's too: no list shows it until
    // it opens (session-list.ts), but an erasure of its user or tenant, which walks those lists,
    // must find it from the moment it exists, however late it would open.
    const beside = [
      ...(meta.metadata === null || stamp === undefined ? [] : [sessionItem.encodeMetadata(scope, meta.metadata, stamp)]),
      ...entryItems(scope, meta),
    ];
    let existing: Item | undefined;
    try {
      if (beside.length === 0) {
        await this.table.send(new PutCommand(put));
      } else {
        await this.table.send(
          new TransactWriteCommand({
            TransactItems: [{ Put: put }, ...beside.map((Item) => ({ Put: { TableName: this.table.tableName, Item } }))],
          }),
        );
      }
      return created;
    } catch (error) {
      if (isConditionFailure(error)) {
        existing = error.Item ?? {};
      } else {
        const reasons = (error as { name?: string; CancellationReasons?: Array<{ Code?: string; Item?: Item }> }).CancellationReasons;
        const first = (error as { name?: string }).name === 'TransactionCanceledException' ? reasons?.[0] : undefined;
        if (first?.Code !== 'ConditionalCheckFailed') {
          if (reasons?.some((reason) => reason.Code === 'TransactionConflict')) throw new StaleTipError();
          throw error;
        }
        existing = first.Item ?? {};
      }
    }
    // A retried write whose first attempt landed finds its own item: that is the session we made.
    if (isOwnWrite(existing, writeId)) return created;
    // A session of that id with nothing in its log that expired: erased first, as a delete
    // would (API.md section 12), then the caller tries again on the empty id.
    if (tip.kind === 'empty' && tip.lifetime === undefined && expiredItem(existing, this.table.now())) {
      await this.deleter.deleteSession(plain);
      throw new StaleTipError('the session expired');
    }
    // A copy that stopped before it wrote its log (session-writes.ts `isAbandonedCopyItem`): erased the same way.
    if (tip.kind === 'empty' && isAbandonedCopyItem(existing, this.table.now())) {
      await this.deleter.deleteSession(plain);
      throw new StaleTipError('an abandoned copy was erased');
    }
    throw sessionExists(scope);
  }

  /**
   * Opens the session copy `scope.copy` wrote (session-copy.ts): one change of the log, the
   * first without the copy's mark, in a transaction with the session item, which loses its mark
   * and TTL and takes its place in the lists (log-writer.ts, `opensCopy`). From that change on,
   * every reader sees the whole copy; before it, none sees any of it.
   */
  async openCopy(scope: SessionScope & { copy: string }): Promise<void> {
    // The copy is the only writer of its session; a lost race (a follow's mark) is read again.
    for (let attempt = 1; ; attempt++) {
      const tip = await this.readTip(scope, { withState: false });
      if (tip.kind === 'closing') throw new AgentStateError('conflict', 'the copy was erased before it was opened; copy again');
      try {
        await this.commit(scope, {
          basedOn: tip,
          head: { id: tip.head, version: tip.headVersion, depth: tip.headDepth },
          newNodes: [],
          mayCreateSession: false,
          touchSessionAt: new Date(this.table.now()).toISOString(),
          opensCopy: true,
        });
        return;
      } catch (error) {
        if (!(error instanceof StaleTipError) || attempt >= OPEN_ATTEMPTS) throw error;
      }
    }
  }

  listSessions(tenant: string, options: SessionListOptions): Promise<Page<SessionMeta>> {
    return listSessions(this.table, tenant, options);
  }

  // ---- nodes ------------------------------------------------------------------------------

  async readTree(scope: SessionScope): Promise<{ tip: Tip; nodes: NodeRecord[] }> {
    // The tip, then the index: read side by side, a node indexed or a pointer moved by a change
    // that lands between the two reads would be missing (session-log.ts, `readTipWithNodes`).
    const tip = await this.readTip(scope, { withState: false });
    if (tip.kind === 'closing') return { tip, nodes: [] };
    const items: Item[] = [];
    await forEachInRange(this.table, { partition: keys.session(scope), prefix: keys.nodePrefix }, (item) => items.push(item));
    const nodes = new Map(nodesOfLife(items, tip.incarnation).map((node) => [node.id, node]));
    for (const node of tip.recentNodes) nodes.set(node.id, { ...node, preview: undefined });
    const moved = entryOf(tip)?.versionNode;
    if (moved && moved !== tip.head) {
      const node = nodes.get(moved) ?? (moved === ROOT_NODE ? rootNode('') : undefined);
      if (node) nodes.set(moved, { ...node, stateVersion: Math.max(node.stateVersion, tip.version) });
    }
    return { tip, nodes: [...nodes.values()] };
  }

  async readNodePage(
    scope: SessionScope,
    page: { before?: string; limit: number },
  ): Promise<{ tip: Tip; nodes: NodeRecord[]; more: boolean }> {
    // The tip, then the index, as the tree (readTree says why).
    const tip = await this.readTip(scope, { withState: false });
    if (tip.kind === 'closing') return { tip, nodes: [], more: false };
    // One node more than the page, so `more` is known without another read.
    const read = await readNodesBefore(this.table, scope, {
      ...(page.before === undefined ? {} : { before: page.before }),
      count: page.limit + 1,
      incarnation: tip.incarnation,
    });
    const nodes = new Map(read.nodes.map((node) => [node.id, node]));
    // The nodes of the tip's change, which may not be indexed yet, where they fall in the range read.
    const floor = read.complete ? undefined : read.nodes.at(-1)?.id;
    for (const node of tip.recentNodes) {
      const inRange = (page.before === undefined || node.id < page.before) && (floor === undefined || node.id > floor);
      if (inRange && node.id !== ROOT_NODE) nodes.set(node.id, { ...node, preview: undefined });
    }
    const moved = entryOf(tip)?.versionNode;
    const movedNode = moved && moved !== tip.head ? nodes.get(moved) : undefined;
    if (moved && movedNode) nodes.set(moved, { ...movedNode, stateVersion: Math.max(movedNode.stateVersion, tip.version) });
    const sorted = [...nodes.values()].sort((a, b) => (a.id < b.id ? 1 : a.id > b.id ? -1 : 0));
    return { tip, nodes: sorted.slice(0, page.limit), more: sorted.length > page.limit };
  }

  putNote(scope: SessionScope, note: { incarnation: number; nodeId: string; key: string; value: Json }): Promise<void> {
    return putNote(this.table, scope, note);
  }

  readNotes(scope: SessionScope, nodeId: string | undefined, window: NotesWindow): Promise<NotesRead> {
    return readNotes(this.table, scope, nodeId, window);
  }

  readNotesOf(scope: SessionScope, nodeIds: readonly string[], window: NotesWindow): Promise<NotesRead> {
    return readNotesOf(this.table, scope, nodeIds, window);
  }

  // ---- versions ---------------------------------------------------------------------------

  /**
   * The lineage after `from`, each window of 32 (`lineage`) one BatchGetItem. A version that
   * retention pruned is left out: while its stripped item is there, its own window carries the
   * walk on; once TTL removed it, the walk goes on from the windows it already holds, and ends
   * when none of them names a version that is left.
   */
  async getLineage(
    scope: SessionScope,
    from: VersionRecord,
    limit: number,
    bytes: { left: number; atLeastOne: boolean },
  ): Promise<{ versions: VersionRecord[]; prunedBefore?: number; filled?: boolean }> {
    const found: VersionRecord[] = [];
    let prunedBefore: number | undefined;
    let above = from.version;
    const place = from.place as VersionPlace | undefined;
    let window: readonly LineageEntry[] = place?.lineage ?? [];
    let used = 0;
    let filled = false;
    while (found.length < limit && window.length > 0 && place && !filled) {
      const items = await batchGet(
        this.table,
        window.map(({ version, seq }) => ({
          pk: keys.session(scope),
          sk: keys.logEntry({ incarnation: place.incarnation, base: version - 1, seq }),
        })),
      );
      const byVersion = new Map<number, Item>();
      for (const item of items) if (item[KIND_ATTRIBUTE] === LOG_ITEM_KIND.version) byVersion.set(Number(item.version), item);
      // The versions of the window the page takes: up to its limit, and before the one whose state
      // would pass the bytes one answer carries (at least one a page), so no other's pieces are read.
      const taken = new Set<Item>();
      let stop: number | undefined;
      for (const { version } of window) {
        const item = byVersion.get(version);
        if (!item || versionItem.isPruned(item)) continue;
        if (found.length + taken.size === limit) break;
        const size = versionItem.listedBytes(item);
        if (used + size > bytes.left && !(bytes.atLeastOne && found.length + taken.size === 0)) {
          filled = true;
          stop = version;
          break;
        }
        used += size;
        taken.add(item);
      }
      const pieces = await piecesOf(this.table, scope, [...taken]);
      // The window of the farthest item still there, stripped or not, carries the walk on.
      let farther: LineageEntry[] = [];
      for (const { version } of window) {
        if (version === stop) break;
        const item = byVersion.get(version);
        if (item) farther = decodeLineage(item.lineage);
        if (!item || versionItem.isPruned(item)) {
          prunedBefore ??= above;
          continue;
        }
        const record = await this.versionRecord(scope, item, pieces);
        found.push(record);
        above = record.version;
        if (found.length === limit) break;
      }
      const reached = window.at(-1)?.version ?? 0;
      window = farther.filter((entry) => entry.version < reached);
    }
    return { versions: found, ...(prunedBefore === undefined ? {} : { prunedBefore }), ...(filled ? { filled } : {}) };
  }

  /**
   * Retention (API.md section 12): one run of the session's pruning (log/history-prune.ts, a
   * chunk only the change hook loads), at most once a minute unless `force`. `builtThrough`:
   * the newest version whose change event is built; null when it was not its turn.
   */
  async pruneHistory(scope: SessionScope, options: PruneOptions = {}): Promise<PruneReport | null> {
    const { pruneHistory } = await import('../log/history-prune.js');
    return pruneHistory(this.table, scope, () => this.readTip(scope, { withState: false }), options);
  }

  async markPruneDue(scope: SessionScope): Promise<void> {
    const { markDue } = await import('../log/prune-marker.js');
    await markDue(this.table, scope, this.table.now());
  }

  /**
   * Sessions whose history is due for a retention run by now, and deletes whose erase is
   * (log/prune-due.ts), at most `perShard` per index partition.
   */
  async duePrunes(perShard: number): Promise<Due[]> {
    const { dueSessions } = await import('../log/prune-due.js');
    return dueSessions(this.table, this.table.now(), perShard);
  }

  /** Puts off a due entry whose run failed, `failures` in a row, by `delayMs` from now (log/prune-due.ts `putOff`). */
  async putOffDue(due: Due, failures: number, delayMs: number): Promise<void> {
    const { putOff } = await import('../log/prune-due.js');
    await putOff(this.table, due, failures, this.table.now() + delayMs);
  }

  /** Removes pieces of large states that no version names (see state-pieces.ts); how many. */
  sweepPieces(scope: SessionScope): Promise<number> {
    return sweepPieces(this.table, scope);
  }
}

/** Whether a session item returned by a failed condition says its session expired (wire format or not). */
function expiredItem(item: Record<string, unknown> | undefined, nowMs: number): boolean {
  const value = item?.[sessionItem.EXPIRES_ATTRIBUTE] as { N?: string } | number | undefined;
  const expires = typeof value === 'number' ? value : value?.N === undefined ? undefined : Number(value.N);
  return expires !== undefined && expires <= nowMs;
}
