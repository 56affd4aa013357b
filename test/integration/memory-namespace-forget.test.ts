import { beforeAll, describe, expect, it } from 'vitest';
import type { MemoryAddress, MemoryItem, Namespace } from '../../functions/core/memory/memory.js';
import { MemoryUpkeep, type MemoryUpkeepPorts, type RecordedMemoryChange } from '../../functions/core/memory/memory-changes.js';
import { ErasureFinisher } from '../../functions/store/erasure/erasure-finish.js';
import { DynamoDbErasureStore } from '../../functions/store/erasure/erasure-store.js';
import { createStores, type Stores } from '../../functions/store/index.js';
import { DynamoDbMemoryStore } from '../../functions/store/memory/memory-store.js';
import { DynamoDbMemoryUpkeep } from '../../functions/store/memory/memory-upkeep-store.js';
import { dynamoDbClient } from '../../functions/store/table/client.js';
import { createTestTable, dynamoEndpoint } from '../helpers/dynamodb.js';

/**
 * The change hook forgets a namespace its deletes left empty (docs/api.md, "list namespaces"),
 * and a user's erasure the user's namespaces it emptied, but a put that answered is found at
 * once (API.md section 10). Both look for a live item, then take the namespace off the list; a
 * put that creates an item while they look, behind where the look has read, must keep the
 * namespace listed. On DynamoDB Local, with the put made inside the look, where it once was lost
 * (e2e/memory-at-once.test.ts found it from outside).
 */

const tenant = 't';
let tableName: string;
let stores: Stores;
let store: DynamoDbMemoryStore;
let upkeep: DynamoDbMemoryUpkeep;

beforeAll(async () => {
  tableName = await createTestTable('memory-forget');
  stores = createStores(dynamoDbClient({ AGENTSTATE_DYNAMODB_ENDPOINT: dynamoEndpoint() }), tableName);
  store = new DynamoDbMemoryStore(stores.table);
  upkeep = new DynamoDbMemoryUpkeep(stores.table);
});

const put = (address: MemoryAddress, embedding?: number[]) =>
  store.put(address, { value: { at: address.key }, author: null, condition: { kind: 'none' }, embedding });

async function listed(namespace: Namespace): Promise<string[][]> {
  return (await store.listNamespaces(tenant, { prefixes: [namespace], limit: 10 })).items;
}

/** The hook's upkeep of one delete, with `during` run after its look for a live item found none. */
async function upkeepOfDelete(deleted: MemoryItem, during: () => Promise<void>): Promise<void> {
  const ports: MemoryUpkeepPorts = Object.assign(Object.create(upkeep), {
    namespaceHasItems: async (t: string, namespace: Namespace) => {
      const has = await upkeep.namespaceHasItems(t, namespace);
      await during();
      return has;
    },
  });
  const hook = new MemoryUpkeep(ports, { historySeconds: 0 });
  const change: RecordedMemoryChange = {
    kind: 'delete',
    tenant,
    namespace: [...deleted.namespace],
    key: deleted.key,
    old: deleted,
    next: null,
    author: null,
    occurredAt: new Date().toISOString(),
  };
  const { failed } = await hook.process([{ key: '1', change }]);
  expect(failed).toEqual([]);
}

describe('forgetting an emptied namespace while a put creates an item in it', () => {
  it.each([
    ['without', undefined],
    ['with', [1, 2]],
  ])('keeps it listed, the put %s an embedding found, and its dimensions kept', async (_, embedding) => {
    // Prepare: a namespace whose only item was deleted.
    const namespace = ['ns', embedding ? 'vectors' : 'plain'];
    const first = await put({ tenant, namespace, key: 'a' }, embedding);
    expect(first.outcome).toBe('written');
    const old = (first as { item: MemoryItem }).item;
    await store.delete({ tenant, namespace, key: 'a' }, { kind: 'none' }, null);

    // Act: the hook's upkeep of the delete, a put landing after its look.
    await upkeepOfDelete(old, async () => {
      expect((await put({ tenant, namespace, key: 'b' }, embedding)).outcome).toBe('written');
    });

    // Assess: still listed; an embedding of other dimensions still refused.
    expect(await listed(namespace)).toEqual([namespace]);
    if (embedding) expect((await put({ tenant, namespace, key: 'c' }, [1, 2, 3])).outcome).toBe('dimensions_mismatch');
  });

  it('forgets it when nothing was created during the look', async () => {
    const namespace = ['ns', 'emptied'];
    const first = await put({ tenant, namespace, key: 'a' });
    await store.delete({ tenant, namespace, key: 'a' }, { kind: 'none' }, null);
    await upkeepOfDelete((first as { item: MemoryItem }).item, async () => {});
    expect(await listed(namespace)).toEqual([]);
  });
});

describe('a user’s erasure forgetting a namespace it emptied while a put creates an item in it', () => {
  it('keeps it listed: the put answered after the erasure’s 202 is new, and stays found', async () => {
    // Prepare: the user's namespace with an item of before the erasure; the erasure closed
    // (its 202), and its change hook's runs about to erase, on a client whose looks for a live
    // item in the namespace are followed by a put of a new item there.
    const namespace = ['users', 'u-forgotten', 'facts'];
    await put({ tenant, namespace, key: 'old' });
    const { erasureId } = await new DynamoDbErasureStore(stores.table, stores.sessions, 0).start(tenant, 'u-forgotten');
    const erasures = new ErasureFinisher(stores.table, stores.sessions);
    await erasures.finish(tenant, erasureId, Date.now() + 20_000, 'closed');
    expect(await erasures.get(tenant, erasureId)).toMatchObject({ status: 'running' });
    const looking = dynamoDbClient({ AGENTSTATE_DYNAMODB_ENDPOINT: dynamoEndpoint() });
    let fresh: Awaited<ReturnType<typeof put>> | undefined;
    looking.middlewareStack.add(
      (next, context) => async (args) => {
        const answer = await next(args);
        const sent = JSON.stringify(args.input);
        if (context.commandName === 'QueryCommand' && sent.includes(':live') && sent.includes('u-forgotten') && !fresh) {
          fresh = await put({ tenant, namespace, key: 'fresh' });
        }
        return answer;
      },
      { step: 'initialize', name: 'putDuringTheLook' },
    );
    const running = createStores(looking, tableName);

    // Act: the erasure runs to done, the put made inside its look.
    await new ErasureFinisher(running.table, running.sessions).finish(tenant, erasureId);

    // Assess: done; the put landed and answered; its namespace is listed, its item there, the old one gone.
    expect(await erasures.get(tenant, erasureId)).toMatchObject({ status: 'done', memoryItems: 1 });
    expect(fresh?.outcome).toBe('written');
    expect(await listed(namespace)).toEqual([namespace]);
    expect((await store.get({ tenant, namespace, key: 'fresh' }))?.value).toEqual({ at: 'fresh' });
    expect(await store.get({ tenant, namespace, key: 'old' })).toBeNull();
  });
});
