import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DeleteCommand, GetCommand, PutCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { v7 as uuidv7 } from 'uuid';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { WebhookRecord } from '../../functions/core/webhooks/records.js';
import { DynamoDbWebhookStore } from '../../functions/store/events/webhook-store.js';
import * as keys from '../../functions/store/table/keys.js';
import { TableClient } from '../../functions/store/table/table-client.js';
import { createTestTable, testDynamoDbClient } from '../helpers/dynamodb.js';

/**
 * A tenant's webhook limit, counted where the webhooks are kept (webhook-store.ts, places):
 * creates at once never pass it together, webhooks made before the places item existed are
 * counted, and a place whose create or delete stopped halfway is freed once no request can
 * still be running, never before.
 */
let client: DynamoDBClient;
let table: TableClient;
let store: DynamoDbWebhookStore;
let clock = Date.parse('2026-12-06T12:00:00.000Z');
const LIMIT = 20;

beforeAll(async () => {
  client = testDynamoDbClient();
  table = new TableClient(client, await createTestTable('places'), () => clock);
  store = new DynamoDbWebhookStore(table);
});
afterAll(() => {
  client.destroy();
});

const hook = (id = uuidv7()): WebhookRecord => ({
  id,
  url: `https://${id}.example`,
  secret: null,
  sessionId: null,
  createdAt: new Date(clock).toISOString(),
});

/** The webhook's item put as code before the places item put it: no place taken. */
async function putWithoutPlace(tenant: string, webhook: WebhookRecord): Promise<void> {
  await table.send(
    new PutCommand({
      TableName: table.tableName,
      Item: { pk: keys.webhooks(tenant), sk: keys.webhook(webhook.id), id: webhook.id, url: webhook.url, createdAt: webhook.createdAt },
    }),
  );
}

/** A place taken as a create takes it, with no webhook put after it. */
async function takePlaceOnly(tenant: string, webhookId: string): Promise<void> {
  await table.send(
    new UpdateCommand({
      TableName: table.tableName,
      Key: { pk: keys.webhooks(tenant), sk: keys.webhookPlaces },
      UpdateExpression: 'SET places.#id = :at',
      ExpressionAttributeNames: { '#id': webhookId },
      ExpressionAttributeValues: { ':at': clock },
    }),
  );
}

async function places(tenant: string): Promise<Record<string, number> | undefined> {
  const { Item } = await table.send(
    new GetCommand({ TableName: table.tableName, Key: { pk: keys.webhooks(tenant), sk: keys.webhookPlaces }, ConsistentRead: true }),
  );
  return Item?.places as Record<string, number> | undefined;
}

describe('webhook places', () => {
  it('puts exactly the limit of 60 creates at once, and a delete frees one place', async () => {
    // Act
    const tenant = `at-once-${uuidv7()}`;
    const results = await Promise.all(Array.from({ length: 60 }, () => store.putWebhook(tenant, hook(), { limit: LIMIT })));

    // Assess
    expect(results.filter(Boolean)).toHaveLength(LIMIT);
    const kept = await store.allWebhooks(tenant);
    expect(kept).toHaveLength(LIMIT);
    expect(Object.keys((await places(tenant)) ?? {}).sort()).toEqual(kept.map((webhook) => webhook.id).sort());
    expect(await store.putWebhook(tenant, hook(), { limit: LIMIT })).toBe(false);
    expect(await store.deleteWebhook(tenant, kept[0]?.id as string)).toBe(true);
    expect(await store.putWebhook(tenant, hook(), { limit: LIMIT })).toBe(true);
    expect(await store.putWebhook(tenant, hook(), { limit: LIMIT })).toBe(false);
  });

  it('takes a place for a create refused before the places were counted and read after others took some', async () => {
    // Prepare: a table whose first place update for one webhook is refused (no places yet), and
    // before that refusal comes back, other creates count the places and take five.
    const tenant = `counted-since-${uuidv7()}`;
    const late = hook();
    let held = false;
    const others = new DynamoDbWebhookStore(table);
    const slow = {
      tableName: table.tableName,
      now: table.now,
      nowSeconds: () => table.nowSeconds(),
      send: (async (command: { input?: { ExpressionAttributeNames?: Record<string, string> } }) => {
        const answer = table.send(command as Parameters<TableClient['send']>[0]);
        if (held || command.input?.ExpressionAttributeNames?.['#id'] !== late.id) return answer;
        held = true;
        await answer.catch(() => undefined);
        for (let n = 0; n < 5; n += 1) expect(await others.putWebhook(tenant, hook(), { limit: LIMIT })).toBe(true);
        return answer;
      }) as TableClient['send'],
    } as TableClient;

    // Act
    const put = await new DynamoDbWebhookStore(slow).putWebhook(tenant, late, { limit: LIMIT });

    // Assess: the refusal came from before the count; the place is free, and taken.
    expect(held).toBe(true);
    expect(put).toBe(true);
    expect(Object.keys((await places(tenant)) ?? {})).toHaveLength(6);
  });

  it('counts the webhooks made before places existed, at the first create after them', async () => {
    // Prepare: 19 webhooks and no places item.
    const tenant = `before-${uuidv7()}`;
    for (let n = 0; n < LIMIT - 1; n += 1) await putWithoutPlace(tenant, hook());

    // Act: 10 creates at once; one place is left.
    const results = await Promise.all(Array.from({ length: 10 }, () => store.putWebhook(tenant, hook(), { limit: LIMIT })));

    // Assess
    expect(results.filter(Boolean)).toHaveLength(1);
    expect(await store.allWebhooks(tenant)).toHaveLength(LIMIT);
    expect(Object.keys((await places(tenant)) ?? {})).toHaveLength(LIMIT);
  });

  it('frees a place held by a create that stopped before its put only once no request can still be running', async () => {
    // Prepare: 19 webhooks, and a place taken by a create that never put its webhook.
    const tenant = `abandoned-${uuidv7()}`;
    for (let n = 0; n < LIMIT - 1; n += 1) expect(await store.putWebhook(tenant, hook(), { limit: LIMIT })).toBe(true);
    const stopped = uuidv7();
    await takePlaceOnly(tenant, stopped);

    // Act: a create 14 minutes later (the stopped one could still be running), then 16.
    clock += 14 * 60 * 1000;
    const tooSoon = await store.putWebhook(tenant, hook(), { limit: LIMIT });
    clock += 2 * 60 * 1000;
    const later = await store.putWebhook(tenant, hook(), { limit: LIMIT });

    // Assess
    expect(tooSoon).toBe(false);
    expect(later).toBe(true);
    expect((await places(tenant))?.[stopped]).toBeUndefined();
    expect(await store.allWebhooks(tenant)).toHaveLength(LIMIT);
  });

  it('frees the place of a webhook whose delete stopped before giving it back', async () => {
    // Prepare: the limit reached, then one webhook's item deleted without its place.
    const tenant = `half-deleted-${uuidv7()}`;
    const made = Array.from({ length: LIMIT }, () => hook());
    for (const webhook of made) expect(await store.putWebhook(tenant, webhook, { limit: LIMIT })).toBe(true);
    clock += 16 * 60 * 1000;
    await table.send(
      new DeleteCommand({ TableName: table.tableName, Key: { pk: keys.webhooks(tenant), sk: keys.webhook(made[0]?.id as string) } }),
    );

    // Act
    const created = await store.putWebhook(tenant, hook(), { limit: LIMIT });

    // Assess
    expect(created).toBe(true);
    expect(Object.keys((await places(tenant)) ?? {})).not.toContain(made[0]?.id);
    expect(await store.allWebhooks(tenant)).toHaveLength(LIMIT);
  });

  it('takes a resent create at the limit as the one it is (its place is its own): true, one webhook', async () => {
    // Prepare: 19 webhooks, and the 20th's place already taken by its own first attempt.
    const tenant = `resent-${uuidv7()}`;
    for (let n = 0; n < LIMIT - 1; n += 1) expect(await store.putWebhook(tenant, hook(), { limit: LIMIT })).toBe(true);
    const last = hook();
    await takePlaceOnly(tenant, last.id);

    // Act
    const put = await store.putWebhook(tenant, last, { limit: LIMIT });

    // Assess
    expect(put).toBe(true);
    expect((await store.allWebhooks(tenant)).map((webhook) => webhook.id)).toContain(last.id);
    expect(await store.allWebhooks(tenant)).toHaveLength(LIMIT);
  });
});
