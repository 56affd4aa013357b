import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TENANT_READ_MAX_AGE_MS } from '../../functions/core/kernel/tenant-cache.js';
import { type Dependencies, dependenciesFor } from '../../functions/http/dependencies.js';
import { createStores, type Stores } from '../../functions/store/index.js';
import { dynamoDbClient } from '../../functions/store/table/client.js';
import { createTestTable, dynamoEndpoint } from '../helpers/dynamodb.js';

/**
 * What every request of a tenant reads (the agent registry with the shared document) is read at
 * most once a second per function instance (API.md section 14), and a registration change
 * reaches every instance within that second: at once in the process that made it, by age in
 * every other (core/kernel/tenant-cache.ts). Two instances here are two sets of services over
 * the same table, each with its own DynamoDB client; "another process" is a write straight to
 * the store, which drops nothing in this one.
 */
const tenant = 'cached';
let clock = Date.parse('2026-02-01T00:00:00.000Z');
let tableName: string;

interface Instance {
  deps: Dependencies;
  stores: Stores;
  client: DynamoDBClient;
  /** Reads of the tenant's registry partition (`A#<tenant>`) this instance sent. */
  registryReads: number;
  /** The worker URL each decision called. */
  called: string[];
}
const instances: Instance[] = [];

function instance(): Instance {
  const client = dynamoDbClient({ AGENTSTATE_DYNAMODB_ENDPOINT: dynamoEndpoint() });
  const stores = createStores(client, tableName, { now: () => clock });
  const made: Instance = { client, stores, registryReads: 0, called: [], deps: undefined as unknown as Dependencies };
  client.middlewareStack.add(
    (next) => async (args) => {
      const input = args.input as { ExpressionAttributeValues?: Record<string, unknown> };
      if (Object.values(input.ExpressionAttributeValues ?? {}).includes(`A#${tenant}`)) made.registryReads++;
      return next(args);
    },
    { step: 'initialize', name: 'countRegistryReads' },
  );
  made.deps = dependenciesFor(stores, {
    resolveKey: async () => null,
    invokeWorker: async (worker) => {
      made.called.push(worker.url);
      return { state: { at: clock } };
    },
  });
  instances.push(made);
  return made;
}

beforeAll(async () => {
  tableName = await createTestTable('tenant-reads');
});
afterAll(() => {
  for (const { client } of instances) client.destroy();
});

const decideIn = (on: Instance, sessionId: string) =>
  on.deps.decide.decide({ tenant, sessionId }, { agentId: 'helper', trigger: { type: 'tick' } });

describe('the registry, read once a second per instance', () => {
  it('serves many decisions and state writes of one second from one read', async () => {
    const one = instance();
    await one.deps.agents.putAgent(tenant, 'helper', { worker: { url: 'https://worker.example/a' } });
    one.registryReads = 0;

    await Promise.all(Array.from({ length: 30 }, (_, n) => decideIn(one, `busy-${n}`)));
    await Promise.all(Array.from({ length: 30 }, (_, n) => one.deps.sessions.patchState({ tenant, sessionId: `busy-${n}` }, { n })));

    expect(one.called).toHaveLength(30);
    expect(one.registryReads).toBe(1);
    clock += TENANT_READ_MAX_AGE_MS;
    await decideIn(one, 'busy-0');
    expect(one.registryReads).toBe(2);
  });

  it('sees a registration made in its own process at once, and one made elsewhere within the bound', async () => {
    // Prepare: two instances that both read the registry just now.
    const writer = instance();
    const reader = instance();
    await writer.deps.agents.putAgent(tenant, 'helper', { worker: { url: 'https://worker.example/a' } });
    await decideIn(writer, 'w-1');
    await decideIn(reader, 'r-1');

    // Act 1: a change through this process's agents service.
    await writer.deps.agents.putAgent(tenant, 'helper', { worker: { url: 'https://worker.example/b' } });
    await decideIn(writer, 'w-2');
    await decideIn(reader, 'r-2');

    // Act 2: a change made by another process (straight to the table): seen once the bound has passed.
    const record = (await reader.stores.agents.getAgent(tenant, 'helper')) as NonNullable<
      Awaited<ReturnType<Stores['agents']['getAgent']>>
    >;
    await reader.stores.agents.putAgent(
      tenant,
      {
        ...record,
        worker: { ...(record.worker as NonNullable<typeof record.worker>), url: 'https://worker.example/c' },
      },
      { existed: true, parentAsRead: record.parentId },
    );
    await decideIn(reader, 'r-3');
    clock += TENANT_READ_MAX_AGE_MS;
    await decideIn(reader, 'r-4');

    // Assess
    expect(writer.called).toEqual(['https://worker.example/a', 'https://worker.example/b']);
    expect(reader.called).toEqual([
      'https://worker.example/a',
      'https://worker.example/b',
      'https://worker.example/b',
      'https://worker.example/c',
    ]);
  });

  it('finds an agent registered elsewhere a moment ago: a request that names an agent the copy lacks reads again', async () => {
    // Prepare: the instance holds the registry, then another process registers a new agent.
    const reader = instance();
    await decideIn(reader, 'n-1');
    const record = (await reader.stores.agents.getAgent(tenant, 'helper')) as NonNullable<
      Awaited<ReturnType<Stores['agents']['getAgent']>>
    >;
    await reader.stores.agents.putAgent(
      tenant,
      {
        ...record,
        agentId: 'newcomer',
        worker: { ...(record.worker as NonNullable<typeof record.worker>), url: 'https://worker.example/new' },
      },
      { existed: false, parentAsRead: null },
    );
    reader.registryReads = 0;

    // Act: two decisions for it, at once after its registration.
    await reader.deps.decide.decide({ tenant, sessionId: 'n-2' }, { agentId: 'newcomer', trigger: { type: 'tick' } });
    await reader.deps.decide.decide({ tenant, sessionId: 'n-3' }, { agentId: 'newcomer', trigger: { type: 'tick' } });

    // Assess: found, with one read more, not one per request.
    expect(reader.called.at(-1)).toBe('https://worker.example/new');
    expect(reader.registryReads).toBe(1);
  });
});
