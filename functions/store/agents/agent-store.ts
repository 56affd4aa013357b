import { GetCommand, PutCommand, QueryCommand, TransactWriteCommand } from '@aws-sdk/lib-dynamodb';
import type { AgentRecord, DocumentRecord, Page } from '../../core/model/model.js';
import { type AgentEdge, type AgentPutConditions, type AgentStore, RegistryChangedError } from '../../core/model/ports.js';
import * as documentItem from '../documents/document-item.js';
import * as keys from '../table/keys.js';
import { pageOf, prefixPageQuery, queryAll } from '../table/paging.js';
import { conditions, isConditionFailure, type TableClient } from '../table/table-client.js';
import * as agentItem from './agent-item.js';

/**
 * The tenant's agents and its shared document, read together: all that a decision reads of the
 * registry. A class of its own so that decide's bundle carries no listing and no registration
 * (esbuild keeps every method of a class it bundles).
 */
export class DynamoDbTenantAgents implements Pick<AgentStore, 'readTenant'> {
  constructor(protected readonly table: TableClient) {}

  async readTenant(tenant: string): Promise<{ agents: AgentRecord[]; shared: DocumentRecord | null }> {
    const agents: AgentRecord[] = [];
    let shared: DocumentRecord | null = null;
    const ref = { kind: 'shared', tenant } as const;
    await queryAll(
      async (start) =>
        this.table.send(
          new QueryCommand({
            TableName: this.table.tableName,
            KeyConditionExpression: 'pk = :pk AND sk BETWEEN :first AND :shared',
            ExpressionAttributeValues: { ':pk': keys.agents(tenant), ':first': keys.agentPrefix, ':shared': keys.sharedSort },
            ExclusiveStartKey: start,
            ConsistentRead: true,
          }),
        ),
      (item) => {
        if (item.sk === keys.sharedSort) shared = documentItem.decode(ref, item);
        else agents.push(agentItem.decode(item));
      },
    );
    return { agents, shared };
  }
}

/** The registry's reads: a page of agents too (the typed fields of a session's writes). */
export class DynamoDbAgentReader extends DynamoDbTenantAgents implements Pick<AgentStore, 'listAgents' | 'readTenant'> {
  async listAgents(tenant: string, options: { limit: number; cursor?: string }): Promise<Page<AgentRecord>> {
    const range = { tableName: this.table.tableName, partition: keys.agents(tenant), prefix: keys.agentPrefix };
    const { Items, LastEvaluatedKey } = await this.table.send(new QueryCommand(prefixPageQuery(range, options)));
    return pageOf((Items ?? []).map(agentItem.decode), LastEvaluatedKey, range);
  }
}

/**
 * The agent registry (API.md section 7), one partition per tenant (keys.ts):
 *
 *   A#<tenant>   A#<agent>   parentId, worker (url, secret, timeoutMs), config and typed
 *                            fields (JSON text), createdAt, updatedAt
 *   A#<tenant>   G           the tenant's shared document (document-store.ts writes it)
 *
 * A tenant's whole hierarchy is one Query, which is how typed fields are built; the shared
 * document sorts after every agent (`A#…` < `G`), so a decision, which needs both, reads the
 * agents and the document in that same Query (`readTenant`).
 */
export class DynamoDbAgentStore extends DynamoDbAgentReader implements AgentStore {
  async putAgent(tenant: string, agent: AgentRecord, options: AgentPutConditions = {}): Promise<boolean> {
    const { ancestors = [], existed } = options;
    const item = agentItem.encode(tenant, agent);
    // The agent as read: absent, or present with the parent read (see `hasParent`).
    const asRead =
      existed === undefined
        ? {}
        : existed
          ? hasParent(this.table.tableName, tenant, { agentId: agent.agentId, parentId: options.parentAsRead ?? null })
          : { ConditionExpression: conditions.itemIsNew };
    try {
      if (ancestors.length === 0) {
        const { Attributes } = await this.table.send(
          new PutCommand({
            TableName: this.table.tableName,
            Item: item,
            ReturnValues: 'ALL_OLD',
            ...('ConditionExpression' in asRead ? { ConditionExpression: asRead.ConditionExpression } : {}),
            ...('ExpressionAttributeValues' in asRead ? { ExpressionAttributeValues: asRead.ExpressionAttributeValues } : {}),
          }),
        );
        return Attributes === undefined;
      }
      // A move: the agent put in one transaction with a check of each ancestor's parent as
      // read (at most 32), so that two moves at once cannot both land on a hierarchy that the
      // other changes. Only an agent that exists moves, so it was not created.
      await this.table.send(
        new TransactWriteCommand({
          TransactItems: [
            { Put: { TableName: this.table.tableName, Item: item, ...withoutKeyAndTable(asRead) } },
            ...ancestors.map((ancestor) => ({ ConditionCheck: hasParent(this.table.tableName, tenant, ancestor) })),
          ],
        }),
      );
      return false;
    } catch (error) {
      if (isConditionFailure(error) || (error instanceof Error && /^Transaction(Canceled|Conflict)Exception$/.test(error.name))) {
        throw new RegistryChangedError();
      }
      throw error;
    }
  }

  async getAgent(tenant: string, agentId: string): Promise<AgentRecord | null> {
    const { Item } = await this.table.send(
      new GetCommand({ TableName: this.table.tableName, Key: agentItem.key(tenant, agentId), ConsistentRead: true }),
    );
    return Item ? agentItem.decode(Item) : null;
  }
}

/** A condition's parts without the key and table a `ConditionCheck` names (for a transaction's `Put`). */
function withoutKeyAndTable(condition: { ConditionExpression?: string; ExpressionAttributeValues?: Record<string, unknown> }) {
  return {
    ...(condition.ConditionExpression ? { ConditionExpression: condition.ConditionExpression } : {}),
    ...(condition.ExpressionAttributeValues ? { ExpressionAttributeValues: condition.ExpressionAttributeValues } : {}),
  };
}

/** The condition that an agent exists and still has the parent it was read with (none: absent or null). */
function hasParent(tableName: string, tenant: string, edge: AgentEdge) {
  return {
    TableName: tableName,
    Key: agentItem.key(tenant, edge.agentId),
    ...(edge.parentId === null
      ? {
          ConditionExpression: 'attribute_exists(pk) AND (attribute_not_exists(parentId) OR attribute_type(parentId, :null))',
          ExpressionAttributeValues: { ':null': 'NULL' },
        }
      : { ConditionExpression: 'parentId = :parent', ExpressionAttributeValues: { ':parent': edge.parentId } }),
  };
}
