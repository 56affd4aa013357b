import { beforeAll, describe, expect, it } from 'vitest';
import { MemoryService } from '../../functions/core/memory/memory-service.js';
import { DynamoDbMemoryStore } from '../../functions/store/memory/memory-store.js';
import { DynamoDbMemoryUpkeep } from '../../functions/store/memory/memory-upkeep-store.js';
import { dynamoDbClient } from '../../functions/store/table/client.js';
import { TableClient } from '../../functions/store/table/table-client.js';
import { createTestTable, dynamoEndpoint } from '../helpers/dynamodb.js';

/**
 * DESIGN.md section 4: a memory put and a get are one request each, counted on the wire, and
 * a filtered search of one namespace is a fixed handful of requests however many other
 * namespaces and tenants the table holds.
 */
let service: MemoryService;
let sent: string[] = [];
const tenant = 'budget';
const namespace = ['users', 'u1', 'facts'];

beforeAll(async () => {
  const tableName = await createTestTable('memory-budget');
  const client = dynamoDbClient({ AGENTSTATE_DYNAMODB_ENDPOINT: dynamoEndpoint() });
  client.middlewareStack.add(
    (next, context) => async (args) => {
      sent.push(String(context.commandName).replace(/Command$/, ''));
      return next(args);
    },
    { step: 'initialize', name: 'countRequests' },
  );
  const table = new TableClient(client, tableName);
  service = new MemoryService(new DynamoDbMemoryStore(table));
  // What the change hook would do after the first put of each namespace.
  const upkeep = new DynamoDbMemoryUpkeep(table);
  for (const other of [['users', 'u2', 'facts'], ['users', 'u1'], namespace]) await upkeep.registerNamespace(tenant, other);
  await upkeep.registerNamespace('another-tenant', namespace);
  for (let index = 0; index < 30; index++) {
    const value = { topic: index % 3 === 0 ? 'travel' : 'food', n: index, text: 'x'.repeat(300) };
    await service.put(tenant, null, { namespace, key: `k${index}` }, { value }, { condition: { kind: 'none' }, author: null });
    await service.put(
      tenant,
      null,
      { namespace: ['users', 'u2', 'facts'], key: `k${index}` },
      { value },
      { condition: { kind: 'none' }, author: null },
    );
    await service.put('another-tenant', null, { namespace, key: `k${index}` }, { value }, { condition: { kind: 'none' }, author: null });
  }
});

async function count<T>(operation: () => Promise<T>): Promise<{ requests: string[]; result: T }> {
  sent = [];
  const result = await operation();
  return { requests: sent, result };
}

describe('memory requests per operation', () => {
  it('puts with one UpdateItem (and one more that lists the namespace when it creates the item), with or without If-Match, and gets with one GetItem', async () => {
    const created = await count(() =>
      service.put(tenant, null, { namespace, key: 'fresh' }, { value: { a: 1 } }, { condition: { kind: 'none' }, author: null }),
    );
    const guarded = await count(() =>
      service.put(
        tenant,
        null,
        { namespace, key: 'fresh' },
        { value: { a: 2 } },
        { condition: { kind: 'version', versions: [1] }, author: null },
      ),
    );
    const read = await count(() => service.get(tenant, null, namespace, 'fresh'));
    const removed = await count(() =>
      service.delete(tenant, null, { namespace, key: 'fresh' }, { condition: { kind: 'none' }, author: null }),
    );

    // A put that creates an item lists its namespace before it answers (read-your-writes, API.md section 10).
    expect(created.requests).toEqual(['UpdateItem', 'UpdateItem']);
    expect(guarded.requests).toEqual(['UpdateItem']);
    expect(read.requests).toEqual(['GetItem']);
    expect(removed.requests).toEqual(['UpdateItem']);
  });

  it('searches one namespace with a filter in three requests: the namespace list, the index, the matches', async () => {
    const { requests, result } = await count(() =>
      service.search(tenant, null, { namespacePrefix: namespace, filter: { topic: 'travel' }, limit: 50 }),
    );

    expect(result.items.map((item) => item.value.n)).toEqual([27, 24, 21, 18, 15, 12, 9, 6, 3, 0]);
    expect(requests).toEqual(['Query', 'Query', 'BatchGetItem']);
  });
});
