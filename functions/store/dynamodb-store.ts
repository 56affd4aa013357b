import { randomUUID } from 'node:crypto';
import type { AttributeValue, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import {
  BatchGetCommand,
  BatchWriteCommand,
  DeleteCommand,
  DynamoDBDocumentClient,
  GetCommand,
  PutCommand,
  QueryCommand,
  TransactWriteCommand,
  UpdateCommand,
  type TransactWriteCommandInput,
} from '@aws-sdk/lib-dynamodb';
import { AgentStateError } from '../core/errors.js';
import { ROOT_NODE } from '../core/ids.js';
import type { Json, JsonObject } from '../core/json.js';
import type {
  AgentRecord,
  DecisionOutcome,
  DecisionRecord,
  DocumentRecord,
  DocumentRef,
  NodeRecord,
  Page,
  SessionMeta,
  SessionScope,
  ClosingTip,
  Tip,
  VersionCause,
  VersionRecord,
} from '../core/model.js';
import {
  LeaseLostError,
  NodeTakenError,
  StaleTipError,
  type AgentStore,
  type DecisionCompletion,
  type DecisionStore,
  type DocumentStore,
  type DocumentWrite,
  type IdempotencyClaim,
  type IdempotencyStore,
  type SessionListOptions,
  type SessionStore,
  type StoredResponse,
  type TipChange,
} from '../core/ports.js';
import type { StateFields } from '../core/fields.js';
import { emptyTip } from '../core/tree.js';
import { keys, slotOf } from './keys.js';
import { decodeLineage, encodeLineage } from './lineage.js';
import { decodeCursor, invalidCursor, pageOf, prefixPageQuery, queryAll, rangeQuery, type Item } from './paging.js';
import { tableKeys } from './table.js';

type TransactItem = NonNullable<TransactWriteCommandInput['TransactItems']>[number];
/** A transaction item and what it is, so that a cancellation reason can be explained. */
interface TaggedItem {
  role: 'tip' | 'node' | 'pointer' | 'decision' | 'lease' | 'session' | 'document';
  nodeId?: string;
  item: TransactItem;
}

/** Condition fragments, named so that every write says what it guards against. */
const conditions = {
  slotIsFree: 'attribute_not_exists(pk)',
  slotHoldsMarker: '#kind = :marker AND #seq = :seq',
  itemIsNew: 'attribute_not_exists(pk)',
  itemExists: 'attribute_exists(pk)',
} as const;

/** The condition parts of a write that claims a tip slot. */
interface SlotClaim {
  ConditionExpression: string;
  ExpressionAttributeNames?: Record<string, string>;
  ExpressionAttributeValues?: Record<string, unknown>;
}

/**
 * The slot the next write after `tip` goes to, and the condition that claims it: the slot
 * above a version must still be free; a head marker in the top slot may be replaced only while
 * it is the very marker that was read. Every writer of the tip (a commit, a delete's tombstone,
 * a document commit's guard) claims it this way, so any two that read the same tip cannot
 * both succeed.
 */
function nextSlot(tip: Tip): { slot: number; claim: SlotClaim } {
  switch (tip.kind) {
    case 'empty':
    case 'version':
      return { slot: tip.slot + 1, claim: { ConditionExpression: conditions.slotIsFree } };
    case 'marker':
      return {
        slot: tip.slot,
        claim: {
          ConditionExpression: conditions.slotHoldsMarker,
          ExpressionAttributeNames: { '#kind': 'kind', '#seq': 'seq' },
          ExpressionAttributeValues: { ':marker': 'm', ':seq': tip.markerSeq },
        },
      };
    case 'closing':
      // Nothing is written into a session while it is deleted; the writer re-reads and waits.
      throw new StaleTipError('the session is being deleted');
  }
}

const TIP_SUMMARY = 'pk, sk, #kind, #seq, version, head, headVersion, headDepth, touchedAt, agentId, createdAt';
const NODE_SUMMARY = 'sk, #id, parentId, #depth, #role, stateVersion, createdAt';
const NODE_SUMMARY_NAMES = { '#id': 'id', '#depth': 'depth', '#role': 'role' };
const BATCH_GET_LIMIT = 100;
const BATCH_WRITE_LIMIT = 25;
/** The kind of the item that closes a session while it is deleted (`deleteSession`). */
const TOMBSTONE = 'x';
/** How many times a delete tries to close a session that keeps being written. */
const CLOSE_ATTEMPTS = 20;
/**
 * A tombstone older than this belongs to a delete that stopped (a function past its timeout
 * never comes back): the next write finishes that delete. Longer than any request may run.
 */
const ABANDONED_DELETE_MS = 60_000;

function isAbandoned(tip: ClosingTip): boolean {
  return tip.since !== null && Date.now() - Date.parse(tip.since) > ABANDONED_DELETE_MS;
}
const IDEMPOTENCY_TTL_SECONDS = 24 * 60 * 60;

/**
 * The DynamoDB adapter: the only code that knows key shapes, conditions and DynamoDB's
 * exceptions. See keys.ts for the item layout.
 */
export class DynamoDbStore implements SessionStore, DocumentStore, IdempotencyStore, AgentStore, DecisionStore {
  private readonly doc: DynamoDBDocumentClient;

  constructor(
    client: DynamoDBClient,
    private readonly tableName: string,
  ) {
    this.doc = DynamoDBDocumentClient.from(client, {
      marshallOptions: { removeUndefinedValues: true, convertClassInstanceToMap: false },
    });
  }

  // ---- sessions -------------------------------------------------------------------------

  async readTip(scope: SessionScope, options: { withState: boolean }): Promise<Tip> {
    const { Items } = await this.send(
      new QueryCommand({
        TableName: this.tableName,
        KeyConditionExpression: 'pk = :pk AND begins_with(sk, :prefix)',
        ExpressionAttributeValues: { ':pk': keys.session(scope), ':prefix': keys.slotPrefix },
        ...(options.withState
          ? {}
          : { ProjectionExpression: TIP_SUMMARY, ExpressionAttributeNames: { '#kind': 'kind', '#seq': 'seq' } }),
        ScanIndexForward: false,
        Limit: 1,
        ConsistentRead: true,
      }),
    );
    const item = Items?.[0];
    if (!item) return emptyTip();
    const slot = slotOf(String(item.sk));
    if (item.kind === TOMBSTONE) {
      return { ...emptyTip(), kind: 'closing', slot, since: typeof item.createdAt === 'string' ? item.createdAt : null };
    }
    const head = {
      head: String(item.head),
      headVersion: Number(item.headVersion),
      headDepth: Number(item.headDepth),
      touchedAt: typeof item.touchedAt === 'string' ? item.touchedAt : null,
      agentId: typeof item.agentId === 'string' ? item.agentId : null,
    };
    if (item.kind === 'm') return { kind: 'marker', slot, markerSeq: Number(item.seq), version: slot - 1, ...head, latest: null };
    return { kind: 'version', slot, version: slot, ...head, latest: options.withState ? toVersion(item) : null };
  }

  async getMeta(scope: SessionScope): Promise<SessionMeta | null> {
    const { Item } = await this.send(
      new GetCommand({
        TableName: this.tableName,
        Key: { pk: keys.session(scope), sk: keys.sessionSort },
        ConsistentRead: true,
      }),
    );
    return Item ? toMeta(Item) : null;
  }

  async createSession(scope: SessionScope, meta: SessionMeta): Promise<void> {
    // A session made while a delete erases its id would read as deleted, and one made over the
    // tombstone of a delete that stopped halfway would be erased by the write that finishes
    // that delete. So wait for a delete in progress (the caller retries), and finish one that
    // was abandoned, before putting the session item.
    const tip = await this.readTip(scope, { withState: false });
    if (tip.kind === 'closing') {
      if (!isAbandoned(tip)) throw new StaleTipError('the session is being deleted');
      await this.deleteSession(scope);
    }
    const writeId = randomUUID();
    try {
      await this.send(
        new PutCommand({
          TableName: this.tableName,
          Item: { ...this.metaItem(scope, meta), writeId },
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
    const start =
      options.cursor === undefined
        ? undefined
        : decodeCursor(options.cursor, ['pk', 'sk', index.partitionKey, index.sortKey]);
    if (start && (start[index.partitionKey] !== partition || start.sk !== keys.sessionSort)) throw invalidCursor();
    const { Items, LastEvaluatedKey } = await this.send(
      new QueryCommand({
        TableName: this.tableName,
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
    return pageOf((Items ?? []).map(toMeta), LastEvaluatedKey);
  }

  /**
   * Erases every item of the session. A write that read the tip before the delete must not
   * land after it (it would leave a version of a session that no longer exists), so the
   * delete first closes the session: a tombstone takes the tip's next place under the same
   * condition a write would meet, and every write based on an earlier tip fails its own. The
   * items are then deleted, the tombstone last; until it is gone the session reads as unknown
   * and writers wait (a `closing` tip), after which a write starts a new session.
   *
   *   writer reads tip V#41 ──┐   delete puts tombstone V#42 ✓, erases V#1…V#41, nodes, …
   *   writer puts V#42 ✗ ─────┘   re-reads: deleting → retries → tombstone gone → new V#1
   */
  async deleteSession(scope: SessionScope): Promise<boolean> {
    const tombstone = await this.closeSession(scope);
    const itemKeys: Item[] = [];
    await queryAll(
      (start) =>
        this.send(
          new QueryCommand({
            TableName: this.tableName,
            KeyConditionExpression: 'pk = :pk',
            ExpressionAttributeValues: { ':pk': keys.session(scope) },
            ProjectionExpression: 'pk, sk',
            ExclusiveStartKey: start,
            ConsistentRead: true,
          }),
        ),
      (item) => {
        if (item.sk !== tombstone) itemKeys.push({ pk: item.pk, sk: item.sk });
      },
    );
    for (let offset = 0; offset < itemKeys.length; offset += BATCH_WRITE_LIMIT) {
      await this.deleteBatch(itemKeys.slice(offset, offset + BATCH_WRITE_LIMIT));
    }
    if (tombstone) {
      await this.send(new DeleteCommand({ TableName: this.tableName, Key: { pk: keys.session(scope), sk: tombstone } }));
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
        await this.send(
          new PutCommand({
            TableName: this.tableName,
            Item: { pk: keys.session(scope), sk: keys.slot(slot), kind: TOMBSTONE, createdAt: new Date().toISOString() },
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

  // ---- nodes ----------------------------------------------------------------------------

  async getNode(scope: SessionScope, nodeId: string): Promise<NodeRecord | null> {
    const { Item } = await this.send(
      new GetCommand({
        TableName: this.tableName,
        Key: { pk: keys.session(scope), sk: keys.node(nodeId) },
        ConsistentRead: true,
      }),
    );
    return Item ? toNode(Item) : null;
  }

  async getNodes(scope: SessionScope, nodeIds: readonly string[]): Promise<Map<string, NodeRecord>> {
    const items = await this.batchGet(scope, nodeIds.map(keys.node));
    return new Map(items.map((item) => [nodeIdOf(item), toNode(item)]));
  }

  async listNodes(scope: SessionScope, options: { withMessages?: boolean } = {}): Promise<NodeRecord[]> {
    const nodes: NodeRecord[] = [];
    await queryAll(
      (start) =>
        this.send(
          new QueryCommand({
            ...rangeQuery({ tableName: this.tableName, partition: keys.session(scope), prefix: keys.nodePrefix }),
            ProjectionExpression: options.withMessages ? `${NODE_SUMMARY}, message` : NODE_SUMMARY,
            ExpressionAttributeNames: NODE_SUMMARY_NAMES,
            ExclusiveStartKey: start,
          }),
        ),
      (item) => nodes.push(toNode(item)),
    );
    return nodes;
  }

  // ---- versions -------------------------------------------------------------------------

  async getVersion(scope: SessionScope, version: number): Promise<VersionRecord | null> {
    const { Item } = await this.send(
      new GetCommand({
        TableName: this.tableName,
        Key: { pk: keys.session(scope), sk: keys.slot(version) },
        ConsistentRead: true,
      }),
    );
    return Item && Item.kind === 'v' ? toVersion(Item) : null;
  }

  async getVersions(scope: SessionScope, versions: readonly number[]): Promise<Map<number, VersionRecord>> {
    const items = await this.batchGet(scope, versions.map(keys.slot));
    const found = items.filter((item) => item.kind === 'v').map(toVersion);
    return new Map(found.map((record) => [record.version, record]));
  }

  async listVersions(
    scope: SessionScope,
    options: { limit: number; cursor?: string },
  ): Promise<Page<VersionRecord>> {
    const range = { tableName: this.tableName, partition: keys.session(scope), prefix: keys.slotPrefix };
    const page = prefixPageQuery(range, { ...options, newestFirst: true, consistent: true });
    const { Items, LastEvaluatedKey } = await this.send(
      new QueryCommand({
        ...page,
        // The top slot may hold a head marker (or a delete's tombstone), which is not a version.
        FilterExpression: '#kind = :version',
        ExpressionAttributeNames: { '#kind': 'kind' },
        ExpressionAttributeValues: { ...page.ExpressionAttributeValues, ':version': 'v' },
      }),
    );
    return pageOf((Items ?? []).map(toVersion), LastEvaluatedKey);
  }

  // ---- the one way anything about versions or the head changes ---------------------------

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
      if (isAbandoned(basedOn)) await this.deleteSession(scope);
      throw new StaleTipError('the session is being deleted');
    }
    const { slot, claim: tipCondition } = nextSlot(basedOn);
    const at = change.touchSessionAt;
    const tipItem: Item = {
      pk: keys.session(scope),
      sk: keys.slot(slot),
      head: change.head.id,
      headVersion: change.head.version,
      headDepth: change.head.depth,
      touchedAt: at ?? basedOn.touchedAt ?? undefined,
      agentId: (change.sessionAgentId === undefined ? basedOn.agentId : change.sessionAgentId) ?? undefined,
      ...(change.version
        ? versionAttributes(change.version)
        : { kind: 'm', seq: basedOn.kind === 'marker' ? basedOn.markerSeq + 1 : 1 }),
    };

    // Each item of a transaction is tagged with what it is, so a cancellation can say why.
    const items: TaggedItem[] = [
      { role: 'tip', item: { Put: { TableName: this.tableName, Item: tipItem, ...tipCondition } } },
      ...change.newNodes.map(
        (node): TaggedItem => ({
          role: 'node',
          nodeId: node.id,
          item: {
            Put: {
              TableName: this.tableName,
              Item: this.nodeItem(scope, node),
              ConditionExpression: conditions.itemIsNew,
            },
          },
        }),
      ),
      ...change.nodePointers.map(
        (pointer): TaggedItem => ({
          role: 'pointer',
          item: {
            Update: {
              TableName: this.tableName,
              Key: { pk: keys.session(scope), sk: keys.node(pointer.id) },
              // The root has no item until the head first leaves it; then this creates it.
              UpdateExpression: 'SET stateVersion = :version',
              ...(pointer.id === ROOT_NODE ? {} : { ConditionExpression: conditions.itemExists }),
              ExpressionAttributeValues: { ':version': pointer.version },
            },
          },
        }),
      ),
      ...(change.decision ? this.decisionItems(scope, change.decision) : []),
      ...(change.documents ?? []).map((write) => this.documentItem(scope, write)),
    ];

    if (items.length === 1 && !change.mayCreateSession) {
      const writeId = randomUUID();
      try {
        await this.send(
          new PutCommand({
            TableName: this.tableName,
            Item: { ...tipItem, writeId },
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

    if (at) items.push({ role: 'session', item: { Update: this.sessionUpsert(scope, at) } });
    await this.transact(items);
  }

  // ---- documents (commit scopes) ---------------------------------------------------------

  async getDocument(ref: DocumentRef): Promise<DocumentRecord | null> {
    const { Item } = await this.send(new GetCommand({ TableName: this.tableName, Key: documentKey(ref), ConsistentRead: true }));
    if (!Item) return null;
    // TTL deletes lazily: an expired run reads as gone, as it soon will be.
    const expiresAt = Item[tableKeys.timeToLive];
    if (typeof expiresAt === 'number' && expiresAt * 1000 < Date.now()) return null;
    return {
      kind: ref.kind,
      id: ref.kind === 'shared' ? 'shared' : ref.id,
      version: Number(Item.version),
      state: JSON.parse(String(Item.state)) as Json,
      updatedAt: typeof Item.updatedAt === 'string' ? Item.updatedAt : null,
    };
  }

  async commitDocuments(
    scope: SessionScope,
    documents: ReadonlyArray<DocumentWrite>,
    guard: Tip | null,
    touchSessionAt?: string,
  ): Promise<void> {
    const items = documents.map((write) => this.documentItem(scope, write));
    if (touchSessionAt) items.push({ role: 'session', item: { Update: this.sessionUpsert(scope, touchSessionAt) } });
    if (guard) {
      // The tip slot the guard read must still be free (or hold the same marker).
      const { slot, claim } = nextSlot(guard);
      items.unshift({
        role: 'tip',
        item: { ConditionCheck: { TableName: this.tableName, Key: { pk: keys.session(scope), sk: keys.slot(slot) }, ...claim } },
      });
    }
    if (items.length === 0) return;
    await this.transact(items);
  }

  private documentItem(scope: SessionScope, write: DocumentWrite): TaggedItem {
    const { record } = write;
    return {
      role: 'document',
      item: {
        Put: {
          TableName: this.tableName,
          Item: {
            ...documentKey(documentRefOf(scope, record)),
            kind: `doc:${record.kind}`,
            version: record.version,
            state: JSON.stringify(record.state),
            updatedAt: record.updatedAt,
            // For the change event: whose commit this was (stream-images.ts reads them back).
            sessionId: scope.sessionId,
            author: write.author,
            ...(write.ttlSeconds ? { [tableKeys.timeToLive]: Math.floor(Date.now() / 1000) + write.ttlSeconds } : {}),
          },
          ...(write.basedOnVersion === 0
            ? { ConditionExpression: `${conditions.itemIsNew} OR #ttl < :now`, ExpressionAttributeNames: { '#ttl': tableKeys.timeToLive }, ExpressionAttributeValues: { ':now': Math.floor(Date.now() / 1000) } }
            : {
                ConditionExpression: 'version = :basedOn',
                ExpressionAttributeValues: { ':basedOn': write.basedOnVersion },
              }),
        },
      },
    };
  }

  // ---- agents ---------------------------------------------------------------------------

  async putAgent(tenant: string, agent: AgentRecord): Promise<boolean> {
    const { Attributes } = await this.send(
      new PutCommand({
        TableName: this.tableName,
        Item: {
          pk: keys.agents(tenant),
          sk: keys.agent(agent.agentId),
          agentId: agent.agentId,
          parentId: agent.parentId,
          worker: agent.worker ?? undefined,
          config: JSON.stringify(agent.config),
          stateFields: agent.stateFields ? JSON.stringify(agent.stateFields) : undefined,
          createdAt: agent.createdAt,
          updatedAt: agent.updatedAt,
        },
        ReturnValues: 'ALL_OLD',
      }),
    );
    return Attributes === undefined;
  }

  async getAgent(tenant: string, agentId: string): Promise<AgentRecord | null> {
    const { Item } = await this.send(
      new GetCommand({ TableName: this.tableName, Key: { pk: keys.agents(tenant), sk: keys.agent(agentId) }, ConsistentRead: true }),
    );
    return Item ? toAgent(Item) : null;
  }

  async listAgents(tenant: string, options: { limit: number; cursor?: string }): Promise<Page<AgentRecord>> {
    const { Items, LastEvaluatedKey } = await this.send(
      new QueryCommand(prefixPageQuery({ tableName: this.tableName, partition: keys.agents(tenant), prefix: keys.agentPrefix }, options)),
    );
    return pageOf((Items ?? []).map(toAgent), LastEvaluatedKey);
  }

  // ---- decisions ------------------------------------------------------------------------

  async getDecision(scope: SessionScope, decisionId: string): Promise<DecisionRecord | null> {
    const { Item } = await this.send(
      new GetCommand({
        TableName: this.tableName,
        Key: { pk: keys.session(scope), sk: keys.decision(decisionId) },
        ConsistentRead: true,
      }),
    );
    if (!Item) return null;
    const attempts = Number(Item.attempts ?? 0);
    if (Item.status === 'done' && typeof Item.outcome === 'string') {
      return { decisionId, status: 'done', attempts, outcome: JSON.parse(Item.outcome) as DecisionOutcome };
    }
    return { decisionId, status: 'failed', attempts };
  }

  async acquireLease(scope: SessionScope, token: string, untilMs: number): Promise<boolean> {
    try {
      await this.send(
        new PutCommand({
          TableName: this.tableName,
          Item: {
            pk: keys.session(scope),
            sk: keys.lease,
            holder: token,
            leaseUntil: untilMs,
            [tableKeys.timeToLive]: Math.ceil(untilMs / 1000) + 60,
          },
          // Free, or held by a decision that died without releasing it.
          ConditionExpression: `${conditions.itemIsNew} OR leaseUntil < :now`,
          ExpressionAttributeValues: { ':now': Date.now() },
        }),
      );
      return true;
    } catch (error) {
      if (isConditionFailure(error)) return false;
      throw error;
    }
  }

  async releaseLease(scope: SessionScope, token: string): Promise<void> {
    try {
      await this.send(
        new DeleteCommand({
          TableName: this.tableName,
          Key: { pk: keys.session(scope), sk: keys.lease },
          ConditionExpression: 'holder = :token',
          ExpressionAttributeValues: { ':token': token },
        }),
      );
    } catch (error) {
      if (!isConditionFailure(error)) throw error;
    }
  }

  async recordFailedAttempt(scope: SessionScope, decisionId: string): Promise<void> {
    try {
      await this.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: { pk: keys.session(scope), sk: keys.decision(decisionId) },
          UpdateExpression: 'SET #status = :failed, #ttl = :ttl ADD attempts :one',
          // Never downgrade a decision that is done.
          ConditionExpression: `${conditions.itemIsNew} OR #status = :failed`,
          ExpressionAttributeNames: { '#status': 'status', '#ttl': tableKeys.timeToLive },
          ExpressionAttributeValues: { ':failed': 'failed', ':one': 1, ':ttl': decisionExpiry() },
        }),
      );
    } catch (error) {
      if (!isConditionFailure(error)) throw error;
    }
  }

  async completeDecision(scope: SessionScope, completion: DecisionCompletion): Promise<void> {
    await this.transact(this.decisionItems(scope, completion));
  }

  private decisionItems(scope: SessionScope, completion: DecisionCompletion): TaggedItem[] {
    const { record, leaseToken } = completion;
    return [
      {
        role: 'decision',
        item: {
          Put: {
            TableName: this.tableName,
            Item: {
              pk: keys.session(scope),
              sk: keys.decision(record.decisionId),
              status: record.status,
              attempts: record.attempts,
              outcome: JSON.stringify(record.outcome),
              [tableKeys.timeToLive]: decisionExpiry(),
            },
          },
        },
      },
      {
        role: 'lease',
        item: {
          Delete: {
            TableName: this.tableName,
            Key: { pk: keys.session(scope), sk: keys.lease },
            ConditionExpression: 'holder = :token',
            ExpressionAttributeValues: { ':token': leaseToken },
          },
        },
      },
    ];
  }

  /**
   * Runs a transaction and explains a cancellation by the role of the item that failed: the
   * tip means the session moved on (re-read and retry); a new node, that its id was taken
   * meanwhile; the lease, that the decision outlived it. A conflict with another transaction
   * wrote nothing either, so it is a moved tip too.
   */
  private async transact(items: TaggedItem[]): Promise<void> {
    // Conditional puts carry this transaction's id and return the old item when they fail, so
    // a retry of a transaction that had in fact landed (its answer lost) is recognised.
    const writeId = randomUUID();
    const transactItems = items.map(({ role, item }) =>
      (role === 'tip' || role === 'document') && item.Put
        ? { Put: { ...item.Put, Item: { ...item.Put.Item, writeId }, ReturnValuesOnConditionCheckFailure: 'ALL_OLD' as const } }
        : item,
    );
    try {
      await this.send(new TransactWriteCommand({ TransactItems: transactItems }));
    } catch (error) {
      const reasons = (error as { CancellationReasons?: Array<{ Item?: Record<string, unknown> }> }).CancellationReasons ?? [];
      if (reasons.some((reason) => isOwnWrite(reason.Item, writeId))) return;
      throw translateCancellation(error, items);
    }
  }

  // ---- idempotency ----------------------------------------------------------------------

  async claim(tenant: string, key: string, fingerprint: string, lockMs: number): Promise<IdempotencyClaim> {
    const now = Date.now();
    const writeId = randomUUID();
    try {
      await this.send(
        new PutCommand({
          TableName: this.tableName,
          Item: {
            pk: keys.idempotency(tenant, key),
            sk: keys.idempotencySort,
            fingerprint,
            status: 'pending',
            lockedUntil: now + lockMs,
            writeId,
            [tableKeys.timeToLive]: Math.floor(now / 1000) + IDEMPOTENCY_TTL_SECONDS,
          },
          // Free, expired (TTL deletes lazily), or abandoned by a holder that died.
          ConditionExpression:
            'attribute_not_exists(pk) OR #ttl < :nowSeconds OR (#status = :pending AND lockedUntil < :now)',
          ExpressionAttributeNames: { '#ttl': tableKeys.timeToLive, '#status': 'status' },
          ExpressionAttributeValues: { ':nowSeconds': Math.floor(now / 1000), ':pending': 'pending', ':now': now },
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      );
      return { outcome: 'claimed' };
    } catch (error) {
      if (isConditionFailure(error) && error.Item) {
        // A retried claim whose first attempt landed finds its own claim: it holds the key.
        if (isOwnWrite(error.Item, writeId)) return { outcome: 'claimed' };
        // The SDK hands back the old item in wire format, even through the document client.
        const old = unmarshall(error.Item as Record<string, AttributeValue>);
        const fingerprint = String(old.fingerprint);
        if (old.status === 'done' && typeof old.response === 'string') {
          return { outcome: 'done', fingerprint, response: JSON.parse(old.response) as StoredResponse };
        }
        return { outcome: 'in_progress', fingerprint, lockedUntil: Number(old.lockedUntil) };
      }
      throw error;
    }
  }

  async complete(tenant: string, key: string, fingerprint: string, response: StoredResponse): Promise<void> {
    await this.send(
      new UpdateCommand({
        TableName: this.tableName,
        Key: { pk: keys.idempotency(tenant, key), sk: keys.idempotencySort },
        UpdateExpression: 'SET #status = :done, #response = :response',
        ConditionExpression: 'fingerprint = :fingerprint',
        ExpressionAttributeNames: { '#status': 'status', '#response': 'response' },
        ExpressionAttributeValues: { ':done': 'done', ':response': JSON.stringify(response), ':fingerprint': fingerprint },
      }),
    );
  }

  async release(tenant: string, key: string, fingerprint: string): Promise<void> {
    try {
      await this.send(
        new DeleteCommand({
          TableName: this.tableName,
          Key: { pk: keys.idempotency(tenant, key), sk: keys.idempotencySort },
          ConditionExpression: 'fingerprint = :fingerprint AND #status = :pending',
          ExpressionAttributeNames: { '#status': 'status' },
          ExpressionAttributeValues: { ':fingerprint': fingerprint, ':pending': 'pending' },
        }),
      );
    } catch (error) {
      if (!isConditionFailure(error)) throw error;
    }
  }

  // ---- internals ------------------------------------------------------------------------

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
      await this.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: { pk: keys.session(scope), sk: keys.sessionSort },
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

  /** Creates the session item when missing (a first write) and moves its activity time. */
  private sessionUpsert(scope: SessionScope, at: string): NonNullable<TransactItem['Update']> {
    const index = tableKeys.sessionsIndex;
    return {
      TableName: this.tableName,
      Key: { pk: keys.session(scope), sk: keys.sessionSort },
      UpdateExpression: [
        'SET sessionId = :sessionId, updatedAt = :at, #gpk = :tenant, #gsk = :activity',
        'createdAt = if_not_exists(createdAt, :at)',
        'agentId = if_not_exists(agentId, :null)',
        'userId = if_not_exists(userId, :null)',
        'metadata = if_not_exists(metadata, :null)',
      ].join(', '),
      ExpressionAttributeNames: { '#gpk': index.partitionKey, '#gsk': index.sortKey },
      ExpressionAttributeValues: {
        ':sessionId': scope.sessionId,
        ':at': at,
        ':tenant': keys.tenantSessions(scope.tenant),
        ':activity': keys.activity(at, scope.sessionId),
        ':null': null,
      },
    };
  }

  private metaItem(scope: SessionScope, meta: SessionMeta): Item {
    return {
      pk: keys.session(scope),
      sk: keys.sessionSort,
      [tableKeys.sessionsIndex.partitionKey]: keys.tenantSessions(scope.tenant),
      [tableKeys.sessionsIndex.sortKey]: keys.activity(meta.updatedAt, meta.sessionId),
      sessionId: meta.sessionId,
      agentId: meta.agentId,
      userId: meta.userId,
      metadata: meta.metadata === null ? null : JSON.stringify(meta.metadata),
      createdAt: meta.createdAt,
      updatedAt: meta.updatedAt,
    };
  }

  private nodeItem(scope: SessionScope, node: NodeRecord): Item {
    return {
      pk: keys.session(scope),
      sk: keys.node(node.id),
      id: node.id,
      parentId: node.parentId,
      depth: node.depth,
      role: node.role,
      message: node.message === null ? undefined : JSON.stringify(node.message),
      stateVersion: node.stateVersion,
      ancestors: node.ancestors,
      createdAt: node.createdAt,
    };
  }

  private async batchGet(scope: SessionScope, sortKeys: readonly string[]): Promise<Item[]> {
    const unique = [...new Set(sortKeys)];
    const found: Item[] = [];
    const chunks: string[][] = [];
    for (let offset = 0; offset < unique.length; offset += BATCH_GET_LIMIT) {
      chunks.push(unique.slice(offset, offset + BATCH_GET_LIMIT));
    }
    await Promise.all(
      chunks.map(async (chunk) => {
        let pending: Item[] = chunk.map((sk) => ({ pk: keys.session(scope), sk }));
        for (let attempt = 0; pending.length > 0; attempt++) {
          if (attempt > 0) await backoff(attempt);
          const { Responses, UnprocessedKeys } = await this.send(
            new BatchGetCommand({
              RequestItems: { [this.tableName]: { Keys: pending, ConsistentRead: true } },
            }),
          );
          found.push(...(Responses?.[this.tableName] ?? []));
          pending = (UnprocessedKeys?.[this.tableName]?.Keys as Item[] | undefined) ?? [];
        }
      }),
    );
    return found;
  }

  private async deleteBatch(itemKeys: Item[]): Promise<void> {
    let pending = itemKeys.map((Key) => ({ DeleteRequest: { Key } }));
    for (let attempt = 0; pending.length > 0; attempt++) {
      if (attempt > 0) await backoff(attempt);
      const { UnprocessedItems } = await this.send(
        new BatchWriteCommand({ RequestItems: { [this.tableName]: pending } }),
      );
      pending = (UnprocessedItems?.[this.tableName] as typeof pending | undefined) ?? [];
    }
  }

  /** Sends a command, turning DynamoDB's capacity and availability failures into API errors. */
  private readonly send = (async (command: Parameters<DynamoDBDocumentClient['send']>[0]) => {
    try {
      return await this.doc.send(command);
    } catch (error) {
      throw translateServiceError(error);
    }
  }) as DynamoDBDocumentClient['send'];
}

// ---- item ↔ record ----------------------------------------------------------------------

function versionAttributes(record: VersionRecord): Item {
  return {
    kind: 'v',
    version: record.version,
    node: record.node,
    prevVersion: record.prevVersion,
    cause: record.cause,
    author: record.author,
    decisionId: record.decisionId,
    createdAt: record.createdAt,
    // Stored as JSON text: verbatim, whatever the keys or number sizes, and one attribute.
    state: JSON.stringify(record.state),
    agent: JSON.stringify(record.agent),
    lineage: record.lineage.length > 0 ? encodeLineage(record.lineage) : undefined,
    commands: record.commands ? JSON.stringify(record.commands) : undefined,
  };
}

function toVersion(item: Item): VersionRecord {
  return {
    version: Number(item.version),
    node: String(item.node),
    prevVersion: Number(item.prevVersion),
    cause: item.cause as VersionCause,
    author: (item.author as string | null | undefined) ?? null,
    decisionId: (item.decisionId as string | null | undefined) ?? null,
    createdAt: String(item.createdAt),
    state: JSON.parse(String(item.state)) as Json,
    agent: item.agent === undefined ? null : (JSON.parse(String(item.agent)) as Json),
    lineage: decodeLineage(item.lineage),
    sessionAgentId: typeof item.agentId === 'string' ? item.agentId : null,
    commands: typeof item.commands === 'string' ? (JSON.parse(item.commands) as Json[]) : null,
  };
}

function nodeIdOf(item: Item): string {
  return String(item.sk).slice(keys.nodePrefix.length);
}

function toNode(item: Item): NodeRecord {
  const id = nodeIdOf(item);
  const isRoot = id === ROOT_NODE;
  return {
    id,
    parentId: isRoot ? null : ((item.parentId as string | undefined) ?? null),
    depth: isRoot ? 0 : Number(item.depth),
    role: (item.role as string | null | undefined) ?? null,
    message: typeof item.message === 'string' ? (JSON.parse(item.message) as JsonObject) : null,
    stateVersion: Number(item.stateVersion ?? 0),
    ancestors: (item.ancestors as string[] | undefined) ?? [],
    createdAt: String(item.createdAt ?? ''),
  };
}

function toMeta(item: Item): SessionMeta {
  return {
    sessionId: String(item.sessionId),
    agentId: (item.agentId as string | null | undefined) ?? null,
    userId: (item.userId as string | null | undefined) ?? null,
    metadata: typeof item.metadata === 'string' ? (JSON.parse(item.metadata) as JsonObject) : null,
    createdAt: String(item.createdAt),
    updatedAt: String(item.updatedAt),
  };
}

// ---- errors -----------------------------------------------------------------------------

/** Whether an item returned with a failed condition is the one this very write put there. */
function isOwnWrite(item: Record<string, unknown> | undefined, writeId: string): boolean {
  if (!item) return false;
  // Returned items come in wire format ({S: …}), or unmarshalled through the document client.
  const value = item.writeId as { S?: string } | string | undefined;
  return (typeof value === 'string' ? value : value?.S) === writeId;
}

function isConditionFailure(error: unknown): error is Error & { Item?: Record<string, unknown> } {
  return error instanceof Error && error.name === 'ConditionalCheckFailedException';
}

const throttlingErrors = new Set([
  'ProvisionedThroughputExceededException',
  'ThrottlingException',
  'RequestLimitExceeded',
]);
const unavailableErrors = new Set(['InternalServerError', 'ServiceUnavailable', 'ServiceUnavailableException']);

/**
 * The SDK has already retried what is safe to retry. What is left is told to the client
 * plainly: too much load is `429 throttled`, an unreachable or failing DynamoDB `503`.
 */
function translateServiceError(error: unknown): unknown {
  if (!(error instanceof Error)) return error;
  if (throttlingErrors.has(error.name)) {
    return new AgentStateError('throttled', 'the table is over its request rate; retry with backoff', {}, { cause: error });
  }
  const status = (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
  const networkCodes = ['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'TimeoutError'];
  const code = (error as { code?: string }).code;
  if (
    unavailableErrors.has(error.name) ||
    (status !== undefined && status >= 500) ||
    networkCodes.includes(code ?? '') ||
    networkCodes.includes(error.name)
  ) {
    return new AgentStateError('unavailable', 'the database is unavailable; retry shortly', {}, { cause: error });
  }
  return error;
}

function translateCancellation(error: unknown, items: readonly TaggedItem[]): unknown {
  if (!(error instanceof Error)) return error;
  if (error.name === 'TransactionConflictException') return new StaleTipError();
  if (error.name !== 'TransactionCanceledException') return error;
  const reasons = (error as { CancellationReasons?: Array<{ Code?: string }> }).CancellationReasons ?? [];
  const codes = reasons.map((reason) => reason.Code ?? 'None');
  if (codes.includes('TransactionConflict')) return new StaleTipError();
  const failed = codes.findIndex((code) => code === 'ConditionalCheckFailed');
  const tagged = failed >= 0 ? items[failed] : undefined;
  if (tagged?.role === 'node') return new NodeTakenError(tagged.nodeId as string);
  if (tagged?.role === 'lease') return new LeaseLostError();
  if (tagged) return new StaleTipError();
  if (codes.some((code) => throttlingErrors.has(code) || code === 'ThrottlingError')) {
    return new AgentStateError('throttled', 'the table is over its request rate; retry with backoff', {}, { cause: error });
  }
  return error;
}

function documentKey(ref: DocumentRef): Item {
  switch (ref.kind) {
    case 'run':
      return { pk: keys.session(ref.scope), sk: keys.run(ref.id) };
    case 'profile':
      return { pk: keys.profile(ref.tenant, ref.id), sk: keys.profileSort };
    case 'shared':
      return { pk: keys.shared(ref.tenant), sk: keys.sharedSort };
  }
}

/** The document a commit of `scope` writes: a run is the session's own. */
function documentRefOf(scope: SessionScope, record: DocumentRecord): DocumentRef {
  switch (record.kind) {
    case 'run':
      return { kind: 'run', scope, id: record.id };
    case 'profile':
      return { kind: 'profile', tenant: scope.tenant, id: record.id };
    case 'shared':
      return { kind: 'shared', tenant: scope.tenant };
  }
}

/** Decision records are kept a week: long enough for any retry of a decision id. */
function decisionExpiry(): number {
  return Math.floor(Date.now() / 1000) + 7 * 24 * 60 * 60;
}

function toAgent(item: Item): AgentRecord {
  const worker = item.worker as { url?: string; secret?: string | null; timeoutMs?: number | null } | undefined;
  return {
    agentId: String(item.agentId),
    parentId: (item.parentId as string | null | undefined) ?? null,
    worker: worker?.url
      ? { url: worker.url, secret: worker.secret ?? null, timeoutMs: worker.timeoutMs == null ? null : Number(worker.timeoutMs) }
      : null,
    config: typeof item.config === 'string' ? (JSON.parse(item.config) as Json) : null,
    stateFields: typeof item.stateFields === 'string' ? (JSON.parse(item.stateFields) as StateFields) : null,
    createdAt: String(item.createdAt),
    updatedAt: String(item.updatedAt),
  };
}

function backoff(attempt: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.random() * Math.min(200, 10 * 2 ** attempt)));
}
