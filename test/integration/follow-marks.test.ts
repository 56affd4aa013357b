import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import { marshall } from '@aws-sdk/util-dynamodb';
import { beforeAll, describe, expect, it } from 'vitest';
import type { RecordedVersion } from '../../functions/core/events/events.js';
import { ChangeFanout } from '../../functions/core/fanout/change-fanout.js';
import type { LiveFollower } from '../../functions/core/fanout/live.js';
import type { SessionScope } from '../../functions/core/model/model.js';
import type { TipChange } from '../../functions/core/model/ports.js';
import { SessionService } from '../../functions/core/sessions/session-service.js';
import { DynamoDbLiveStore } from '../../functions/store/events/live-store.js';
import { recordedVersionOf } from '../../functions/store/events/stream-images.js';
import { createStores, type Stores } from '../../functions/store/index.js';
import type { DynamoDbSessionStore } from '../../functions/store/sessions/session-store.js';
import { LOG_ITEM_KIND } from '../../functions/store/table/item-kinds.js';
import * as keys from '../../functions/store/table/keys.js';
import { liveBroadcaster } from '../../functions/ws/broadcast.js';
import { type WebSocketEvent, handler as webSocketHandler } from '../../functions/ws/handler.js';
import { createTestTable, dynamoEndpoint, testDynamoDbClient } from '../helpers/dynamodb.js';

/**
 * A follow's mark (core/fanout/live.ts `markFollowed`): a subscription puts on the session's
 * log, in the log's next place, that the session has followers, and the change hook looks for
 * a session's followers only when a version's stream image carries that mark. What must hold:
 * no version made after a subscription was answered lacks it, whatever race the subscription
 * ran into, and in every life of the session id. Subscriptions go through the real WebSocket
 * handler; versions are written by the stores, their stream images made from the items as
 * DynamoDB's stream carries them, and handed to the change hook's fan-out with the real
 * broadcaster over the live store (the WebSocket gateway alone is a recorder).
 */

const tenant = 'acme';
let tableName: string;
let stores: Stores;

beforeAll(async () => {
  tableName = await createTestTable('follow-marks');
  stores = createStores(testDynamoDbClient(), tableName, { sessionDefaults: { ttlSeconds: 3_600, expiresAtMs: null, retention: null } });
  // The WebSocket handler builds its dependencies from the environment on first use.
  process.env.AGENTSTATE_TABLE = tableName;
  process.env.AGENTSTATE_DYNAMODB_ENDPOINT = dynamoEndpoint();
  process.env.AGENTSTATE_API_KEYS = `${tenant}:acme-key`;
});

const scopeOf = (sessionId: string): SessionScope => ({ tenant, sessionId });

async function connect(connectionId: string): Promise<void> {
  const connected = await webSocketHandler({
    requestContext: { routeKey: '$connect', connectionId },
    queryStringParameters: { token: 'acme-key' },
  });
  expect(connected.statusCode).toBe(200);
}

async function subscribe(connectionId: string, sessionId: string): Promise<void> {
  const event: WebSocketEvent = {
    requestContext: { routeKey: 'subscribe', connectionId },
    body: JSON.stringify({ action: 'subscribe', sessionId }),
  };
  const answer = await webSocketHandler(event);
  expect(JSON.parse(answer.body as string)).toEqual({ type: 'subscribed', sessionId });
}

/** Every version of the session's log (all lives), as the stream's INSERT records make them. */
async function streamed(sessionId: string): Promise<RecordedVersion[]> {
  const { Items } = await stores.table.send(
    new QueryCommand({
      TableName: tableName,
      KeyConditionExpression: 'pk = :pk AND begins_with(sk, :prefix)',
      ExpressionAttributeValues: { ':pk': keys.session(scopeOf(sessionId)), ':prefix': keys.logPrefix },
      ConsistentRead: true,
    }),
  );
  return (Items ?? [])
    .filter((item) => item.kind === LOG_ITEM_KIND.version)
    .map((item) =>
      recordedVersionOf({ eventName: 'INSERT', dynamodb: { NewImage: marshall(item, { removeUndefinedValues: true }) as never } }),
    )
    .filter((recorded): recorded is RecordedVersion => recorded !== null);
}

/** The change hook's fan-out with the real broadcaster: what it posted, and how often it looked for followers. */
function hook() {
  const posted: Array<{ connectionId: string; version: number }> = [];
  const live = new DynamoDbLiveStore(stores.table);
  let lookups = 0;
  const counted = {
    deleteConnection: (connectionId: string) => live.deleteConnection(connectionId),
    followers: async (scope: SessionScope): Promise<LiveFollower[]> => {
      lookups++;
      return live.followers(scope);
    },
  };
  const fanout = new ChangeFanout({
    deliversWebhooks: false,
    readState: (scope, version, incarnation) => stores.sessions.getVersionState(scope, version, incarnation),
    broadcast: liveBroadcaster(counted, {
      post: async (connectionId, data) => {
        posted.push({ connectionId, version: (JSON.parse(data) as { version: number }).version });
        return 'sent';
      },
    }),
  });
  return {
    posted,
    lookups: () => lookups,
    /** One batch per version, as a hook that keeps up with the writes sees them. */
    run: async (versions: readonly RecordedVersion[]) => {
      for (const change of versions) {
        const { failed } = await fanout.process([{ key: `${change.incarnation}/${change.version.version}`, change }]);
        expect(failed).toEqual([]);
      }
    },
  };
}

describe('a follow’s mark on the session’s log', () => {
  it('looks for no followers of a session nobody follows', async () => {
    // Prepare
    const service = new SessionService(stores.sessions);
    await service.patchState(scopeOf('alone'), { n: 1 });
    await service.patchState(scopeOf('alone'), { n: 2 });
    const h = hook();

    // Act
    await h.run(await streamed('alone'));

    // Assess
    expect(h.lookups()).toBe(0);
    expect((await streamed('alone')).map((version) => version.followed ?? false)).toEqual([false, false]);
  });

  it('reaches a write that read the tip before the follow and claimed its place after it, and every version after', async () => {
    // Prepare: version 1 before anyone follows; then a write whose tip read comes before the
    // subscription and whose claim comes after it has been answered.
    const service = new SessionService(stores.sessions);
    const scope = scopeOf('raced');
    await service.patchState(scope, { n: 1 });
    await connect('c-raced');
    let followed = false;
    const pausing = Object.create(stores.sessions) as DynamoDbSessionStore;
    pausing.commit = async (target: SessionScope, change: TipChange) => {
      if (!followed) {
        followed = true;
        await subscribe('c-raced', 'raced');
      }
      return stores.sessions.commit(target, change);
    };

    // Act
    const raced = await new SessionService(pausing).patchState(scope, { n: 2 });
    await service.patchState(scope, { n: 3 });
    const h = hook();
    await h.run(await streamed('raced'));

    // Assess: the raced write lost its place to the mark, read again, and carries it; version 1,
    // made before the subscription, is not looked up, and every later one reaches the follower.
    expect(raced).toMatchObject({ version: 2 });
    expect((await streamed('raced')).map((version) => [version.version.version, version.followed ?? false])).toEqual([
      [1, false],
      [2, true],
      [3, true],
    ]);
    expect(h.posted.map((post) => [post.connectionId, post.version])).toEqual([
      ['c-raced', 2],
      ['c-raced', 3],
    ]);
    expect(h.lookups()).toBe(2);
  });

  it('lands between a version’s write and the hook’s run: that version may go unsent, the next one reaches the follower', async () => {
    // Prepare
    const service = new SessionService(stores.sessions);
    const scope = scopeOf('between');
    await service.patchState(scope, { n: 1 });
    await connect('c-between');

    // Act: the follow comes after version 1's write and before the hook has seen it.
    await subscribe('c-between', 'between');
    await service.patchState(scope, { n: 2 });
    const h = hook();
    await h.run(await streamed('between'));

    // Assess
    expect(h.posted.map((post) => post.version)).toEqual([2]);
  });

  it('follows the session id into its next life: across a delete, and from a follow of a deleted or never-written session', async () => {
    // Prepare: one follower before a delete; one of a session never written; one of a deleted session.
    const service = new SessionService(stores.sessions);
    await service.patchState(scopeOf('lives'), { life: 0 });
    await connect('c-lives');
    await subscribe('c-lives', 'lives');
    await connect('c-never');
    await subscribe('c-never', 'never-written');
    await service.patchState(scopeOf('gone'), { life: 0 });
    await stores.sessions.deleteSession(scopeOf('gone'));
    await connect('c-gone');
    await subscribe('c-gone', 'gone');

    // Act
    await stores.sessions.deleteSession(scopeOf('lives'));
    await service.patchState(scopeOf('lives'), { life: 1 });
    await service.patchState(scopeOf('never-written'), { first: true });
    await service.patchState(scopeOf('gone'), { life: 1 });
    const h = hook();
    for (const sessionId of ['lives', 'never-written', 'gone']) await h.run(await streamed(sessionId));

    // Assess: each follower got the versions made after it followed, in the life they were made in.
    expect(h.posted.map((post) => [post.connectionId, post.version])).toEqual([
      ['c-lives', 1],
      ['c-never', 1],
      ['c-gone', 1],
    ]);
    // (The delete made life 0's version a tombstone: only life 1's is left.)
    expect((await streamed('lives')).map((version) => [version.incarnation, version.followed ?? false])).toEqual([[1, true]]);
    // A follow is no write: the first write after it is still the session's first (the
    // deployment's lifetime defaults, the session item made with it).
    for (const sessionId of ['never-written', 'gone']) {
      const tip = await stores.sessions.readTip(scopeOf(sessionId), { withState: false });
      expect(tip.lifetime?.ttlSeconds).toBe(3_600);
      expect(await stores.sessions.getMeta(scopeOf(sessionId))).not.toBeNull();
    }
  });

  it('marks the log once for many subscriptions: 50 at once, and more seconds later', async () => {
    // Prepare
    const service = new SessionService(stores.sessions);
    const scope = scopeOf('crowd');
    await service.patchState(scope, { n: 1 });
    const connections = Array.from({ length: 50 }, (_, index) => `c-crowd-${index}`);
    for (const connectionId of [...connections, 'c-crowd-late']) await connect(connectionId);

    // Act: 50 subscribe at once; one more over a second later, whose own expiry is later.
    await Promise.all(connections.map((connectionId) => subscribe(connectionId, 'crowd')));
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    await subscribe('c-crowd-late', 'crowd');
    await service.patchState(scope, { n: 2 });

    // Assess: one mark, reaching past every subscription; the next version is looked up and
    // reaches all 51 followers.
    const { Items } = await stores.table.send(
      new QueryCommand({
        TableName: tableName,
        KeyConditionExpression: 'pk = :pk AND begins_with(sk, :prefix)',
        ExpressionAttributeValues: { ':pk': keys.session(scope), ':prefix': keys.logPrefix },
        ConsistentRead: true,
      }),
    );
    expect((Items ?? []).filter((item) => item.kind === LOG_ITEM_KIND.follow)).toHaveLength(1);
    const h = hook();
    await h.run((await streamed('crowd')).filter((version) => version.version.version === 2));
    expect(h.posted.filter((sent) => sent.version === 2)).toHaveLength(51);
  });

  it('is no write: the session’s idle expiry, its version and its head stay as they were', async () => {
    // Prepare
    const service = new SessionService(stores.sessions);
    const scope = scopeOf('idle');
    await service.appendMessages(scope, { messages: [{ id: 'm1', role: 'user' }] });
    await service.patchState(scope, { n: 1 });
    const before = await stores.sessions.readTip(scope, { withState: false });
    await new Promise((resolve) => setTimeout(resolve, 20));

    // Act
    await connect('c-idle');
    await subscribe('c-idle', 'idle');
    const after = await stores.sessions.readTip(scope, { withState: false });

    // Assess
    expect(after.kind).toBe('entry');
    expect(after.followersUntil).toBeGreaterThan(Date.now() / 1000);
    expect([after.version, after.head, after.headVersion, after.expiresAtMs]).toEqual([
      before.version,
      before.head,
      before.headVersion,
      before.expiresAtMs,
    ]);
    expect(before.expiresAtMs).toEqual(expect.any(Number));
  });
});
