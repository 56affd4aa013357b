import { GetCommand, PutCommand, QueryCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { AgentStateError } from '../core/errors.js';
import { ROOT_NODE } from '../core/ids.js';
import type { Json } from '../core/json.js';
import type { PathRead } from '../core/message-path.js';
import type { ClosingTip, NodeRecord, Page, SessionMeta, SessionScope, Tip, VersionRecord } from '../core/model.js';
import { type RecentChanges, type SessionListOptions, type SessionStore, StaleTipError, type TipChange } from '../core/ports.js';
import { rootNode } from '../core/tree.js';
import { sessionItem, versionItem } from './item-codecs.js';
import { KIND_ATTRIBUTE, LOG_ITEM_KIND } from './item-kinds.js';
import { keys, logPositionOf } from './keys.js';
import { entryOf, isFence, type LogEntry, readLogItem, tipOf, type VersionPlace, versionOf } from './log-items.js';
import { LogWriter } from './log-writer.js';
import { nodesOfLife, readNode, readNodes } from './node-index.js';
import { decodeCursor, invalidCursor, pageOf } from './paging.js';
import { PathReader } from './paths.js';
import type { SessionDeleter } from './session-delete.js';
import { type AbandonedDeletes, isAbandonedDelete } from './session-writes.js';
import { piecesOf, sweepPieces } from './state-pieces.js';
import { tableKeys } from './table.js';
import { batchGet, conditions, forEachInRange, type Item, isConditionFailure, isOwnWrite, type TableClient } from './table-client.js';

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
  'version',
  'node',
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
 */
export class DynamoDbSessionStore implements SessionStore {
  private readonly writer: LogWriter;
  private readonly deleter: AbandonedDeletes;
  /** The deleter, imported by the first delete (session-delete.ts: a chunk no other request reads). */
  private deleterLoad: Promise<SessionDeleter> | undefined;

  constructor(
    private readonly table: TableClient,
    /** How many bytes of the log one part of a path read spans (paths.ts; tests make it small). */
    private readonly pathSegmentBytes?: number,
  ) {
    this.deleter = {
      isAbandoned: (tip) => isAbandonedDelete(tip, table.now()),
      deleteSession: async (scope) => (await this.loadDeleter()).deleteSession(scope),
    };
    this.writer = new LogWriter(table, this.deleter, (scope, at) => this.moveActivity(scope, at));
  }

  private loadDeleter(): Promise<SessionDeleter> {
    this.deleterLoad ??= import('./session-delete.js').then(
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

  async readTip(scope: SessionScope, options: { withState: boolean; recent?: RecentChanges }): Promise<Tip> {
    const { Items } = await this.table.send(
      new QueryCommand({
        TableName: this.table.tableName,
        KeyConditionExpression: 'pk = :pk AND begins_with(sk, :prefix)',
        ExpressionAttributeValues: { ':pk': keys.session(scope), ':prefix': keys.logPrefix },
        ...(options.withState ? {} : WITHOUT_STATE_PROJECTION),
        ScanIndexForward: false,
        // A page: no Limit, so DynamoDB stops at 1 MB of the log (and reads no further).
        ...(options.recent === 'page' ? {} : { Limit: options.recent ? RECENT_CHANGES : 1 }),
        ConsistentRead: true,
      }),
    );
    const [top, ...older] = Items ?? [];
    const entry = top ? readLogItem(top) : null;
    // A large state is in pieces: one more round, of every piece at once.
    const pieces = options.withState && top && entry && !isFence(entry) ? await piecesOf(this.table, scope, [top]) : undefined;
    const tip = tipOf(entry, { withState: options.withState, ...(pieces ? { pieces } : {}) });
    if (!options.recent || !entry || isFence(entry)) return tip;
    // The newest changes read with the tip, kept for a path read at the head (readPath).
    const recent = older.map(readLogItem).filter((read): read is LogEntry => read !== null && !isFence(read));
    return { ...tip, log: { ...entry, recent } };
  }

  async readTipWithNodes(
    scope: SessionScope,
    nodeIds: readonly string[],
    options: { withState: boolean; recent?: RecentChanges },
  ): Promise<{ tip: Tip; nodes: Map<string, NodeRecord> }> {
    const ids = [...new Set(nodeIds)];
    let tip: Tip;
    let nodes: Map<string, NodeRecord>;
    if (ids.length === 1) {
      // One node: its newest keys, whatever life they are of, beside the tip.
      const [readTip, found] = await Promise.all([this.readTip(scope, options), readNode(this.table, scope, ids[0] as string)]);
      tip = readTip;
      nodes = new Map(found && found.incarnation === tip.incarnation ? [[found.node.id, found.node]] : []);
    } else {
      // Several: one batch of their keys in the first life, read again in the tip's when that is another.
      const [readTip, found] = await Promise.all([
        this.readTip(scope, options),
        ids.length === 0 ? Promise.resolve(new Map<string, NodeRecord>()) : readNodes(this.table, scope, ids, 0),
      ]);
      tip = readTip;
      nodes = tip.incarnation === 0 || ids.length === 0 ? found : await readNodes(this.table, scope, ids, tip.incarnation);
    }
    if (tip.kind === 'closing') return { tip, nodes: new Map() };
    for (const node of tip.recentNodes) if (ids.includes(node.id)) nodes.set(node.id, node);
    // A write off the head moved its node's pointer in the tip only, so far.
    const moved = entryOf(tip)?.versionNode;
    if (moved && moved !== tip.head && ids.includes(moved)) {
      const node = nodes.get(moved) ?? (moved === ROOT_NODE ? rootNode('') : undefined);
      if (node) nodes.set(moved, { ...node, stateVersion: Math.max(node.stateVersion, tip.version) });
    }
    return { tip, nodes };
  }

  async getMeta(scope: SessionScope): Promise<SessionMeta | null> {
    const { Item } = await this.table.send(
      new GetCommand({ TableName: this.table.tableName, Key: sessionItem.key(scope), ConsistentRead: true }),
    );
    return Item ? sessionItem.decode(Item) : null;
  }

  async createSession(scope: SessionScope, meta: SessionMeta): Promise<void> {
    // A session made while a delete erases its id would be erased with it, and one made over
    // the fence of a delete that stopped halfway would be erased by the write that finishes
    // that delete. So wait for a delete in progress (the caller retries), and finish one that
    // was abandoned, before putting the session item.
    const tip = await this.readTip(scope, { withState: false });
    if (tip.kind === 'closing') {
      if (!this.deleter.isAbandoned(tip)) throw new StaleTipError('the session is being deleted');
      await this.deleter.deleteSession(scope);
    }
    const writeId = crypto.randomUUID();
    try {
      await this.table.send(
        new PutCommand({
          TableName: this.table.tableName,
          Item: { ...sessionItem.encode(scope, meta), writeId },
          ConditionExpression: conditions.itemIsNew,
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      );
    } catch (error) {
      // A retried put whose first attempt landed finds its own item: that is the session we made.
      if (isConditionFailure(error) && isOwnWrite(error.Item, writeId)) return;
      if (isConditionFailure(error)) {
        throw new AgentStateError('session_exists', `session ${scope.sessionId} already exists`, {
          sessionId: scope.sessionId,
        });
      }
      throw error;
    }
  }

  async listSessions(tenant: string, options: SessionListOptions): Promise<Page<SessionMeta>> {
    const index = tableKeys.sessionsIndex;
    const partition = keys.tenantSessions(tenant);
    const list = JSON.stringify([this.table.tableName, index.name, partition]);
    const start =
      options.cursor === undefined ? undefined : decodeCursor(options.cursor, ['pk', 'sk', index.partitionKey, index.sortKey], list);
    if (start && (start[index.partitionKey] !== partition || start.sk !== keys.sessionSort)) throw invalidCursor();
    const { Items, LastEvaluatedKey } = await this.table.send(
      new QueryCommand({
        TableName: this.table.tableName,
        IndexName: index.name,
        KeyConditionExpression: `${index.partitionKey} = :tenant`,
        // The index is ordered by activity, not by id, so a prefix can only filter: `Limit`
        // counts the entries read before the filter, and a page may come back sparse.
        ...(options.prefix === undefined
          ? { ExpressionAttributeValues: { ':tenant': partition } }
          : {
              FilterExpression: 'begins_with(sessionId, :prefix)',
              ExpressionAttributeValues: { ':tenant': partition, ':prefix': options.prefix },
            }),
        ScanIndexForward: false,
        Limit: options.limit,
        ExclusiveStartKey: start,
      }),
    );
    return pageOf((Items ?? []).map(sessionItem.decode), LastEvaluatedKey, list);
  }

  /**
   * Moves the session's `updatedAt` (and its place in the activity index) forward to `at`,
   * never back, and never creates a session. The change hook calls it after versions, which
   * are single PutItems, and the log's writer after other changes, at most once a minute per
   * session. Best effort: the activity order may trail (API.md section 2), and failing here
   * must not fail a write that already happened.
   */
  async moveActivity(scope: SessionScope, at: string): Promise<void> {
    try {
      await this.table.send(
        new UpdateCommand({
          TableName: this.table.tableName,
          Key: sessionItem.key(scope),
          UpdateExpression: 'SET updatedAt = :at, #activity = :activity',
          ConditionExpression: `${conditions.itemExists} AND updatedAt < :at`,
          ExpressionAttributeNames: { '#activity': tableKeys.sessionsIndex.sortKey },
          ExpressionAttributeValues: { ':at': at, ':activity': keys.activity(at, scope.sessionId) },
        }),
      );
    } catch (error) {
      if (!isConditionFailure(error)) console.warn('agentstate: could not move session activity forward', error);
    }
  }

  deleteSession(scope: SessionScope): Promise<boolean> {
    return this.deleter.deleteSession(scope);
  }

  async settleClosing(scope: SessionScope, tip: ClosingTip): Promise<void> {
    if (this.deleter.isAbandoned(tip)) await this.deleter.deleteSession(scope);
  }

  // ---- nodes and paths --------------------------------------------------------------------

  async readTree(scope: SessionScope): Promise<{ tip: Tip; nodes: NodeRecord[] }> {
    const items: Item[] = [];
    const [tip] = await Promise.all([
      this.readTip(scope, { withState: false }),
      forEachInRange(this.table, { partition: keys.session(scope), prefix: keys.nodePrefix }, (item) => items.push(item)),
    ]);
    if (tip.kind === 'closing') return { tip, nodes: [] };
    const nodes = new Map(nodesOfLife(items, tip.incarnation).map((node) => [node.id, node]));
    for (const node of tip.recentNodes) nodes.set(node.id, { ...node, preview: undefined });
    const moved = entryOf(tip)?.versionNode;
    if (moved && moved !== tip.head) {
      const node = nodes.get(moved) ?? (moved === ROOT_NODE ? rootNode('') : undefined);
      if (node) nodes.set(moved, { ...node, stateVersion: Math.max(node.stateVersion, tip.version) });
    }
    return { tip, nodes: [...nodes.values()] };
  }

  readPath(scope: SessionScope, tip: Tip, target: NodeRecord, options: { last?: number } = {}): Promise<PathRead> {
    const entry = entryOf(tip);
    const known = entry ? [entry, ...((entry as LogEntry & { recent?: LogEntry[] }).recent ?? [])] : [];
    return new PathReader(this.table, scope, tip.incarnation, known, this.pathSegmentBytes).read(target, options.last);
  }

  // ---- versions ---------------------------------------------------------------------------

  async getVersion(scope: SessionScope, version: number, tip?: Tip): Promise<VersionRecord | null> {
    if (version <= 0) return null;
    if (tip?.latest?.version === version) return tip.latest;
    // Without a tip, the first life is the likely one; a session deleted and made again has another.
    const incarnation = tip?.incarnation ?? 0;
    const found = await this.versionIn(scope, incarnation, version);
    if (found || tip) return found;
    const current = await this.readTip(scope, { withState: false });
    return current.incarnation === incarnation ? null : this.versionIn(scope, current.incarnation, version);
  }

  /** Version `version` of one life, as a record. */
  private async versionIn(scope: SessionScope, incarnation: number, version: number): Promise<VersionRecord | null> {
    const item = await this.versionItemIn(scope, incarnation, version);
    return item ? this.versionRecord(scope, item) : null;
  }

  /** The log item of version `version` of one life: the last change after version - 1, when it is that version. */
  private async versionItemIn(scope: SessionScope, incarnation: number, version: number): Promise<Item | null> {
    const { Items } = await this.table.send(
      new QueryCommand({
        TableName: this.table.tableName,
        KeyConditionExpression: 'pk = :pk AND begins_with(sk, :prefix)',
        ExpressionAttributeValues: { ':pk': keys.session(scope), ':prefix': keys.basePrefix(incarnation, version - 1) },
        ScanIndexForward: false,
        Limit: 1,
        ConsistentRead: true,
      }),
    );
    const item = Items?.[0];
    if (!item || item[KIND_ATTRIBUTE] !== LOG_ITEM_KIND.version || Number(item.version) !== version) return null;
    return item;
  }

  private async versionRecord(scope: SessionScope, item: Item, pieces?: ReadonlyMap<string, Item>): Promise<VersionRecord> {
    const entry = readLogItem(item) as LogEntry;
    return versionOf(entry, pieces ?? (await piecesOf(this.table, scope, [item])));
  }

  async getLineage(scope: SessionScope, from: VersionRecord, limit: number): Promise<VersionRecord[]> {
    const found: VersionRecord[] = [];
    let last = from;
    while (found.length < limit) {
      const place = last.place as VersionPlace | undefined;
      const wanted = (place?.lineage ?? []).slice(0, limit - found.length);
      if (!place || wanted.length === 0) break;
      const items = await batchGet(
        this.table,
        wanted.map(({ version, seq }) => ({
          pk: keys.session(scope),
          sk: keys.logEntry({ incarnation: place.incarnation, base: version - 1, seq }),
        })),
      );
      const pieces = await piecesOf(this.table, scope, items);
      const byVersion = new Map<number, VersionRecord>();
      for (const item of items) {
        if (item[KIND_ATTRIBUTE] === LOG_ITEM_KIND.version) {
          const record = await this.versionRecord(scope, item, pieces);
          byVersion.set(record.version, record);
        }
      }
      for (const { version } of wanted) {
        const record = byVersion.get(version);
        if (!record) throw new AgentStateError('internal', `version ${version} of a lineage is missing`);
        found.push(record);
        last = record;
      }
    }
    return found;
  }

  /**
   * Versions newest first: the log read backwards, its other changes left out. The first item
   * is the tip, so the list is of the session's current life; it ends where an older life's
   * changes begin. A page reads up to twice its limit of changes and ends at its last version.
   */
  async listVersions(scope: SessionScope, options: { limit: number; cursor?: string }): Promise<Page<VersionRecord>> {
    // A cursor is sealed for this session's version list (store/paging.ts).
    const list = JSON.stringify([this.table.tableName, keys.session(scope), 'versions']);
    const start = options.cursor === undefined ? undefined : decodeCursor(options.cursor, ['pk', 'sk'], list);
    if (start && (start.pk !== keys.session(scope) || !logPositionOf(String(start.sk)))) throw invalidCursor();
    const { Items, LastEvaluatedKey } = await this.table.send(
      new QueryCommand({
        TableName: this.table.tableName,
        KeyConditionExpression: 'pk = :pk AND begins_with(sk, :prefix)',
        ExpressionAttributeValues: { ':pk': keys.session(scope), ':prefix': keys.logPrefix },
        ScanIndexForward: false,
        Limit: Math.min(1000, options.limit * 2 + 8),
        ExclusiveStartKey: start,
        ConsistentRead: true,
      }),
    );
    const items = Items ?? [];
    const life = logPositionOf(String(start?.sk ?? items[0]?.sk ?? ''))?.incarnation;
    const versions: Item[] = [];
    let ended = false;
    for (const item of items) {
      if (logPositionOf(String(item.sk))?.incarnation !== life) {
        ended = true;
        break;
      }
      if (item[KIND_ATTRIBUTE] === LOG_ITEM_KIND.version) versions.push(item);
      if (versions.length === options.limit) break;
    }
    const pieces = await piecesOf(this.table, scope, versions);
    const records = await Promise.all(versions.map((item) => this.versionRecord(scope, item, pieces)));
    const lastRead = versions.at(-1);
    const full = versions.length === options.limit && (items.at(-1) !== lastRead || LastEvaluatedKey !== undefined);
    const next = ended ? undefined : full && lastRead ? { pk: lastRead.pk, sk: lastRead.sk } : LastEvaluatedKey;
    return pageOf(records, next, list);
  }

  /**
   * The state of one version alone, for the change hook's `prev`: one strongly consistent read
   * (the previous version may have been written milliseconds before).
   */
  async getVersionState(scope: SessionScope, version: number, incarnation = 0): Promise<{ state: Json } | null> {
    const item = await this.versionItemIn(scope, incarnation, version);
    if (!item) return null;
    return { state: versionItem.decodeState(item, await piecesOf(this.table, scope, [item])) };
  }

  /** Removes pieces of large states that no version names (see state-pieces.ts); how many. */
  sweepPieces(scope: SessionScope): Promise<number> {
    return sweepPieces(this.table, scope);
  }

  // ---- the one way anything about versions, the head or the lease changes --------------------

  commit(scope: SessionScope, change: TipChange): Promise<Tip> {
    return this.writer.commit(scope, change);
  }
}
