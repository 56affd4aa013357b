import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { beforeAll, describe, expect, it } from 'vitest';
import { MAX_SUBSCRIPTIONS } from '../../functions/core/fanout/live.js';
import { DynamoDbLiveStore } from '../../functions/store/events/live-store.js';
import { createStores, type Stores } from '../../functions/store/index.js';
import * as keys from '../../functions/store/table/keys.js';
import { handler as webSocketHandler } from '../../functions/ws/handler.js';
import { createTestTable, dynamoEndpoint, testDynamoDbClient } from '../helpers/dynamodb.js';

/**
 * A connection follows at most 100 sessions and 100 namespaces (docs/api.md), also when its
 * subscriptions arrive at once. In AWS each WebSocket message is a Lambda invocation of its
 * own, so one connection's messages run side by side (the local server answers them in order,
 * which test/e2e/live-limits.test.ts covers); here 150 invocations of the real handler for one
 * connection run at once on DynamoDB Local. What must hold: exactly 100 answered `subscribed`,
 * the others `400` naming the limit, and what is stored is what the answers said: the
 * connection lists exactly the acknowledged ones, and each has its follower item (what the
 * change hook finds), the refused none. A subscribe and an unsubscribe of one session at once
 * left a follower the connection did not list (100 of 100 pairs), so 200 sessions sent it events
 * until the list and the follower were written in one transaction (live-store.ts `follow`).
 */

const tenant = 'acme';
const AT_ONCE = 150;
let tableName: string;
let stores: Stores;
let live: DynamoDbLiveStore;

beforeAll(async () => {
  tableName = await createTestTable('live-places');
  stores = createStores(testDynamoDbClient(), tableName, { sessionDefaults: { ttlSeconds: 3_600, expiresAtMs: null, retention: null } });
  live = new DynamoDbLiveStore(stores.table);
  // The WebSocket handler builds its dependencies from the environment on first use.
  process.env.AGENTSTATE_TABLE = tableName;
  process.env.AGENTSTATE_DYNAMODB_ENDPOINT = dynamoEndpoint();
  process.env.AGENTSTATE_API_KEYS = `${tenant}:acme-key`;
  // 150 invocations share this process's one client, as they share the local server's: bound the
  // requests in flight as the local server does (functions/local/server.ts). Unbounded, 150 new
  // sockets at once to a DynamoDB Local loaded by other files missed the SDK's 1 s connection
  // timeout, a failure no Lambda, which has a client to itself, would meet: the CI on 7b46076
  // answered one subscription 503, and a run beside two other files answered 20.
  process.env.AGENTSTATE_DYNAMODB_MAX_IN_FLIGHT = '16';
});

async function connect(connectionId: string): Promise<void> {
  const connected = await webSocketHandler({
    requestContext: { routeKey: '$connect', connectionId },
    queryStringParameters: { token: 'acme-key' },
  });
  expect(connected.statusCode).toBe(200);
}

/** One message of the connection, as its own invocation; its answer parsed. */
async function send(connectionId: string, message: Record<string, unknown>): Promise<any> {
  const answer = await webSocketHandler({
    requestContext: { routeKey: String(message.action), connectionId },
    body: JSON.stringify(message),
  });
  return JSON.parse(answer.body as string);
}

/** The sets the connection's item holds (absent: empty). */
async function listed(connectionId: string): Promise<{ sessions: string[]; namespaces: string[] }> {
  const { Item } = await stores.table.send(
    new GetCommand({ TableName: tableName, Key: { pk: keys.connection(connectionId), sk: keys.connectionSort }, ConsistentRead: true }),
  );
  const of = (value: unknown) => (value instanceof Set ? [...value].map(String).sort() : []);
  return { sessions: of(Item?.sessions), namespaces: of(Item?.namespaces) };
}

describe('a connection’s subscriptions at once, each its own invocation', () => {
  it(`follows exactly ${MAX_SUBSCRIPTIONS} of ${AT_ONCE} sessions subscribed at once, each with its follower, the rest refused`, async () => {
    // Prepare
    const connectionId = 'many-sessions';
    await connect(connectionId);
    const ids = Array.from({ length: AT_ONCE }, (_, n) => `at-once-${n}`);

    // Act
    const answers = await Promise.all(ids.map((sessionId) => send(connectionId, { action: 'subscribe', sessionId })));

    // Assess: the answers, then what the connection lists and what the change hook would find.
    const acked = answers.filter((answer) => answer.type === 'subscribed').map((answer) => answer.sessionId as string);
    const refused = answers.filter((answer) => answer.type !== 'subscribed');
    expect(acked).toHaveLength(MAX_SUBSCRIPTIONS);
    expect(refused).toHaveLength(AT_ONCE - MAX_SUBSCRIPTIONS);
    for (const answer of refused)
      expect(answer).toMatchObject({ type: 'error', status: 400, code: 'invalid_request', limit: MAX_SUBSCRIPTIONS });
    expect((await listed(connectionId)).sessions).toEqual([...acked].sort());
    const following = await Promise.all(
      ids.map(async (sessionId) => (await live.subscribers({ tenant, sessionId })).includes(connectionId)),
    );
    expect(ids.filter((_, n) => following[n])).toEqual(ids.filter((id) => acked.includes(id)));
  });

  it(`follows exactly ${MAX_SUBSCRIPTIONS} of ${AT_ONCE} namespaces subscribed at once, each with its follower, the rest refused`, async () => {
    // Prepare
    const connectionId = 'many-namespaces';
    await connect(connectionId);
    const paths = Array.from({ length: AT_ONCE }, (_, n) => ['at-once', `n${n}`]);

    // Act
    const answers = await Promise.all(paths.map((namespace) => send(connectionId, { action: 'subscribe', namespace })));

    // Assess
    const acked = answers.filter((answer) => answer.type === 'subscribed').map((answer) => (answer.namespace as string[]).join('/'));
    const refused = answers.filter((answer) => answer.type !== 'subscribed');
    expect(acked).toHaveLength(MAX_SUBSCRIPTIONS);
    for (const answer of refused)
      expect(answer).toMatchObject({ type: 'error', status: 400, code: 'invalid_request', limit: MAX_SUBSCRIPTIONS });
    expect((await listed(connectionId)).namespaces).toEqual([...acked].sort());
    const following = await Promise.all(
      paths.map(async (path) => (await live.namespaceFollowers(tenant, path)).some((follower) => follower.connectionId === connectionId)),
    );
    expect(paths.filter((_, n) => following[n]).map((path) => path.join('/'))).toEqual(
      paths.map((path) => path.join('/')).filter((path) => acked.includes(path)),
    );
  });

  it('keeps the limit when subscriptions and unsubscriptions of other sessions land at once: what it lists is what the answers left', async () => {
    // Prepare: a full connection.
    const connectionId = 'many-churn';
    await connect(connectionId);
    const first = Array.from({ length: MAX_SUBSCRIPTIONS }, (_, n) => `churn-${n}`);
    for (const sessionId of first)
      expect(await send(connectionId, { action: 'subscribe', sessionId })).toMatchObject({ type: 'subscribed' });

    // Act: 50 leave while 100 others try to come in, all at once.
    const leaving = first.slice(0, 50);
    const coming = Array.from({ length: 100 }, (_, n) => `churn-new-${n}`);
    const [left, came] = await Promise.all([
      Promise.all(leaving.map((sessionId) => send(connectionId, { action: 'unsubscribe', sessionId }))),
      Promise.all(coming.map((sessionId) => send(connectionId, { action: 'subscribe', sessionId }))),
    ]);

    // Assess: never more than the limit, and the list is the answers' sum.
    expect(left.every((answer) => answer.type === 'unsubscribed')).toBe(true);
    const acked = came.filter((answer) => answer.type === 'subscribed').map((answer) => answer.sessionId as string);
    for (const answer of came.filter((a) => a.type !== 'subscribed'))
      expect(answer).toMatchObject({ status: 400, limit: MAX_SUBSCRIPTIONS });
    expect(acked.length).toBeLessThanOrEqual(50);
    expect((await listed(connectionId)).sessions).toEqual([...first.slice(50), ...acked].sort());
  });

  it('lists exactly the sessions it has follower items for when each of 100 sessions is left and followed again at once, and so follows no more than 100 after', async () => {
    // Prepare: a full connection.
    const connectionId = 'race-same';
    await connect(connectionId);
    const first = Array.from({ length: MAX_SUBSCRIPTIONS }, (_, n) => `race-${n}`);
    for (const sessionId of first)
      expect(await send(connectionId, { action: 'subscribe', sessionId })).toMatchObject({ type: 'subscribed' });

    // Act: each session left and followed again at once.
    const answers = await Promise.all(
      first.flatMap((sessionId) => [
        send(connectionId, { action: 'unsubscribe', sessionId }),
        send(connectionId, { action: 'subscribe', sessionId }),
      ]),
    );

    expect(answers.map((answer) => answer.type).sort()).toEqual([...first.map(() => 'subscribed'), ...first.map(() => 'unsubscribed')]);

    // Then as many new sessions as the connection's list has room for.
    const more = Array.from({ length: MAX_SUBSCRIPTIONS }, (_, n) => `race-more-${n}`);
    const acked: string[] = [];
    for (const sessionId of more)
      if ((await send(connectionId, { action: 'subscribe', sessionId })).type === 'subscribed') acked.push(sessionId);

    // Assess: the sessions with a follower item of this connection are exactly those it lists, and
    // it gets events of no more than 100 sessions.
    const listedNow = (await listed(connectionId)).sessions;
    const all = [...first, ...more];
    const following = await Promise.all(
      all.map(async (sessionId) => (await live.subscribers({ tenant, sessionId })).includes(connectionId)),
    );
    const followed = all.filter((_, n) => following[n]);
    expect(followed.filter((id) => !listedNow.includes(id))).toEqual([]);
    expect(listedNow.filter((id) => !followed.includes(id))).toEqual([]);
    expect(followed.length).toBeLessThanOrEqual(MAX_SUBSCRIPTIONS);
  });
});
