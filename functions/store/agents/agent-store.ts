import { GetCommand, PutCommand, QueryCommand, TransactWriteCommand } from '@aws-sdk/lib-dynamodb';
import type { AgentRecord, DocumentRecord, Page } from '../../core/model/model.js';
import { type AgentPutConditions, type AgentStore, RegistryChangedError } from '../../core/model/ports.js';
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
  async listAgents(tenant: string, options: { limit: number; cursor?: string; consistent?: boolean }): Promise<Page<AgentRecord>> {
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
 *   A#<tenant>   V           registryVersion: moved on by every registration the registry's
 *                            rules concern (agent-service.ts), in the transaction that puts it
 *
 * A tenant's whole hierarchy is one Query, which is how typed fields are built; the shared
 * document sorts after every agent (`A#…` < `G`), so a decision, which needs both, reads the
 * agents and the document in that same Query (`readTenant`). The version sorts after both,
 * outside every range read.
 */
export class DynamoDbAgentStore extends DynamoDbAgentReader implements AgentStore {
  async putAgent(tenant: string, agent: AgentRecord, asWhenRead: AgentPutConditions): Promise<boolean> {
    const { existed, registryVersion } = asWhenRead;
    const item = agentItem.encode(tenant, agent);
    // The agent as read: absent, or present with the parent read (see `hasParent`).
    const asRead = existed ? hasParent(asWhenRead.parentAsRead) : { ConditionExpression: conditions.itemIsNew };
    try {
      if (registryVersion === undefined) {
        await this.table.send(new PutCommand({ TableName: this.table.tableName, Item: item, ...asRead }));
        return !existed;
      }
      // One the rules concern: the agent, and the registry's version moved on from the one read
      // before everything the rules were checked against, in one transaction.
      await this.table.send(
        new TransactWriteCommand({
          TransactItems: [
            { Put: { TableName: this.table.tableName, Item: item, ...asRead } },
            {
              Put: {
                TableName: this.table.tableName,
                Item: { ...versionKey(tenant), registryVersion: registryVersion + 1 },
                ...(registryVersion === 0
                  ? { ConditionExpression: conditions.itemIsNew }
                  : { ConditionExpression: 'registryVersion = :read', ExpressionAttributeValues: { ':read': registryVersion } }),
              },
            },
          ],
        }),
      );
      return !existed;
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

  async registryVersion(tenant: string): Promise<number> {
    const { Item } = await this.table.send(
      new GetCommand({ TableName: this.table.tableName, Key: versionKey(tenant), ConsistentRead: true }),
    );
    return Item ? Number(Item.registryVersion) : 0;
  }
}

const versionKey = (tenant: string) => ({ pk: keys.agents(tenant), sk: keys.registryVersionSort });

/** The condition on an agent's put that it exists and still has the parent it was read with. */
function hasParent(parentId: string | null) {
  return parentId === null
    ? {
        ConditionExpression: 'attribute_exists(pk) AND (attribute_not_exists(parentId) OR attribute_type(parentId, :null))',
        ExpressionAttributeValues: { ':null': 'NULL' },
      }
    : { ConditionExpression: 'parentId = :parent', ExpressionAttributeValues: { ':parent': parentId } };
}
