import { randomUUID } from 'node:crypto';
import { DeleteCommand, GetCommand, PutCommand, QueryCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { AgentStateError } from '../core/errors.js';
import { ROOT_NODE } from '../core/ids.js';
import type { Json } from '../core/json.js';
import type { ClosingTip, NodeRecord, Page, SessionMeta, SessionScope, Tip, VersionRecord } from '../core/model.js';
import { type SessionListOptions, type SessionStore, StaleTipError, type TipChange } from '../core/ports.js';
import { decisionCompletionItems } from './decision-store.js';
import { documentPut } from './document-store.js';
import { nodeItem, sessionItem, tipItem, tombstoneItem, versionItem } from './item-codecs.js';
import { KIND_ATTRIBUTE, SLOT_ITEM_KIND } from './item-kinds.js';
import { keys } from './keys.js';
import { decodeCursor, invalidCursor, pageOf, prefixPageQuery, queryAll } from './paging.js';
import { nextSlot, sessionUpsert } from './session-writes.js';
import { piecesOf, putPieces, sweepPieces } from './state-pieces.js';
import { tableKeys } from './table.js';
import {
  batchDelete,
  batchGet,
  conditions,
  forEachInRange,
  type Item,
  isConditionFailure,
  isOwnWrite,
  type TableClient,
  type TaggedItem,
  transact,
} from './table-client.js';

const NODE_SUMMARY = 'sk, #id, parentId, #depth, #role, stateVersion, createdAt';
const NODE_SUMMARY_NAMES = { '#id': 'id', '#depth': 'depth', '#role': 'role' };
/** How many times a delete tries to close a session that keeps being written. */
const CLOSE_ATTEMPTS = 20;
/**
 * A tombstone older than this belongs to a delete that stopped (a function past its timeout
 * never comes back): the next write finishes that delete. Longer than any request may run.
 */
const ABANDONED_DELETE_MS = 60_000;

/**
 * Sessions, their message nodes and their versions: one item collection per session
 * (keys.ts, item-codecs.ts):
 *
 *   S#<tenant>#<session>   S                 the session (also in the activity index)
 *   S#<tenant>#<session>   N#<node>          a message node
 *   S#<tenant>#<session>   V#<000000000042>  version 42, or a head marker / a delete's
 *                                            tombstone in the top slot: the tip
 *
 * Every change of versions or of the head is one conditional write of the next tip item
 * (`commit`); the decision and document items a change carries go into the same transaction.
 */
export class DynamoDbSessionStore implements SessionStore {
  constructor(private readonly table: TableClient) {}

  // ---- the tip and the session item -------------------------------------------------------

  async readTip(scope: SessionScope, options: { withState: boolean }): Promise<Tip> {
    const { Items } = await this.table.send(
      new QueryCommand({
        TableName: this.table.tableName,
        KeyConditionExpression: 'pk = :pk AND begins_with(sk, :prefix)',
        ExpressionAttributeValues: { ':pk': keys.session(scope), ':prefix': keys.slotPrefix },
        ...(options.withState ? {} : tipItem.summary),
        ScanIndexForward: false,
        Limit: 1,
        ConsistentRead: true,
      }),
    );
    const item = Items?.[0];
    // A large state is in pieces: one more round, of every piece at once.
    const pieces = options.withState && versionItem.is(item) ? await piecesOf(this.table, scope, [item]) : new Map();
    return tipItem.decode(item, options, pieces);
  }

  async getMeta(scope: SessionScope): Promise<SessionMeta | null> {
    const { Item } = await this.table.send(
      new GetCommand({ TableName: this.table.tableName, Key: sessionItem.key(scope), ConsistentRead: true }),
    );
    return Item ? sessionItem.decode(Item) : null;
  }

  async createSession(scope: SessionScope, meta: SessionMeta): Promise<void> {
    // A session made while a delete erases its id would read as deleted, and one made over the
    // tombstone of a delete that stopped halfway would be erased by the write that finishes
    // that delete. So wait for a delete in progress (the caller retries), and finish one that
    // was abandoned, before putting the session item.
    const tip = await this.readTip(scope, { withState: false });
    if (tip.kind === 'closing') {
      if (!this.isAbandoned(tip)) throw new StaleTipError('the session is being deleted');
      await this.deleteSession(scope);
    }
    const writeId = randomUUID();
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
    const start = options.cursor === undefined ? undefined : decodeCursor(options.cursor, ['pk', 'sk', index.partitionKey, index.sortKey]);
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
    return pageOf((Items ?? []).map(sessionItem.decode), LastEvaluatedKey);
  }

  /**
   * Moves the session's `updatedAt` (and its place in the activity index) forward to `at`,
   * never back, and never creates a session. The change hook calls it after state writes,
   * which are single PutItems (the services ask for activity only with writes that are
   * transactions anyway; a single put that asks gets it here, after the put). Best effort: the
   * activity order may trail (API.md section 2), and failing here must not fail a write that
   * already happened.
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

  /** Removes pieces of large states that no version names (see state-pieces.ts); how many. */
  sweepPieces(scope: SessionScope): Promise<number> {
    return sweepPieces(this.table, scope);
  }

  // ---- deleting a session -----------------------------------------------------------------

  /**
   * Erases every item of the session. A write that read the tip before the delete must not
   * land after it (it would leave a version of a session that no longer exists), so the
   * delete first closes the session: a tombstone takes the tip's next place under the same
   * condition a write would meet, and every write based on an earlier tip fails its own. The
   * items are then deleted, the tombstone last; until it is gone the session reads as unknown
   * and writers wait (a `closing` tip), after which a write starts a new session.
   *
   *   writer reads tip V#41 ──┐   delete puts tombstone V#42 ✓, erases V#1…V#41, nodes, …
   *   writer puts V#42 ✗ ─────┘   re-reads: closing → retries → tombstone gone → new V#1
   */
  async deleteSession(scope: SessionScope): Promise<boolean> {
    return this.erase(scope, { spareLease: false });
  }

  /**
   * The delete itself. A decision that finds an abandoned delete finishes it from inside its
   * lease (`spareLease`): erasing the lease too would make the decision's own commit fail as
   * if it had lost the lease. (A lease outliving its session is harmless: it has a TTL.)
   */
  private async erase(scope: SessionScope, options: { spareLease: boolean }): Promise<boolean> {
    const tombstone = await this.closeSession(scope);
    const itemKeys: Item[] = [];
    await queryAll(
      (start) =>
        this.table.send(
          new QueryCommand({
            TableName: this.table.tableName,
            KeyConditionExpression: 'pk = :pk',
            ExpressionAttributeValues: { ':pk': keys.session(scope) },
            ProjectionExpression: 'pk, sk',
            ExclusiveStartKey: start,
            ConsistentRead: true,
          }),
        ),
      (item) => {
        if (item.sk === tombstone || (options.spareLease && item.sk === keys.lease)) return;
        itemKeys.push({ pk: item.pk, sk: item.sk });
      },
    );
    await batchDelete(this.table, itemKeys);
    if (tombstone) {
      await this.table.send(new DeleteCommand({ TableName: this.table.tableName, Key: { pk: keys.session(scope), sk: tombstone } }));
    }
    return itemKeys.length > 0 || tombstone !== null;
  }

  /**
   * Puts the delete's tombstone where the next write would go (the slot after a version, or
   * over a head marker), with that write's condition; a write that wins the race first makes
   * it read the tip again. Resolves with the tombstone's sort key, or null when the session
   * has no tip to guard (nothing written; a delete of that is a delete of a few items).
   */
  private async closeSession(scope: SessionScope): Promise<string | null> {
    for (let attempt = 1; ; attempt++) {
      const tip = await this.readTip(scope, { withState: false });
      if (tip.kind === 'closing') return keys.slot(tip.slot);
      if (tip.kind === 'empty') return null;
      const { slot, claim } = nextSlot(tip);
      try {
        await this.table.send(
          new PutCommand({
            TableName: this.table.tableName,
            Item: tombstoneItem.encode(scope, slot, new Date(this.table.now()).toISOString()),
            ...claim,
          }),
        );
        return keys.slot(slot);
      } catch (error) {
        // A write took the place first (or the SDK retried our own landed put: the next read
        // sees our tombstone). Writes are short; a session written faster than it can be
        // closed for this long is refused rather than deleted halfway.
        if (!isConditionFailure(error) || attempt >= CLOSE_ATTEMPTS) {
          throw isConditionFailure(error)
            ? new AgentStateError('conflict', 'the session is changing too fast to delete; try again', { attempts: attempt })
            : error;
        }
      }
    }
  }

  async settleClosing(scope: SessionScope, tip: ClosingTip, options: { spareLease?: boolean } = {}): Promise<void> {
    if (this.isAbandoned(tip)) await this.erase(scope, { spareLease: options.spareLease ?? false });
  }

  private isAbandoned(tip: ClosingTip): boolean {
    return tip.since !== null && this.table.now() - Date.parse(tip.since) > ABANDONED_DELETE_MS;
  }

  // ---- nodes ------------------------------------------------------------------------------

  async getNode(scope: SessionScope, nodeId: string): Promise<NodeRecord | null> {
    const { Item } = await this.table.send(
      new GetCommand({ TableName: this.table.tableName, Key: nodeItem.key(scope, nodeId), ConsistentRead: true }),
    );
    return Item ? nodeItem.decode(Item) : null;
  }

  async getNodes(scope: SessionScope, nodeIds: readonly string[]): Promise<Map<string, NodeRecord>> {
    const items = await batchGet(
      this.table,
      unique(nodeIds).map((nodeId) => nodeItem.key(scope, nodeId)),
    );
    return new Map(items.map((item) => [nodeItem.idOf(item), nodeItem.decode(item)]));
  }

  async listNodes(scope: SessionScope, options: { withMessages?: boolean } = {}): Promise<NodeRecord[]> {
    const nodes: NodeRecord[] = [];
    await forEachInRange(
      this.table,
      { partition: keys.session(scope), prefix: keys.nodePrefix },
      (item) => nodes.push(nodeItem.decode(item)),
      {
        ProjectionExpression: options.withMessages ? `${NODE_SUMMARY}, message` : NODE_SUMMARY,
        ExpressionAttributeNames: NODE_SUMMARY_NAMES,
      },
    );
    return nodes;
  }

  // ---- versions ---------------------------------------------------------------------------

  async getVersion(scope: SessionScope, version: number): Promise<VersionRecord | null> {
    const { Item } = await this.table.send(
      new GetCommand({ TableName: this.table.tableName, Key: versionItem.key(scope, version), ConsistentRead: true }),
    );
    return versionItem.is(Item) ? versionItem.decode(Item, await piecesOf(this.table, scope, [Item])) : null;
  }

  async getVersions(scope: SessionScope, versions: readonly number[]): Promise<Map<number, VersionRecord>> {
    const items = await batchGet(
      this.table,
      unique(versions).map((version) => versionItem.key(scope, version)),
    );
    const versionItems = items.filter(versionItem.is);
    const pieces = await piecesOf(this.table, scope, versionItems);
    const found = versionItems.map((item) => versionItem.decode(item, pieces));
    return new Map(found.map((record) => [record.version, record]));
  }

  /**
   * The state of one version alone, for the change hook's `prev`: one strongly consistent
   * GetItem of its slot (the previous version may have been written milliseconds before), and
   * its pieces when it is large.
   */
  async getVersionState(scope: SessionScope, version: number): Promise<{ state: Json } | null> {
    const { Item } = await this.table.send(
      new GetCommand({
        TableName: this.table.tableName,
        Key: versionItem.key(scope, version),
        ProjectionExpression: '#kind, #state, stateZ, stateP, stateN',
        ExpressionAttributeNames: { '#kind': KIND_ATTRIBUTE, '#state': 'state' },
        ConsistentRead: true,
      }),
    );
    if (!versionItem.is(Item)) return null;
    return { state: versionItem.decodeState(Item, await piecesOf(this.table, scope, [Item])) };
  }

  async listVersions(scope: SessionScope, options: { limit: number; cursor?: string }): Promise<Page<VersionRecord>> {
    const range = { tableName: this.table.tableName, partition: keys.session(scope), prefix: keys.slotPrefix };
    const page = prefixPageQuery(range, { ...options, newestFirst: true, consistent: true });
    const { Items, LastEvaluatedKey } = await this.table.send(
      new QueryCommand({
        ...page,
        // The top slot may hold a head marker (or a delete's tombstone), which is not a version.
        FilterExpression: '#kind = :version',
        ExpressionAttributeNames: { '#kind': KIND_ATTRIBUTE },
        ExpressionAttributeValues: { ...page.ExpressionAttributeValues, ':version': SLOT_ITEM_KIND.version },
      }),
    );
    const pieces = await piecesOf(this.table, scope, Items ?? []);
    return pageOf(
      (Items ?? []).map((item) => versionItem.decode(item, pieces)),
      LastEvaluatedKey,
    );
  }

  // ---- the one way anything about versions or the head changes ------------------------------

  /**
   * Writes the next tip item, conditional on the tip read, together with whatever else the
   * change needs. A change that is only the tip item is a single PutItem, the common case of
   * a state write at the head; anything more is one transaction.
   *
   *   writer A reads tip V#41 ──┐            ┌── writer B reads tip V#41
   *   A puts V#42 if absent  ✓  │            │   B puts V#42 if absent ✗ → re-read, V#43
   */
  async commit(scope: SessionScope, change: TipChange): Promise<void> {
    const { basedOn } = change;
    // Nothing may be written into a session while it is deleted; the caller retries. A delete
    // that stopped halfway (its function timed out) is finished by the writes that find it.
    if (basedOn.kind === 'closing') {
      await this.settleClosing(scope, basedOn, { spareLease: change.decision !== undefined });
      throw new StaleTipError('the session is being deleted');
    }
    const { tableName } = this.table;
    const { slot, claim: tipCondition } = nextSlot(basedOn);
    const at = change.touchSessionAt;
    const encoded = change.version ? versionItem.encodeTexts(change.version) : null;
    // A large state's pieces go first, then the one conditional write that names them: a
    // crash or a lost race in between leaves pieces no version names, never a version without
    // its pieces (the collector, state-pieces.ts, removes the former).
    if (encoded) await putPieces(this.table, scope, encoded, change.version?.basePieces ?? []);
    const tipItemOfChange = tipItem.encode(
      scope,
      slot,
      {
        head: change.head,
        touchedAt: at ?? basedOn.touchedAt,
        agentId: change.sessionAgentId === undefined ? basedOn.agentId : change.sessionAgentId,
      },
      encoded ? { version: encoded } : { markerSeq: basedOn.kind === 'marker' ? basedOn.markerSeq + 1 : 1 },
    );

    // Each item of a transaction is tagged with what it is, so a cancellation can say why.
    const items: TaggedItem[] = [
      { role: 'tip', item: { Put: { TableName: tableName, Item: tipItemOfChange, ...tipCondition } } },
      ...change.newNodes.map(
        (node): TaggedItem => ({
          role: 'node',
          nodeId: node.id,
          item: { Put: { TableName: tableName, Item: nodeItem.encode(scope, node), ConditionExpression: conditions.itemIsNew } },
        }),
      ),
      ...change.nodePointers.map(
        (pointer): TaggedItem => ({
          role: 'pointer',
          item: {
            Update: {
              TableName: tableName,
              Key: nodeItem.key(scope, pointer.id),
              // The root has no item until the head first leaves it; then this creates it.
              UpdateExpression: 'SET stateVersion = :version',
              ...(pointer.id === ROOT_NODE ? {} : { ConditionExpression: conditions.itemExists }),
              ExpressionAttributeValues: { ':version': pointer.version },
            },
          },
        }),
      ),
      ...(change.decision ? decisionCompletionItems(this.table, scope, change.decision) : []),
      ...(change.documents ?? []).map((write) => documentPut(this.table, scope, write)),
    ];

    if (items.length === 1 && !change.mayCreateSession) {
      const writeId = randomUUID();
      try {
        await this.table.send(
          new PutCommand({
            TableName: tableName,
            Item: { ...tipItemOfChange, writeId },
            ...tipCondition,
            ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
          }),
        );
      } catch (error) {
        if (!isConditionFailure(error)) throw error;
        // The SDK retries a request whose answer was lost; if the first attempt landed, the
        // slot now holds our own item and the retry fails its condition. That is success.
        if (!isOwnWrite(error.Item, writeId)) throw new StaleTipError();
      }
      if (at) await this.moveActivity(scope, at);
      return;
    }

    if (at) items.push({ role: 'session', item: { Update: sessionUpsert(tableName, scope, at) } });
    await transact(this.table, items);
  }
}

function unique<T>(list: readonly T[]): T[] {
  return [...new Set(list)];
}
