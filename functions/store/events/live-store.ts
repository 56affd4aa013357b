import { DeleteCommand, GetCommand, PutCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { EventMode } from '../../core/events/events.js';
import {
  type LiveConnection,
  type LiveFollower,
  type LiveStore,
  MAX_SUBSCRIPTIONS,
  type NamespaceFollower,
} from '../../core/fanout/live.js';
import type { Namespace } from '../../core/memory/memory.js';
import type { SessionScope } from '../../core/model/model.js';
import * as keys from '../table/keys.js';
import { forEachInRange } from '../table/paging.js';
import { tableKeys } from '../table/table.js';
import { conditionally, conditions, type Item, type TableClient } from '../table/table-client.js';

/**
 * WebSocket connections and what they follow (keys.ts), both with TTL:
 *
 *   C#<connection>          C                tenant, sessions (string set), agents? (a
 *                                            limited key's), connectedAt
 *   W#<tenant>#<session>    C#<connection>   one follower of a session, agentId? (the agent
 *                                            it follows the session as)
 *
 * The change hook finds a session's followers with one Query of `W#<tenant>#<session>`; the
 * tenant in that key is the connection's own, so a follower never sees another tenant's
 * session. `$disconnect` finds what to remove in the connection's `sessions` set.
 */
/** The sets on a connection's item: the sessions and the memory namespaces it follows. */
type ConnectionList = 'sessions' | 'namespaces';

export class DynamoDbLiveStore implements LiveStore {
  constructor(private readonly table: TableClient) {}

  async putConnection(connectionId: string, tenant: string, expiresAt: number, agents: string[] | null = null): Promise<void> {
    await this.table.send(
      new PutCommand({
        TableName: this.table.tableName,
        Item: {
          pk: keys.connection(connectionId),
          sk: keys.connectionSort,
          tenant,
          agents: agents && agents.length > 0 ? agents : undefined,
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
    return { tenant: Item.tenant, sessions: sessionsOf(Item), ...(agents ? { agents } : {}) };
  }

  async subscribe(
    connectionId: string,
    scope: SessionScope,
    expiresAt: number,
    agentId: string | null = null,
    mode: EventMode = 'full',
  ): Promise<boolean> {
    // The connection first: whatever it lists, $disconnect removes, so no follower item
    // outlives its connection (beyond a race with $disconnect, which TTL and the change
    // hook's cleanup of gone connections settle). A connection that is gone, or follows as
    // many sessions as it may, follows nothing more.
    if (!(await this.list(connectionId, 'sessions', scope.sessionId, expiresAt))) return false;
    await this.table.send(
      new PutCommand({
        TableName: this.table.tableName,
        // Replaces an earlier subscription of this connection to the session, agent and all.
        Item: {
          pk: keys.subscribers(scope),
          sk: keys.subscriber(connectionId),
          connectionId,
          agentId: agentId ?? undefined,
          mode: mode === 'full' ? undefined : mode,
          [tableKeys.timeToLive]: expiresAt,
        },
      }),
    );
    return true;
  }

  async subscribeNamespace(
    connectionId: string,
    tenant: string,
    namespace: Namespace,
    expiresAt: number,
    mode: EventMode = 'full',
  ): Promise<boolean> {
    // As `subscribe`: the connection lists it first, so $disconnect finds what to remove.
    if (!(await this.list(connectionId, 'namespaces', namespace.join('/'), expiresAt))) return false;
    await this.table.send(
      new PutCommand({
        TableName: this.table.tableName,
        Item: {
          pk: keys.namespaceFollowers(tenant, namespace),
          sk: keys.subscriber(connectionId),
          connectionId,
          mode: mode === 'full' ? undefined : mode,
          [tableKeys.timeToLive]: expiresAt,
        },
      }),
    );
    return true;
  }

  async unsubscribeNamespace(connectionId: string, tenant: string, namespace: Namespace): Promise<void> {
    await this.table.send(
      new DeleteCommand({
        TableName: this.table.tableName,
        Key: { pk: keys.namespaceFollowers(tenant, namespace), sk: keys.subscriber(connectionId) },
      }),
    );
    await this.unlist(connectionId, 'namespaces', namespace.join('/'));
  }

  /** One Query per namespace the event's lies under (itself included): at most eight, in parallel. */
  async namespaceFollowers(tenant: string, namespace: Namespace): Promise<NamespaceFollower[]> {
    const found = new Map<string, EventMode>();
    await Promise.all(
      namespace.map((_, index) =>
        forEachInRange(
          this.table,
          { partition: keys.namespaceFollowers(tenant, namespace.slice(0, index + 1)), prefix: keys.subscriberPrefix },
          (item) => {
            if (this.expired(item)) return;
            const connectionId = String(item.connectionId);
            found.set(connectionId, item.mode === 'patch' && found.get(connectionId) !== 'full' ? 'patch' : 'full');
          },
        ),
      ),
    );
    return [...found].map(([connectionId, mode]) => ({ connectionId, mode }));
  }

  async unsubscribe(connectionId: string, scope: SessionScope): Promise<void> {
    await this.table.send(
      new DeleteCommand({ TableName: this.table.tableName, Key: { pk: keys.subscribers(scope), sk: keys.subscriber(connectionId) } }),
    );
    await this.unlist(connectionId, 'sessions', scope.sessionId);
  }

  /**
   * Adds a session id or a namespace path to what the connection follows, unless the
   * connection is gone or already follows as many as it may (then false). Listing again what it
   * lists already only renews the connection's expiry.
   */
  private async list(connectionId: string, listName: ConnectionList, entry: string, expiresAt: number): Promise<boolean> {
    return conditionally(
      this.table.send(
        new UpdateCommand({
          TableName: this.table.tableName,
          Key: { pk: keys.connection(connectionId), sk: keys.connectionSort },
          UpdateExpression: 'ADD #list :entries SET #ttl = :ttl',
          ConditionExpression: `${conditions.itemExists} AND (attribute_not_exists(#list) OR size(#list) < :max OR contains(#list, :entry))`,
          ExpressionAttributeNames: { '#list': listName, '#ttl': tableKeys.timeToLive },
          ExpressionAttributeValues: { ':entries': new Set([entry]), ':entry': entry, ':max': MAX_SUBSCRIPTIONS, ':ttl': expiresAt },
        }),
      ),
    );
  }

  /** Takes an entry off the connection's list; a connection that is gone lists nothing to remove. */
  private async unlist(connectionId: string, listName: ConnectionList, entry: string): Promise<void> {
    await conditionally(
      this.table.send(
        new UpdateCommand({
          TableName: this.table.tableName,
          Key: { pk: keys.connection(connectionId), sk: keys.connectionSort },
          UpdateExpression: 'DELETE #list :entries',
          ConditionExpression: conditions.itemExists,
          ExpressionAttributeNames: { '#list': listName },
          ExpressionAttributeValues: { ':entries': new Set([entry]) },
        }),
      ),
    );
  }

  async deleteConnection(connectionId: string): Promise<void> {
    const { Attributes } = await this.table.send(
      new DeleteCommand({
        TableName: this.table.tableName,
        Key: { pk: keys.connection(connectionId), sk: keys.connectionSort },
        ReturnValues: 'ALL_OLD',
      }),
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

function sessionsOf(item: Item): string[] {
  return setOf(item.sessions);
}

/** A string set attribute as a list (absent: none). */
function setOf(value: unknown): string[] {
  if (value instanceof Set) return [...value].map(String);
  return Array.isArray(value) ? value.map(String) : [];
}
