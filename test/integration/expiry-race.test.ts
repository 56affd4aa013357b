import { QueryCommand } from '@aws-sdk/client-dynamodb';
import { beforeAll, describe, expect, it } from 'vitest';
import type { SessionScope } from '../../functions/core/model/model.js';
import type { TipChange } from '../../functions/core/model/ports.js';
import { SessionService } from '../../functions/core/sessions/session-service.js';
import { createStores } from '../../functions/store/index.js';
import type { DynamoDbSessionStore } from '../../functions/store/sessions/session-store.js';
import { dynamoDbClient } from '../../functions/store/table/client.js';
import { LOG_ITEM_KIND } from '../../functions/store/table/item-kinds.js';
import * as keys from '../../functions/store/table/keys.js';
import { createTestTable, dynamoEndpoint } from '../helpers/dynamodb.js';

/**
 * Expiry racing writes (API.md section 12), on DynamoDB Local with a clock of the test's own:
 * a write that read the tip before the session expired and claims its place after must not
 * land in the old session, and nothing of the old life may be readable afterwards; a write
 * path that is new (PATCH of a session) holds under 50 concurrent writers.
 */

const client = dynamoDbClient({ AGENTSTATE_DYNAMODB_ENDPOINT: dynamoEndpoint() });
let tableName: string;
let clock = Date.parse('2026-06-01T10:00:00.000Z');
let store: DynamoDbSessionStore;
const now = () => new Date(clock);

beforeAll(async () => {
  tableName = await createTestTable('expiry-race');
  store = createStores(client, tableName, { now: () => clock }).sessions;
});

async function logItems(scope: SessionScope): Promise<Array<Record<string, { S?: string; N?: string }>>> {
  const { Items } = await client.send(
    new QueryCommand({
      TableName: tableName,
      KeyConditionExpression: 'pk = :pk AND begins_with(sk, :log)',
      ExpressionAttributeValues: { ':pk': { S: keys.session(scope) }, ':log': { S: keys.logPrefix } },
      ConsistentRead: true,
    }),
  );
  return (Items ?? []) as Array<Record<string, { S?: string; N?: string }>>;
}

describe('a write racing the expiry', () => {
  it('read the tip before the session expired and claims after: it retries, the expiry is carried out, and it starts a new session', async () => {
    // Prepare: a session with history and an idle expiry of a minute.
    const scope = { tenant: 't', sessionId: 'read-then-expired' };
    const service = new SessionService(store, { now });
    await service.appendMessages(scope, { messages: [{ id: 'm1', role: 'user' }] });
    await service.patchState(scope, { old: 1 });
    await service.updateSession(scope, { ttlSeconds: 60, metadata: { old: true } });
    // A writer that reads the tip, and only then finds the clock past the expiry.
    let moved = false;
    const pausing = Object.create(store) as DynamoDbSessionStore;
    pausing.commit = async (target: SessionScope, change: TipChange) => {
      if (!moved) {
        moved = true;
        clock += 61_000;
      }
      return store.commit(target, change);
    };
    const writer = new SessionService(pausing, { now });

    // Act
    const result = await writer.patchState(scope, { fresh: true });

    // Assess: version 1 of a new session from nothing, not version 2 on the old state.
    expect(moved).toBe(true);
    expect(result).toMatchObject({ version: 1, prevVersion: 0, state: { fresh: true } });
    expect(await service.readState(scope, {})).toMatchObject({ version: 1, state: { fresh: true } });
    expect(await service.readState(scope, { node: 'm1' }).catch((error: Error) => error.message)).toMatch(/m1/);
    const session = await service.getSession(scope);
    expect(session).toMatchObject({ version: 1, head: 'root', metadata: null, ttlSeconds: null, expiresAt: null });
    const versions = await service.listVersions(scope, { limit: 10 });
    expect(versions.items.map((version) => version.state)).toEqual([{ fresh: true }]);
    // Every change of the old life is a tombstone; the fence says the delete carried out an expiry.
    const items = await logItems(scope);
    const live = items.filter((item) => item.kind?.S !== LOG_ITEM_KIND.tombstone).map((item) => item.sk?.S);
    expect(live).toEqual([keys.logEntry({ incarnation: 1, base: 0, seq: 1 })]);
    const fence = items.find((item) => item.fence?.S === 'closed');
    expect(fence?.cause?.S).toBe('expired');
  });

  it('a write that claims before the expiry moves an idle expiry on', async () => {
    const scope = { tenant: 't', sessionId: 'written-in-time' };
    const service = new SessionService(store, { now });
    await service.patchState(scope, { n: 0 });
    const set = await service.updateSession(scope, { ttlSeconds: 60 });
    clock += 59_000;
    await service.patchState(scope, { n: 1 });
    clock += 59_000;

    const session = await service.getSession(scope);
    expect(session.version).toBe(2);
    expect(Date.parse(session.expiresAt as string)).toBe(Date.parse(set.expiresAt as string) + 59_000);
  });
});

describe('PATCH of a session under 50 concurrent writers', () => {
  it('merges into the metadata of the tip it claims after: a PATCH that landed in between keeps its key', async () => {
    // Prepare: writer A's tip read waits until writer B's PATCH has landed, so A reads the
    // session item before B's change and the tip after it (the interleaving that lost a key of
    // 50 concurrent PATCHes in a CI run, when the two reads went side by side).
    const scope = { tenant: 't', sessionId: 'patched-in-between' };
    const service = new SessionService(store, { now });
    await service.patchState(scope, { v: 1 });
    let landB: () => Promise<unknown> = async () => undefined;
    let waited = false;
    const slowTip = Object.create(store) as DynamoDbSessionStore;
    slowTip.readTip = async (target, options) => {
      if (!waited) {
        waited = true;
        await landB();
      }
      return store.readTip(target, options);
    };
    const writerA = new SessionService(slowTip, { now });
    landB = () => service.updateSession(scope, { metadata: { b: true } });

    // Act
    await writerA.updateSession(scope, { metadata: { a: true } });

    // Assess
    expect(waited).toBe(true);
    expect((await service.getSession(scope)).metadata).toEqual({ a: true, b: true });
  });

  it('lands every change: each metadata key is there, and the lifetime is the last one written', async () => {
    const scope = { tenant: 't', sessionId: 'patched-by-many' };
    const service = new SessionService(store, { now });
    await service.patchState(scope, { v: 1 });

    const answers = await Promise.allSettled(
      Array.from({ length: 50 }, (_, index) => service.updateSession(scope, { metadata: { [`k${index}`]: index }, ttlSeconds: 3600 })),
    );

    const refused = answers.filter((answer) => answer.status === 'rejected');
    expect(refused.map((answer) => String((answer as PromiseRejectedResult).reason))).toEqual([]);
    const session = await service.getSession(scope);
    expect(Object.keys(session.metadata ?? {}).sort()).toEqual(Array.from({ length: 50 }, (_, index) => `k${index}`).sort());
    expect(session).toMatchObject({ ttlSeconds: 3600, version: 1 });
  });
});
