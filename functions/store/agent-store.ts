import { GetCommand, PutCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import type { AgentRecord, Page } from '../core/model.js';
import type { AgentStore } from '../core/ports.js';
import { agentItem } from './item-codecs.js';
import { keys } from './keys.js';
import { pageOf, prefixPageQuery } from './paging.js';
import type { TableClient } from './table-client.js';

/**
 * The agent registry (API.md section 7), one partition per tenant (keys.ts):
 *
 *   A#<tenant>   A#<agent>   parentId, worker (url, secret, timeoutMs), config and typed
 *                            fields (JSON text), createdAt, updatedAt
 *
 * A tenant's whole hierarchy is one Query, which is how typed fields are built.
 */
export class DynamoDbAgentStore implements AgentStore {
  constructor(private readonly table: TableClient) {}

  async putAgent(tenant: string, agent: AgentRecord): Promise<boolean> {
    const { Attributes } = await this.table.send(
      new PutCommand({ TableName: this.table.tableName, Item: agentItem.encode(tenant, agent), ReturnValues: 'ALL_OLD' }),
    );
    return Attributes === undefined;
  }

  async getAgent(tenant: string, agentId: string): Promise<AgentRecord | null> {
    const { Item } = await this.table.send(
      new GetCommand({ TableName: this.table.tableName, Key: agentItem.key(tenant, agentId), ConsistentRead: true }),
    );
    return Item ? agentItem.decode(Item) : null;
  }

  async listAgents(tenant: string, options: { limit: number; cursor?: string }): Promise<Page<AgentRecord>> {
    const range = { tableName: this.table.tableName, partition: keys.agents(tenant), prefix: keys.agentPrefix };
    const { Items, LastEvaluatedKey } = await this.table.send(new QueryCommand(prefixPageQuery(range, options)));
    return pageOf((Items ?? []).map(agentItem.decode), LastEvaluatedKey, range);
  }
}
