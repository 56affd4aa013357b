import { DeleteCommand, GetCommand, PutCommand, TransactWriteCommand } from '@aws-sdk/lib-dynamodb';
import {
  type Follow,
  type LiveConnection,
  type LiveFollower,
  type LiveStore,
  MAX_SUBSCRIPTIONS,
  type NamespaceFollower,
} from '../../core/fanout/live.js';
import { AgentStateError } from '../../core/kernel/errors.js';
import type { Namespace } from '../../core/memory/memory.js';
import type { SessionScope } from '../../core/model/model.js';
import * as keys from '../table/keys.js';
import { forEachInRange } from '../table/paging.js';
import { tableKeys } from '../table/table.js';
import { conditions, type Item, type TableClient, type TransactItem } from '../table/table-client.js';

/**
 * WebSocket connections and what they follow (keys.ts), both with TTL:
 *
 *   C#<connection>          C                tenant, sessions (string set), agents? (a
 *                                            limited key's), keyHash? (its key's), connectedAt
 *   W#<tenant>#<session>    C#<connection>   one follower of a session, agentId? (the agent
 *                                            it follows the session as), keyHash?
 *
 * The change hook finds a session's followers with one Query of `W#<tenant>#<session>`; the
 * tenant in that key is the connection's own, so a follower never sees another tenant's
 * session. `$disconnect` finds what to remove in the connection's `sessions` set.
 */
/** The sets on a connection's item: the sessions and the memory namespaces it follows. */
type ConnectionList = 'sessions' | 'namespaces';

export class DynamoDbLiveStore implements LiveStore {
  constructor(private readonly table: TableClient) {}

  async putConnection(
    connectionId: string,
    tenant: string,
    expiresAt: number,
    agents: string[] | null = null,
    keyHash: string | null = null,
  ): Promise<void> {
    await this.table.send(
      new PutCommand({
        TableName: this.table.tableName,
        Item: {
          pk: keys.connection(connectionId),
          sk: keys.connectionSort,
          tenant,
          agents: agents && agents.length > 0 ? agents : undefined,
          keyHash: keyHash ?? undefined,
          connectedAt: new Date(this.table.now()).toISOString(),
          [tableKeys.timeToLive]: expiresAt,
        },
      }),
    );
  }

  async getConnection(connectionId: string): Promise<LiveConnection | null> {
    const { Item } = await this.table.send(
      new GetCommand({
        TableName: this.table.tableName,
        Key: { pk: keys.connection(connectionId), sk: keys.connectionSort },
        ConsistentRead: true,
      }),
    );
    if (!Item || typeof Item.tenant !== 'string' || this.expired(Item)) return null;
    const agents = agentsOf(Item);
    return {
      tenant: Item.tenant,
      sessions: sessionsOf(Item),
      ...(agents ? { agents } : {}),
      ...(typeof Item.keyHash === 'string' ? { keyHash: Item.keyHash } : {}),
    };
  }

  async subscribe(connectionId: string, scope: SessionScope, expiresAt: number, { agentId, mode, keyHash }: Follow = {}): Promise<boolean> {
    // The follower is put only with its entry in the connection's list (`follow`, one
    // transaction conditional on the connection item): whatever the list holds, $disconnect
    // removes, and a follow that lands after $disconnect deleted the item writes nothing. A
    // connection that is gone, or follows as many sessions as it may, follows nothing more.
    return this.follow(connectionId, 'sessions', scope.sessionId, expiresAt, {
      // Replaces an earlier subscription of this connection to the session, agent and all.
      pk: keys.subscribers(scope),
      sk: keys.subscriber(connectionId),
      connectionId,
      agentId: agentId ?? undefined,
      mode: mode === 'patch' ? mode : undefined,
      // The fan-out checks the key of each follower without reading its connection.
      keyHash: keyHash ?? undefined,
      [tableKeys.timeToLive]: expiresAt,
    });
  }

  async subscribeNamespace(
    connectionId: string,
    tenant: string,
    namespace: Namespace,
    expiresAt: number,
    { mode, keyHash }: Follow = {},
  ): Promise<boolean> {
    // As `subscribe`: listed and followed in one transaction, so $disconnect finds what to remove.
    return this.follow(connectionId, 'namespaces', namespace.join('/'), expiresAt, {
      pk: keys.namespaceFollowers(tenant, namespace),
      sk: keys.subscriber(connectionId),
      connectionId,
      mode: mode === 'patch' ? mode : undefined,
      keyHash: keyHash ?? undefined,
      [tableKeys.timeToLive]: expiresAt,
    });
  }

  async unsubscribeNamespace(connectionId: string, tenant: string, namespace: Namespace): Promise<void> {
    await this.unfollow(connectionId, 'namespaces', namespace.join('/'), {
      pk: keys.namespaceFollowers(tenant, namespace),
      sk: keys.subscriber(connectionId),
    });
  }

  /** One Query per namespace the event's lies under (itself included): at most eight, in parallel. */
  async namespaceFollowers(tenant: string, namespace: Namespace): Promise<NamespaceFollower[]> {
    const found = new Map<string, NamespaceFollower>();
    await Promise.all(
      namespace.map((_, index) =>
        forEachInRange(
          this.table,
          { partition: keys.namespaceFollowers(tenant, namespace.slice(0, index + 1)), prefix: keys.subscriberPrefix },
          (item) => {
            if (this.expired(item)) return;
            const connectionId = String(item.connectionId);
            const mode = item.mode === 'patch' && found.get(connectionId)?.mode !== 'full' ? 'patch' : 'full';
            found.set(connectionId, { connectionId, mode, keyHash: keyHashOf(item) });
          },
        ),
      ),
    );
    return [...found.values()];
  }

  async unsubscribe(connectionId: string, scope: SessionScope): Promise<void> {
    await this.unfollow(connectionId, 'sessions', scope.sessionId, { pk: keys.subscribers(scope), sk: keys.subscriber(connectionId) });
  }

  /**
   * Adds a session id or a namespace path to what the connection follows and puts its follower
   * item, in one transaction, unless the connection is gone or already follows as many as it
   * may (then false). Listing again what it lists already only renews the connection's expiry.
   * One transaction, because a list and its follower items written one after the other drift
   * apart when a subscribe and an unsubscribe of the same session run at once (in AWS each
   * message is its own invocation): the follower put after the unsubscribe's delete, the entry
   * taken off after the subscribe's add, left a follower the connection did not list, which
   * neither the limit counted nor `$disconnect` removed (100 of 100 such pairs on DynamoDB Local).
   */
  private async follow(connectionId: string, listName: ConnectionList, entry: string, expiresAt: number, follower: Item): Promise<boolean> {
    return this.onConnection(
      {
        TableName: this.table.tableName,
        Key: { pk: keys.connection(connectionId), sk: keys.connectionSort },
        UpdateExpression: 'ADD #list :entries SET #ttl = :ttl',
        ConditionExpression: `${conditions.itemExists} AND (attribute_not_exists(#list) OR size(#list) < :max OR contains(#list, :entry))`,
        ExpressionAttributeNames: { '#list': listName, '#ttl': tableKeys.timeToLive },
        ExpressionAttributeValues: { ':entries': new Set([entry]), ':entry': entry, ':max': MAX_SUBSCRIPTIONS, ':ttl': expiresAt },
      },
      { Put: { TableName: this.table.tableName, Item: follower } },
    );
  }

  /** Takes an entry off the connection's list and deletes its follower item, in one transaction (as `follow`). */
  private async unfollow(connectionId: string, listName: ConnectionList, entry: string, followerKey: Item): Promise<void> {
    const listed = await this.onConnection(
      {
        TableName: this.table.tableName,
        Key: { pk: keys.connection(connectionId), sk: keys.connectionSort },
        UpdateExpression: 'DELETE #list :entries',
        ConditionExpression: conditions.itemExists,
        ExpressionAttributeNames: { '#list': listName },
        ExpressionAttributeValues: { ':entries': new Set([entry]) },
      },
      { Delete: { TableName: this.table.tableName, Key: followerKey } },
    );
    // A connection that is gone lists nothing to remove; its follower goes all the same.
    if (!listed) await this.table.send(new DeleteCommand({ TableName: this.table.tableName, Key: followerKey }));
  }

  /**
   * The connection item's update and a follower's put or delete (`second`) as one transaction:
   * false when the connection's condition was false. A conflict with another transaction on the
   * same connection wrote nothing, so it is tried again after a random wait, for up to
   * `CONFLICT_BUDGET_MS`: one connection's messages run as invocations side by side, and a
   * burst of them on its one item takes turns. Past that, `409 conflict` (nothing written).
   */
  private async onConnection(Update: NonNullable<TransactItem['Update']>, second: TransactItem): Promise<boolean> {
    const started = Date.now();
    for (let attempt = 1; ; attempt += 1) {
      try {
        await this.table.send(new TransactWriteCommand({ TransactItems: [{ Update }, second] }));
        return true;
      } catch (error) {
        const codes = cancellationCodes(error);
        if (codes[0] === 'ConditionalCheckFailed') return false;
        if (!codes.includes('TransactionConflict')) throw error;
        if (Date.now() - started >= CONFLICT_BUDGET_MS) {
          throw new AgentStateError('conflict', 'the connection is changing too fast to follow or leave this; retry', {
            attempts: attempt,
          });
        }
        await new Promise((resolve) => setTimeout(resolve, Math.random() * Math.min(200, 5 * 2 ** attempt)));
      }
    }
  }

  /**
   * A plain write of the connection item, tried again while it meets a follow's or a leave's
   * transaction under way on that item (DynamoDB refuses it with TransactionConflictException,
   * which the SDK does not retry), within the same budget.
   */
  private async retryingConflicts<T>(write: () => Promise<T>): Promise<T> {
    const started = Date.now();
    for (let attempt = 1; ; attempt += 1) {
      try {
        return await write();
      } catch (error) {
        if ((error as { name?: string }).name !== 'TransactionConflictException' || Date.now() - started >= CONFLICT_BUDGET_MS) throw error;
        await new Promise((resolve) => setTimeout(resolve, Math.random() * Math.min(200, 5 * 2 ** attempt)));
      }
    }
  }

  async deleteConnection(connectionId: string): Promise<void> {
    const { Attributes } = await this.retryingConflicts(() =>
      this.table.send(
        new DeleteCommand({
          TableName: this.table.tableName,
          Key: { pk: keys.connection(connectionId), sk: keys.connectionSort },
          ReturnValues: 'ALL_OLD',
        }),
      ),
    );
    if (!Attributes || typeof Attributes.tenant !== 'string') return;
    const tenant = Attributes.tenant;
    await Promise.all([
      ...sessionsOf(Attributes).map((sessionId) =>
        this.table.send(
          new DeleteCommand({
            TableName: this.table.tableName,
            Key: { pk: keys.subscribers({ tenant, sessionId }), sk: keys.subscriber(connectionId) },
          }),
        ),
      ),
      ...setOf(Attributes.namespaces).map((path) =>
        this.table.send(
          new DeleteCommand({
            TableName: this.table.tableName,
            Key: { pk: keys.namespaceFollowers(tenant, path.split('/')), sk: keys.subscriber(connectionId) },
          }),
        ),
      ),
    ]);
  }

  async subscribers(scope: SessionScope): Promise<string[]> {
    return (await this.followers(scope)).map((follower) => follower.connectionId);
  }

  async followers(scope: SessionScope): Promise<LiveFollower[]> {
    const followers: LiveFollower[] = [];
    await forEachInRange(this.table, { partition: keys.subscribers(scope), prefix: keys.subscriberPrefix }, (item) => {
      if (this.expired(item)) return;
      followers.push({
        connectionId: String(item.connectionId),
        agentId: typeof item.agentId === 'string' ? item.agentId : null,
        mode: item.mode === 'patch' ? 'patch' : 'full',
        keyHash: keyHashOf(item),
      });
    });
    return followers;
  }

  /** TTL deletes lazily (up to days later); an expired record is already gone to us. */
  private expired(item: Item): boolean {
    const expiresAt = item[tableKeys.timeToLive];
    return typeof expiresAt === 'number' && expiresAt < this.table.nowSeconds();
  }
}

function agentsOf(item: Item): string[] | null {
  const agents = item.agents;
  const list = agents instanceof Set ? [...agents] : Array.isArray(agents) ? agents : [];
  return list.length > 0 ? list.map(String) : null;
}

function keyHashOf(item: Item): string | null {
  return typeof item.keyHash === 'string' ? item.keyHash : null;
}

function sessionsOf(item: Item): string[] {
  return setOf(item.sessions);
}

/** A string set attribute as a list (absent: none). */
function setOf(value: unknown): string[] {
  if (value instanceof Set) return [...value].map(String);
  return Array.isArray(value) ? value.map(String) : [];
}

/** How long a follow or a leave retries its transaction's conflicts with others on the same connection: half the WebSocket function's 10 s timeout (lib/agent-state.ts). */
const CONFLICT_BUDGET_MS = 5_000;

/** The codes of a cancelled transaction's items, in order (none for another failure). */
function cancellationCodes(error: unknown): string[] {
  if ((error as { name?: string }).name !== 'TransactionCanceledException') return [];
  const reasons = (error as { CancellationReasons?: Array<{ Code?: string }> }).CancellationReasons ?? [];
  return reasons.map((reason) => reason.Code ?? 'None');
}
