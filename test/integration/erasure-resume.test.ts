import { beforeAll, describe, expect, it } from 'vitest';
import type { JsonObject } from '../../functions/core/json/json.js';
import { MemoryService } from '../../functions/core/memory/memory-service.js';
import { SessionService } from '../../functions/core/sessions/session-service.js';
import { ErasureFinisher } from '../../functions/store/erasure/erasure-finish.js';
import { createStores, type Stores } from '../../functions/store/index.js';
import { DynamoDbMemoryStore } from '../../functions/store/memory/memory-store.js';
import { DynamoDbMemoryUpkeep } from '../../functions/store/memory/memory-upkeep-store.js';
import { dynamoDbClient } from '../../functions/store/table/client.js';
import { LOG_ITEM_KIND } from '../../functions/store/table/item-kinds.js';
import * as keys from '../../functions/store/table/keys.js';
import { createTestTable, dynamoEndpoint, partitionItems } from '../helpers/dynamodb.js';

/**
 * An erasure of a user (API.md section 12) whose second step dies halfway, as a change hook
 * past its timeout would, and is run again, as the stream's retry would: the run again finishes
 * it, nothing of the user is left stored, and the counts are those of what was there. Real
 * DynamoDB Local; the fault is a request that fails after a number of others, injected on the
 * client (DynamoDB Local cannot be told to fail).
 */

const client = dynamoDbClient({ AGENTSTATE_DYNAMODB_ENDPOINT: dynamoEndpoint() });
let tableName: string;
let stores: Stores;
const tenant = 't';

beforeAll(async () => {
  tableName = await createTestTable('erasure-resume');
  stores = createStores(client, tableName);
});

/** Every item of a partition, read raw. */
function stored(pk: string) {
  return partitionItems(client, tableName, pk);
}

/** An erasure store whose client fails every request after the first `allowed` writes of the table. */
function failingAfter(allowed: number): ErasureFinisher {
  const faulty = dynamoDbClient({ AGENTSTATE_DYNAMODB_ENDPOINT: dynamoEndpoint() });
  let writes = 0;
  faulty.middlewareStack.add(
    (next, context) => async (args) => {
      if (/BatchWriteItem|DeleteItem|PutItem|UpdateItem/.test(String(context.commandName)) && ++writes > allowed) {
        throw Object.assign(new Error('the function timed out'), { name: 'TimeoutError' });
      }
      return next(args);
    },
    { step: 'initialize', name: 'dieHalfway' },
  );
  const halfway = createStores(faulty, tableName);
  return new ErasureFinisher(halfway.table, halfway.sessions);
}

describe('an erasure interrupted halfway', () => {
  it('is finished by the next run: nothing of the user stored, the counts of what there was, and a third run changes nothing', async () => {
    // Prepare: u1's 12 sessions with versions, 6 memory items (with a replaced version each,
    // kept as the change hook keeps them) in two namespaces; u10's memory beside them.
    const sessions = new SessionService(stores.sessions);
    const memory = new MemoryService(new DynamoDbMemoryStore(stores.table));
    const upkeep = new DynamoDbMemoryUpkeep(stores.table);
    const now = new Date().toISOString();
    const sids = Array.from({ length: 12 }, (_, index) => `u1-session-${index}`);
    for (const sessionId of sids) {
      await stores.sessions.createSession(
        { tenant, sessionId },
        { sessionId, agentId: null, userId: 'u1', metadata: null, createdAt: now, updatedAt: now },
      );
      await sessions.patchState({ tenant, sessionId }, { secret: 'old' });
      await sessions.patchState({ tenant, sessionId }, { more: 1 });
    }
    const put = (namespace: string[], key: string, value: JsonObject) =>
      memory.put(tenant, null, { namespace, key }, { value }, { condition: { kind: 'none' }, author: null });
    for (const namespace of [
      ['users', 'u1'],
      ['users', 'u1', 'facts'],
    ]) {
      for (const key of ['a', 'b', 'c']) {
        await put(namespace, key, { old: 1 });
        const second = await put(namespace, key, { old: 2 });
        await upkeep.recordHistory(tenant, { ...second.item, version: 1, value: { old: 1 } }, Math.floor(Date.now() / 1000) + 3600);
      }
    }
    await put(['users', 'u10'], 'a', { kept: true });
    const erasures = new ErasureFinisher(stores.table, stores.sessions);
    const { erasureId } = await erasures.start(tenant, 'u1');
    // Unreadable from the first step on, before the second runs: no list shows a session of u1.
    expect((await stores.sessions.listSessions(tenant, { limit: 100, filter: { userId: 'u1' } })).items).toEqual([]);
    expect((await stores.sessions.listSessions(tenant, { limit: 100 })).items).toEqual([]);

    // Act: the second step dies after a few writes, then runs again.
    await expect(failingAfter(5).finish(tenant, erasureId)).rejects.toThrow('unavailable');
    expect(await erasures.get(tenant, erasureId)).toMatchObject({ status: 'running', sessions: 12, memoryItems: 6 });
    await erasures.finish(tenant, erasureId);

    // Assess
    const finished = await erasures.get(tenant, erasureId);
    expect(finished).toMatchObject({ status: 'done', sessions: 12, memoryItems: 6, documents: 0 });
    for (const sessionId of sids) {
      const left = await stored(keys.session({ tenant, sessionId }));
      expect(left.every((item) => item.kind?.S === LOG_ITEM_KIND.tombstone)).toBe(true);
      expect(JSON.stringify(left)).not.toContain('old');
    }
    for (const path of ['users/u1', 'users/u1/facts']) {
      expect(await stored(`M#${tenant}#${path}`)).toEqual([]);
      for (const key of ['a', 'b', 'c']) expect(await stored(`MH#${tenant}#${path}#${key}`)).toEqual([]);
    }
    expect(await stored(`E#${tenant}#${erasureId}`)).toHaveLength(1);
    expect(await stored(keys.memoryNamespaces(tenant))).toHaveLength(1);
    expect((await memory.get(tenant, null, ['users', 'u10'], 'a')).value).toEqual({ kept: true });

    // A redelivered record runs it once more: done stays done, counts unchanged.
    await erasures.finish(tenant, erasureId);
    expect(await erasures.get(tenant, erasureId)).toEqual(finished);
  });
});
