import { GetCommand, QueryCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { AgentStateError } from '../../core/kernel/errors.js';
import { ROOT_NODE } from '../../core/kernel/ids.js';
import type { Lifetime } from '../../core/model/lifetime.js';
import type { PathRead } from '../../core/model/message-path.js';
import type { NodeRecord, SessionMeta, SessionScope, Tip, VersionRecord } from '../../core/model/model.js';
import type { FromReplica, RecentChanges, SessionLog, TipChange } from '../../core/model/ports.js';
import { rootNode } from '../../core/model/tree.js';
import { moveEntriesOf } from '../sessions/list-entries.js';
import type { SessionDeleter } from '../sessions/session-delete.js';
import * as sessionItem from '../sessions/session-item.js';
import { readSessionItems, sessionMetaOf } from '../sessions/session-read.js';
import { piecesOf } from '../state/state-pieces.js';
import * as versionItem from '../state/version-item.js';
import { FENCE_COPY_LIFE, FENCE_ERASURE, FENCE_HELD_UNTIL, FENCE_HOLDER, KIND_ATTRIBUTE, LOG_ITEM_KIND } from '../table/item-kinds.js';
import * as keys from '../table/keys.js';
import { tableKeys } from '../table/table.js';
import { batchGet, conditions, type Item, isConditionFailure, type TableClient } from '../table/table-client.js';
import { tipAsSeen } from './copy-marks.js';
import { entryOf, isFence, isUnbrokenRun, type LogEntry, nextPosition, readLogItem, tipOf, versionOf } from './log-items.js';
import { LogWriter } from './log-writer.js';
import { readNode, readNodes } from './node-index.js';
import { OwnClaims } from './own-claims.js';
import { PathReader } from './paths.js';
import { type AbandonedDeletes, ACTIVITY_EVERY_MS, isAbandonedDelete } from './session-writes.js';

/** New ids an append reads by key beside its tip at most (`tipByKey`): one BatchGetItem with the two log keys. */
const TIP_BY_KEY_IDS = 98;
/** How many of the newest changes a tip read with `recent` keeps (a decision's path at the head). */
const RECENT_CHANGES = 48;
/** Every attribute of a change but those its state occupies: a tip read that needs no state. */
const WITHOUT_STATE = [
  'pk',
  'sk',
  KIND_ATTRIBUTE,
  'createdAt',
  'writeId',
  't',
  'chain',
  'nodes',
  'decision',
  'fence',
  FENCE_HOLDER,
  FENCE_HELD_UNTIL,
  FENCE_COPY_LIFE,
  FENCE_ERASURE,
  'version',
  'node',
  // What a version's decision leaves out because the version holds it (log-items.ts, compactDecision).
  'agent',
  'decisionId',
  // Whether a change of a life with nothing written is provisional (session-writes.ts, `provisionalOf`).
  tableKeys.timeToLive,
].filter((name) => !(versionItem.stateAttributes as readonly string[]).includes(name));
const WITHOUT_STATE_PROJECTION = {
  ProjectionExpression: WITHOUT_STATE.map((_, index) => `#a${index}`).join(', '),
  ExpressionAttributeNames: Object.fromEntries(WITHOUT_STATE.map((name, index) => [`#a${index}`, name])),
};

/**
 * Sessions, their message nodes and their versions: one item collection per session
 * (keys.ts, log-items.ts, node-index.ts):
 *
 *   S#<tenant>#<session>   S                       the session (also in the activity index)
 *   S#<tenant>#<session>   V#<life>#<base>#<seq>   the log: one item per change, the tip last
 *   S#<tenant>#<session>   N#<node>#<life>[#p]     the index of the nodes the log moved past
 *
 * Every change of versions, the head or the lease is one conditional write of the log's next
 * place (log-writer.ts); reads start at the tip, the newest change, which says where the head
 * is and what it points at.
 *
 * This class is what every change and a decision use: the tip, the session item, a path, a
 * version and the commit (which finishes a delete it finds abandoned). session-store.ts adds
 * creating, listing and deleting sessions, the whole tree and the version history, which
 * decide's routes never call, so its bundle carries none of them.
 */
export class DynamoDbSessionLog implements SessionLog {
  private readonly writer: LogWriter;
  /** This process's claims, as the tip read of a note beside them (own-claims.ts). */
  private readonly claims: OwnClaims;
  protected readonly deleter: AbandonedDeletes;
  /** The deleter, imported by the first delete (session-delete.ts: a chunk no other request reads). */
  private deleterLoad: Promise<SessionDeleter> | undefined;

  constructor(
    protected readonly table: TableClient,
    /** How many bytes of the log one part of a path read spans (paths.ts; tests make it small). */
    private readonly pathSegmentBytes?: number,
    /** The deployment's lifetime defaults (API.md section 12): what a new session starts with. */
    protected readonly lifetimeDefaults?: Lifetime,
  ) {
    this.deleter = {
      isAbandoned: (tip) => isAbandonedDelete(tip, table.now()),
      deleteSession: async (scope, sweep, options) => {
        // A copy's undo erases once nothing it sent ahead is on its way (it would stay, unread and kept).
        if (scope.copy !== undefined) await this.writer.settled(scope);
        this.writer.forget(scope);
        return (await this.loadDeleter()).deleteSession(scope, sweep, options);
      },
    };
    this.claims = new OwnClaims(() => table.now());
    this.writer = new LogWriter(
      table,
      this.deleter,
      (scope, at, sessionMoved, lifetime) => this.moveActivity(scope, at, sessionMoved, lifetime),
      lifetimeDefaults,
      this.claims,
    );
  }

  protected loadDeleter(): Promise<SessionDeleter> {
    this.deleterLoad ??= import('../sessions/session-delete.js').then(
      ({ SessionDeleter }) => new SessionDeleter(this.table, (scope) => this.readTip(scope, { withState: false })),
      (error: unknown) => {
        // Not kept: the next delete tries the import again.
        this.deleterLoad = undefined;
        throw error;
      },
    );
    return this.deleterLoad;
  }

  // ---- the tip and the session item -------------------------------------------------------

  async readTip(
    scope: SessionScope,
    options: { withState: boolean; recent?: RecentChanges; fromReplica?: FromReplica; sessionItem?: boolean },
  ): Promise<Tip> {
    // With `sessionItem`, the one item read is the newest of the range from the session item to
    // the log's end: the tip when the log holds any change, else the item below it (of the
    // session's keys, only `SM` and the retention marker sort between `S` and the log). Nothing
    // there, and the session does not exist. The units are those of the one item read either way.
    const withSession = options.sessionItem === true && !options.recent && !options.fromReplica;
    const read = async (consistent: boolean) =>
      (
        await this.table.send(
          new QueryCommand({
            TableName: this.table.tableName,
            ...(withSession
              ? {
                  KeyConditionExpression: 'pk = :pk AND sk BETWEEN :low AND :high',
                  ExpressionAttributeValues: { ':pk': keys.session(scope), ':low': keys.sessionSort, ':high': keys.logRangeEnd },
                }
              : {
                  KeyConditionExpression: 'pk = :pk AND begins_with(sk, :prefix)',
                  ExpressionAttributeValues: { ':pk': keys.session(scope), ':prefix': keys.logPrefix },
                }),
            ...(options.withState ? {} : WITHOUT_STATE_PROJECTION),
            ScanIndexForward: false,
            // A page: no Limit, so DynamoDB stops at 1 MB of the log (and reads no further).
            ...(options.recent === 'page' ? {} : { Limit: options.recent ? RECENT_CHANGES : 1 }),
            ConsistentRead: consistent,
          }),
        )
      ).Items ?? [];
    // A check of the newest key is a path read's (with `recent`); a replica's tip alone is a writer's, which its put confirms.
    const fromReplica = options.fromReplica === 'checked' && !options.recent ? undefined : options.fromReplica;
    let items: Item[];
    let replica = false;
    if (fromReplica === 'checked') {
      // Beside the consistent key of the newest change, which the replica's run must reach.
      const [newest, replica] = await Promise.all([this.newestChange(scope), read(false)]);
      const reaches = newest !== undefined && replica.some((item) => item.sk === newest);
      items = reaches && isUnbrokenRun(replica) ? replica : await read(true);
    } else {
      items = await read(!fromReplica);
      // From a replica: kept only as one unbroken run of a live log (ports.ts, `fromReplica`).
      replica = fromReplica === true && isUnbrokenRun(items);
      if (fromReplica && !replica) items = await read(true);
    }
    // Read with the session's items below the log: an item found there is not a change.
    const absent = withSession && items.length === 0;
    if (withSession && items.length > 0 && !String(items[0]?.sk).startsWith(keys.logPrefix)) items = [];
    const [top, ...older] = items;
    const entry = top ? readLogItem(top) : null;
    // A large state is in pieces: one more round, of every piece at once.
    const pieces = options.withState && top && entry && !isFence(entry) ? await piecesOf(this.table, scope, [top]) : undefined;
    // A session whose expiry has come reads as closed from that moment (API.md section 12), and
    // a copy not opened yet as unknown to all but itself.
    const found = tipAsSeen(tipOf(entry, { withState: options.withState, ...(pieces ? { pieces } : {}) }), scope, this.table.now());
    const tip: Tip = replica ? { ...found, replica: true } : absent && found.kind === 'empty' ? { ...found, absent: true } : found;
    // What this process put ahead of a claim under a life this read shows closed, it takes back (log-writer.ts).
    if (!replica) await this.writer.unclaimed.lifeSeen(scope, tip);
    if (!options.recent || !entry || isFence(entry) || tip.kind === 'closing') return tip;
    // The newest changes read with the tip, kept for a path read at the head (readPath), and,
    // read with their states, for a version among them (getVersion).
    const recent = older.map(readLogItem).filter((read): read is LogEntry => read !== null && !isFence(read));
    return { ...tip, log: { ...entry, recent, ...(options.withState ? { recentStates: true } : {}) } };
  }

  /** The sort key of the log's newest change, read consistently (the read units of that item alone). */
  private async newestChange(scope: SessionScope): Promise<string | undefined> {
    const { Items } = await this.table.send(
      new QueryCommand({
        TableName: this.table.tableName,
        KeyConditionExpression: 'pk = :pk AND begins_with(sk, :prefix)',
        ExpressionAttributeValues: { ':pk': keys.session(scope), ':prefix': keys.logPrefix },
        ProjectionExpression: 'sk',
        ScanIndexForward: false,
        Limit: 1,
        ConsistentRead: true,
      }),
    );
    const sk = Items?.[0]?.sk;
    return typeof sk === 'string' ? sk : undefined;
  }

  /**
   * The tip, then the nodes it does not hold. Not side by side: the writer of each change puts
   * the index and moves the pointers its predecessor left (node-index.ts, `departure`) before it
   * claims its place, so once the tip is read, the index holds every change up to it. A node
   * read beside the tip could miss a change that lands between the two reads: a node indexed
   * then reads as absent, and a pointer moved then as older, which a write would take as its
   * base and write over the state that is there. A node of the tip's newest change needs no read.
   *
   * `expectNew` (an append, whose ids are its new messages) reads the nodes beside the tip, so
   * an append stays one round: the head's pointer is the tip's, and an absent id is what the
   * append expects. Only a node found off the head (a resent message, whose pointer the append
   * reuses) is read again after the tip. What that leaves open: two appends of the same new ids
   * at once, with two more changes landing between one's reads, could both make the node.
   * `expectHead` (the parent an append names, most often the head: LangGraph's `put` names the
   * checkpoint before it) is not read beside the tip: the head is the tip's to tell, whole
   * (`Tip.headNode`), and a parent that turns out not to be the head is read after the tip.
   */
  async readTipWithNodes(
    scope: SessionScope,
    nodeIds: readonly string[],
    options: {
      withState: boolean;
      recent?: RecentChanges;
      fromReplica?: FromReplica;
      expectNew?: boolean;
      expectHead?: string;
      ownClaim?: boolean;
    },
  ): Promise<{ tip: Tip; nodes: Map<string, NodeRecord> }> {
    const ids = [...new Set(nodeIds)];
    // A note: a claim of this process sent after it arrived stands for its read, when it knows
    // the nodes (own-claims.ts); the tip of a claim carries no state.
    if (options.ownClaim && !options.withState && !options.recent) {
      const seen = await this.claims.nextClaim(scope);
      if (seen && ids.every((id) => seen.nodes.has(id)))
        return { tip: seen.tip, nodes: new Map(ids.map((id) => [id, seen.nodes.get(id) as NodeRecord])) };
    }
    const { expectHead } = options;
    const besideIds = options.expectNew ? ids.filter((id) => id !== expectHead) : [];
    // An append: the index its change will owe, when this process made the change before it,
    // goes out now, beside the reads, instead of after them (log-writer.ts, `writeAhead`).
    if (options.expectNew) {
      this.writer.writeAhead(scope);
      this.claims.appendStarts(scope);
    }
    // New ids to look for, after a change this process made: that change and the ids by key, one request.
    const byKey =
      besideIds.length > 0 && !options.recent && !options.fromReplica ? await this.tipByKey(scope, besideIds, options) : undefined;
    const [tip, beside] = byKey
      ? [byKey, new Map<string, { node: NodeRecord; incarnation: number }>()]
      : await Promise.all([this.readTip(scope, options), besideIds.length > 0 ? this.readNodesOf(scope, besideIds, undefined) : undefined]);
    // A session being deleted, or one that does not exist, has no node to read.
    if (tip.kind === 'closing' || (tip.kind === 'empty' && tip.absent)) return { tip, nodes: new Map() };
    const nodes = new Map<string, NodeRecord>();
    const recent = new Set<string>();
    for (const node of tip.recentNodes) {
      if (!ids.includes(node.id)) continue;
      nodes.set(node.id, node);
      recent.add(node.id);
    }
    const moved = entryOf(tip)?.versionNode;
    // The root while it is the head is the tip's to tell (it has no index): nothing to read.
    let unread = ids.filter((id) => !recent.has(id) && !(id === ROOT_NODE && tip.head === ROOT_NODE));
    // The parent named is the head: the tip holds all an append needs of it (`Tip.headNode`).
    if (expectHead !== undefined && expectHead === tip.head) unread = unread.filter((id) => id !== expectHead);
    // A batch beside the tip reads the first life; in another, every id is read again in the tip's.
    if (beside && (byKey !== undefined || besideIds.length === 1 || tip.incarnation === 0)) {
      for (const [id, node] of beside) if (!recent.has(id) && node.incarnation === tip.incarnation) nodes.set(id, node.node);
      // Found beside the tip: immutable but for its pointer, which the tip gives for the head and a node it moved.
      unread = unread.filter((id) => !besideIds.includes(id) || (nodes.has(id) && id !== tip.head && id !== moved));
      for (const id of unread) nodes.delete(id);
    }
    if (unread.length > 0) {
      for (const [id, node] of await this.readNodesOf(scope, unread, tip.incarnation)) {
        if (node.incarnation === tip.incarnation) nodes.set(id, node.node);
      }
    }
    // A write off the head moved its node's pointer in the tip only, so far.
    if (moved && moved !== tip.head && ids.includes(moved)) {
      const node = nodes.get(moved) ?? (moved === ROOT_NODE ? rootNode('') : undefined);
      if (node) nodes.set(moved, { ...node, stateVersion: Math.max(node.stateVersion, tip.version) });
    }
    return { tip, nodes };
  }

  /**
   * The tip of a session whose last change this process made a moment ago, and that none of
   * `newIds` is indexed, by key in one request (LogWriter, `lastChange`): that change, the place
   * after it and each id's index item in that change's life. That change there and the place
   * after it free is what a read of the log's newest item tells (a change is put only in the
   * place after the one before, and a delete's fence takes the next place too), and an id is
   * indexed in the tip's life or in the tip's own change, or it is new. `undefined` when this
   * process has no such change, or the keys say something else (the log moved on, an id is
   * there): the caller reads the tip and the ids as any other process does.
   */
  private async tipByKey(scope: SessionScope, newIds: readonly string[], options: { withState: boolean }): Promise<Tip | undefined> {
    const last = this.writer.lastChange(scope);
    if (!last || newIds.length > TIP_BY_KEY_IDS) return undefined;
    const pk = keys.session(scope);
    const items = await batchGet(
      this.table,
      [{ pk, sk: last.key }, { pk, sk: last.next }, ...newIds.map((id) => ({ pk, sk: keys.nodeIndex(id, last.incarnation) }))],
      options.withState ? undefined : WITHOUT_STATE_PROJECTION,
    );
    const top = items.find((item) => item.sk === last.key);
    if (!top || items.length !== 1) {
      this.writer.forget(scope);
      return undefined;
    }
    const entry = readLogItem(top);
    if (!entry || isFence(entry)) return undefined;
    const pieces = options.withState ? await piecesOf(this.table, scope, [top]) : undefined;
    const tip = tipAsSeen(tipOf(entry, { withState: options.withState, ...(pieces ? { pieces } : {}) }), scope, this.table.now());
    if (tip.kind !== 'closing' && keys.logEntry(nextPosition(tip)) !== last.next) return undefined;
    return tip;
  }

  /**
   * Nodes by id, each with the life it is of: one Query for one id (its newest keys, whatever
   * life), one batch for several (of `incarnation`'s life, or the first when it is not known).
   */
  private async readNodesOf(
    scope: SessionScope,
    ids: readonly string[],
    incarnation: number | undefined,
  ): Promise<Map<string, { node: NodeRecord; incarnation: number }>> {
    if (ids.length === 1) {
      const found = await readNode(this.table, scope, ids[0] as string);
      return new Map(found ? [[found.node.id, found]] : []);
    }
    const life = incarnation ?? 0;
    const found = await readNodes(this.table, scope, ids, life);
    return new Map([...found].map(([id, node]) => [id, { node, incarnation: life }]));
  }

  /** The session's item and its metadata, in one request (session-read.ts). */
  async getMeta(scope: SessionScope): Promise<SessionMeta | null> {
    const read = await readSessionItems(this.table, scope);
    return read ? sessionMetaOf(scope, read.item, read.metadataItem) : null;
  }

  // ---- the session item's activity ------------------------------------------------------------

  /**
   * Moves the session's `updatedAt` (and its place in every list it is in) forward to `at`,
   * never back, and never creates a session. The change hook calls it after versions, which
   * are single PutItems, and the log's writer after other changes, at most once an interval
   * per session (`sessionMoved`: a transaction of the writer already moved the session item,
   * so only its list entries follow). Best effort: the activity order may trail (API.md
   * section 2), and failing here must not fail a write that already happened. The session item
   * holds no metadata (session-item.ts), so the update costs one write unit whatever the
   * metadata holds; the entries of its strings are read, not the metadata (`moveEntriesOf`).
   */
  async moveActivity(
    scope: SessionScope,
    at: string,
    sessionMoved = false,
    lifetime?: Lifetime,
    /** Only from an activity older than one interval: a mover that cannot tell from the tip whether it moved a moment ago. */
    options: { onceAnInterval?: boolean } = {},
  ): Promise<void> {
    const index = tableKeys.sessionsIndex;
    // A session with an idle expiry expires later with each write: its item says so too (lists, TTL).
    const expiry = lifetime ? sessionItem.lifetimeAttributes(lifetime, Date.parse(at)) : {};
    const moved = Object.entries(expiry).filter(([name]) => name !== 'lt');
    try {
      const session = sessionMoved
        ? (
            await this.table.send(
              new GetCommand({
                TableName: this.table.tableName,
                Key: sessionItem.key(scope),
                // What says which lists it is in (list-entries.ts `moveEntriesOf`); its metadata, if any, is not here.
                ProjectionExpression: 'userId, agentId, metadata, #stamp',
                ExpressionAttributeNames: { '#stamp': sessionItem.METADATA_STAMP_ATTRIBUTE },
              }),
            )
          ).Item
        : (
            await this.table.send(
              new UpdateCommand({
                TableName: this.table.tableName,
                Key: sessionItem.key(scope),
                // Both list keys: a session item written before the list index gains its place
                // there with its first move, and leaves the index that held every attribute.
                UpdateExpression: `${[
                  'SET updatedAt = :at, #partition = :partition, #activity = :activity',
                  ...moved.map((_, position) => `#x${position} = :x${position}`),
                ].join(', ')} REMOVE #oldPartition, #oldActivity`,
                ConditionExpression: `${conditions.itemExists} AND updatedAt < ${options.onceAnInterval ? ':due' : ':at'}`,
                ExpressionAttributeNames: {
                  '#partition': index.partitionKey,
                  '#activity': index.sortKey,
                  '#oldPartition': tableKeys.keysIndex.partitionKey,
                  '#oldActivity': tableKeys.keysIndex.sortKey,
                  ...Object.fromEntries(moved.map(([name], position) => [`#x${position}`, name])),
                },
                ExpressionAttributeValues: {
                  ':at': at,
                  ...(options.onceAnInterval ? { ':due': new Date(Date.parse(at) - ACTIVITY_EVERY_MS).toISOString() } : {}),
                  ':partition': keys.tenantSessions(scope.tenant, keys.activityShard(scope.sessionId)),
                  ':activity': keys.activity(at, scope.sessionId),
                  ...Object.fromEntries(moved.map(([, value], position) => [`:x${position}`, value])),
                },
                ReturnValues: 'ALL_NEW',
              }),
            )
          ).Attributes;
      if (session) await moveEntriesOf(this.table, scope, session, at);
    } catch (error) {
      if (!isConditionFailure(error)) console.warn('agentstate: could not move session activity forward', error);
    }
  }

  // ---- paths ------------------------------------------------------------------------------

  readPath(scope: SessionScope, tip: Tip, target: NodeRecord, options: { last?: number } = {}): Promise<PathRead> {
    const entry = entryOf(tip);
    const known = entry ? [entry, ...((entry as LogEntry & { recent?: LogEntry[] }).recent ?? [])] : [];
    return new PathReader(this.table, scope, tip.incarnation, known, this.pathSegmentBytes).read(target, options.last);
  }

  // ---- versions ---------------------------------------------------------------------------

  /**
   * Version `version` of the session's current life; null when there is none. A version that
   * retention pruned (its item stripped, or already removed: a life's versions have no gaps, so
   * one up to the tip's is missing only so) is `410 version_pruned`. With `tip`, the version a
   * node or the head pointed at as of that tip: found pruned, that tip was stale (the pruner
   * read a later one in which nothing pointed at it), which the caller turns into a re-read.
   */
  async getVersion(scope: SessionScope, version: number, tip?: Tip): Promise<VersionRecord | null> {
    if (version <= 0) return null;
    if (tip?.latest?.version === version) return tip.latest;
    const recent = tip ? recentVersion(tip, version) : undefined;
    if (recent) return versionOf(recent);
    if (tip) return tip.kind === 'closing' ? null : this.versionIn(scope, tip.incarnation, version, tip.version);
    // Without a tip, the first life is the likely one; a session deleted and made again has
    // another. The tip is read beside it, in the same round: a version tells neither whether
    // its session has expired since (API.md section 12) nor whether its life is the current one.
    const [current, found] = await Promise.all([this.readTip(scope, { withState: false }), this.versionItemIn(scope, 0, version)]);
    if (current.kind === 'closing') return null;
    if (current.incarnation !== 0) return this.versionIn(scope, current.incarnation, version, current.version);
    return this.recordOf(scope, found, version, current.version);
  }

  /**
   * Whether the change a log read found newest says its session reads as unknown to `scope`
   * (expired, or another's copy not opened yet): a tip read by a list of the log.
   */
  protected closedAtTop(scope: SessionScope, item: Item | undefined): boolean {
    const entry = item ? readLogItem(item) : null;
    return entry !== null && tipAsSeen(tipOf(entry, { withState: false }), scope, this.table.now()).kind === 'closing';
  }

  /** Version `version` of one life, as a record (`newest`: the life's latest version). */
  private async versionIn(scope: SessionScope, incarnation: number, version: number, newest: number): Promise<VersionRecord | null> {
    return this.recordOf(scope, await this.versionItemIn(scope, incarnation, version), version, newest);
  }

  /** The record of a version item read for `version`, or `410 version_pruned` when retention took it. */
  private async recordOf(scope: SessionScope, item: Item | null, version: number, newest: number): Promise<VersionRecord | null> {
    if (item && !versionItem.isPruned(item)) return this.versionRecord(scope, item);
    if (!item && version > newest) return null;
    throw new AgentStateError('version_pruned', `version ${version} was pruned by the session's retention`, { version });
  }

  /** The log item of version `version` of one life: the last change after version - 1, when it is that version. */
  protected async versionItemIn(scope: SessionScope, incarnation: number, version: number, consistent = true): Promise<Item | null> {
    const { Items } = await this.table.send(
      new QueryCommand({
        TableName: this.table.tableName,
        KeyConditionExpression: 'pk = :pk AND begins_with(sk, :prefix)',
        ExpressionAttributeValues: { ':pk': keys.session(scope), ':prefix': keys.basePrefix(incarnation, version - 1) },
        ScanIndexForward: false,
        Limit: 1,
        ConsistentRead: consistent,
      }),
    );
    const item = Items?.[0];
    if (!item || item[KIND_ATTRIBUTE] !== LOG_ITEM_KIND.version || Number(item.version) !== version) return null;
    return item;
  }

  protected async versionRecord(scope: SessionScope, item: Item, pieces?: ReadonlyMap<string, Item>): Promise<VersionRecord> {
    const entry = readLogItem(item) as LogEntry;
    return versionOf(entry, pieces ?? (await piecesOf(this.table, scope, [item])));
  }

  // ---- the one way anything about versions, the head or the lease changes --------------------

  commit(scope: SessionScope, change: TipChange): Promise<Tip> {
    return this.writer.commit(scope, change);
  }
}

/**
 * Version `version` among the changes a tip read brought along with their states (a decision's
 * tip read), when its state is whole in its item (not in pieces) and not pruned: no read needed.
 */
function recentVersion(tip: Tip, version: number): LogEntry | undefined {
  const log = tip.log as (LogEntry & { recentStates?: boolean }) | undefined;
  if (!log?.recentStates) return undefined;
  return log.recent?.find(
    (entry) =>
      entry.kind === LOG_ITEM_KIND.version &&
      Number(entry.item.version) === version &&
      entry.position.incarnation === tip.incarnation &&
      versionItem.pieceKeys(entry.item).length === 0 &&
      !versionItem.isPruned(entry.item),
  );
}
