import { GetCommand, PutCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import type { AgentRecord, DocumentRecord, Page } from '../../core/model/model.js';
import type { AgentStore } from '../../core/model/ports.js';
import * as documentItem from '../documents/document-item.js';
import * as keys from '../table/keys.js';
import { pageOf, prefixPageQuery, queryAll } from '../table/paging.js';
import type { TableClient } from '../table/table-client.js';
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
}
