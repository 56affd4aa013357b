import { DeleteCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { marshall } from '@aws-sdk/util-dynamodb';
import { beforeAll, describe, expect, it } from 'vitest';
import type { RecordedVersion } from '../../functions/core/events/events.js';
import { ChangeFanout } from '../../functions/core/fanout/change-fanout.js';
import { type FollowLog, type LiveFollower, LiveService } from '../../functions/core/fanout/live.js';
import type { SessionScope } from '../../functions/core/model/model.js';
import type { TipChange } from '../../functions/core/model/ports.js';
import { SessionService } from '../../functions/core/sessions/session-service.js';
import { ApiKeyStore } from '../../functions/store/access/api-keys.js';
import { DynamoDbLiveStore } from '../../functions/store/events/live-store.js';
import { recordedVersionOf } from '../../functions/store/events/stream-images.js';
import { createStores, type Stores } from '../../functions/store/index.js';
import type { DynamoDbSessionStore } from '../../functions/store/sessions/session-store.js';
import { LOG_ITEM_KIND } from '../../functions/store/table/item-kinds.js';
import * as keys from '../../functions/store/table/keys.js';
import { tableKeys } from '../../functions/store/table/table.js';
import type { Item } from '../../functions/store/table/table-client.js';
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

async function subscribe(connectionId: string, sessionId: string, agentId?: string): Promise<void> {
  const event: WebSocketEvent = {
    requestContext: { routeKey: 'subscribe', connectionId },
    body: JSON.stringify({ action: 'subscribe', sessionId, ...(agentId ? { agentId } : {}) }),
  };
  const answer = await webSocketHandler(event);
  expect(JSON.parse(answer.body as string)).toEqual({ type: 'subscribed', sessionId, ...(agentId ? { agentId } : {}) });
}

/** Every item of a partition, read consistently. */
async function partition(pk: string): Promise<Item[]> {
  const { Items } = await stores.table.send(
    new QueryCommand({
      TableName: tableName,
      KeyConditionExpression: 'pk = :pk',
      ExpressionAttributeValues: { ':pk': pk },
      ConsistentRead: true,
    }),
  );
  return Items ?? [];
}

/** The changes of the session's log, oldest first. */
const logOf = async (sessionId: string): Promise<Item[]> =>
  (await partition(keys.session(scopeOf(sessionId)))).filter((item) => String(item.sk).startsWith(keys.logPrefix));

/** A follow's mark outlives the subscription by the mark's reach at most: 3 h, and 3 h more. */
const MARK_REACH_SECONDS = 6 * 60 * 60;

/**
 * A live service over the test's table on a clock `aheadMs` ahead (a subscription made that much
 * later, whose mark must reach further), with the session's log as `log` writes it.
 */
function laterLive(aheadMs: number, log: FollowLog = stores.sessions): LiveService {
  return new LiveService(new DynamoDbLiveStore(stores.table), log, () => new Date(Date.now() + aheadMs));
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
      close: async () => {},
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

  it('leaves nothing that outlives a subscription to ids never written or deleted, for a tenant key and a limited key', async () => {
    // Prepare: the tenant's key and a key limited to planner, each on a connection; a session
    // written and deleted, whose partition keeps the delete's fence.
    const { apiKey } = await new ApiKeyStore(testDynamoDbClient(), tableName).create({ tenant, agents: ['planner'] });
    const limited = await webSocketHandler({
      requestContext: { routeKey: '$connect', connectionId: 'c-limited' },
      queryStringParameters: { token: apiKey },
    });
    expect(limited.statusCode).toBe(200);
    await connect('c-tenant');
    await new SessionService(stores.sessions).patchState(scopeOf('deleted-once'), { n: 1 });
    await stores.sessions.deleteSession(scopeOf('deleted-once'));
    const fenced = await partition(keys.session(scopeOf('deleted-once')));
    const never = Array.from({ length: 4 }, (_, index) => `never-${index}-${Math.random().toString(36).slice(2)}`);

    // Act
    for (const sessionId of never.slice(0, 2)) await subscribe('c-tenant', sessionId);
    for (const sessionId of never.slice(2)) await subscribe('c-limited', sessionId, 'planner');
    await subscribe('c-limited', 'deleted-once', 'planner');
    const at = Math.floor(Date.now() / 1000);

    // Assess: every item the subscriptions wrote (the mark, the follower) carries the table's
    // TTL, within the mark's reach; the delete's own items are as they were; each session may
    // be followed (its tip carries the mark).
    const written: Item[] = [];
    for (const sessionId of [...never, 'deleted-once']) {
      const scope = scopeOf(sessionId);
      const before = sessionId === 'deleted-once' ? fenced : [];
      const items = await partition(keys.session(scope));
      for (const item of before) expect(items).toContainEqual(item);
      written.push(...items.filter((item) => !before.some((old) => old.sk === item.sk)));
      written.push(...(await partition(`W#${tenant}#${sessionId}`)));
      expect((await stores.sessions.readTip(scope, { withState: false })).followersUntil).toBeGreaterThan(at);
    }
    expect(written.filter((item) => item.kind === LOG_ITEM_KIND.follow)).toHaveLength(5);
    expect(written).toHaveLength(10);
    for (const item of written) {
      expect(item[tableKeys.timeToLive], String(item.sk)).toBeGreaterThan(at);
      expect(item[tableKeys.timeToLive], String(item.sk)).toBeLessThanOrEqual(at + MARK_REACH_SECONDS + 5);
    }
  });

  it('moves a lone mark on in its place: a subscription hours later leaves one item, with the later TTL', async () => {
    // Prepare
    const sessionId = 'lone-later';
    await connect('c-lone');
    await subscribe('c-lone', sessionId);
    const [first] = await logOf(sessionId);
    const later = laterLive(4 * 60 * 60 * 1000);
    await later.connect('c-lone-later', tenant);

    // Act
    await later.subscribe('c-lone-later', sessionId);

    // Assess
    const log = await logOf(sessionId);
    expect(log).toHaveLength(1);
    expect(log[0]?.sk).toBe(first?.sk);
    expect(log[0]?.[tableKeys.timeToLive]).toBeGreaterThanOrEqual(Number(first?.[tableKeys.timeToLive]) + 4 * 60 * 60);
  });

  it('takes a lone mark into the life with its first change: every version reaches the follower, the mark is kept as the life’s', async () => {
    // Prepare
    const service = new SessionService(stores.sessions);
    await connect('c-born');
    await subscribe('c-born', 'born-later');
    const [mark] = await logOf('born-later');
    expect(mark?.[tableKeys.timeToLive]).toEqual(expect.any(Number));

    // Act
    await service.patchState(scopeOf('born-later'), { n: 1 });
    await service.patchState(scopeOf('born-later'), { n: 2 });
    const h = hook();
    await h.run(await streamed('born-later'));

    // Assess: the mark is the life's first change now (no TTL: the session's delete erases it).
    expect(h.posted.map((post) => [post.connectionId, post.version])).toEqual([
      ['c-born', 1],
      ['c-born', 2],
    ]);
    const log = await logOf('born-later');
    expect(log.map((item) => [item.kind, item[tableKeys.timeToLive]])).toEqual([
      [LOG_ITEM_KIND.follow, undefined],
      [LOG_ITEM_KIND.version, undefined],
      [LOG_ITEM_KIND.version, undefined],
    ]);
    expect(log[0]?.writeId).not.toBe(mark?.writeId);
  });

  it('reaches a first write that read the empty log before the follow and claimed its place after it', async () => {
    // Prepare: the session's first write reads its tip (nothing), then the subscription lands.
    await connect('c-first-raced');
    let followed = false;
    const pausing = Object.create(stores.sessions) as DynamoDbSessionStore;
    pausing.commit = async (target: SessionScope, change: TipChange) => {
      if (!followed) {
        followed = true;
        await subscribe('c-first-raced', 'first-raced');
        expect((await logOf('first-raced'))[0]?.[tableKeys.timeToLive]).toEqual(expect.any(Number));
      }
      return stores.sessions.commit(target, change);
    };

    // Act
    const raced = await new SessionService(pausing).patchState(scopeOf('first-raced'), { n: 1 });
    const h = hook();
    await h.run(await streamed('first-raced'));

    // Assess: the write lost its place to the mark, read again, took the mark into the life.
    expect(raced).toMatchObject({ version: 1 });
    expect(h.posted.map((post) => [post.connectionId, post.version])).toEqual([['c-first-raced', 1]]);
    expect((await logOf('first-raced')).map((item) => [item.kind, item[tableKeys.timeToLive]])).toEqual([
      [LOG_ITEM_KIND.follow, undefined],
      [LOG_ITEM_KIND.version, undefined],
    ]);
    const tip = await stores.sessions.readTip(scopeOf('first-raced'), { withState: false });
    expect(tip.lifetime?.ttlSeconds).toBe(3_600);
  });

  it('marks the life when the first write lands between the follow’s tip read and its claim', async () => {
    // Prepare: the follow reads the empty log; the session's first write lands before its claim.
    const service = new SessionService(stores.sessions);
    const scope = scopeOf('follow-raced');
    let wrote = false;
    const log: FollowLog = {
      readTip: (target, options) => stores.sessions.readTip(target, options),
      commit: async (target, change) => {
        if (!wrote) {
          wrote = true;
          await service.patchState(scope, { n: 1 });
        }
        return stores.sessions.commit(target, change);
      },
    };
    const live = laterLive(0, log);
    await live.connect('c-follow-raced', tenant);

    // Act
    await live.subscribe('c-follow-raced', 'follow-raced');
    await service.patchState(scope, { n: 2 });
    const h = hook();
    await h.run(await streamed('follow-raced'));

    // Assess: the mark lost its place, read again and went after version 1, as any follow of a
    // written session: no TTL. Version 2 reaches the follower (version 1 was made before the
    // subscription was answered).
    expect((await logOf('follow-raced')).map((item) => [item.kind, item[tableKeys.timeToLive]])).toEqual([
      [LOG_ITEM_KIND.version, undefined],
      [LOG_ITEM_KIND.follow, undefined],
      [LOG_ITEM_KIND.version, undefined],
    ]);
    expect(h.posted.map((post) => [post.connectionId, post.version])).toEqual([['c-follow-raced', 2]]);
  });

  it('does not move on a lone mark that the life’s first change took in after the follow read it', async () => {
    // Prepare: a mark; hours later a follow reads it, and the session's first write lands
    // (taking that mark into the life) before the follow's claim.
    const service = new SessionService(stores.sessions);
    const scope = scopeOf('taken-in');
    await connect('c-taken-in');
    await subscribe('c-taken-in', 'taken-in');
    let wrote = false;
    const log: FollowLog = {
      readTip: (target, options) => stores.sessions.readTip(target, options),
      commit: async (target, change) => {
        if (!wrote) {
          wrote = true;
          await service.patchState(scope, { n: 1 });
        }
        return stores.sessions.commit(target, change);
      },
    };
    const later = laterLive(4 * 60 * 60 * 1000, log);
    await later.connect('c-taken-in-later', tenant);

    // Act
    await later.subscribe('c-taken-in-later', 'taken-in');
    await service.patchState(scope, { n: 2 });

    // Assess: the life keeps the first mark, and the later follow's mark after version 1;
    // version 2 carries the later reach.
    const items = await logOf('taken-in');
    expect(items.map((item) => [item.kind, item[tableKeys.timeToLive]])).toEqual([
      [LOG_ITEM_KIND.follow, undefined],
      [LOG_ITEM_KIND.version, undefined],
      [LOG_ITEM_KIND.follow, undefined],
      [LOG_ITEM_KIND.version, undefined],
    ]);
    const tip = await stores.sessions.readTip(scope, { withState: false });
    expect(tip.followersUntil).toBeGreaterThan(Date.now() / 1000 + 9 * 60 * 60);
  });

  it('starts the life afresh when TTL removed the lone mark a write had read', async () => {
    // Prepare: the write reads the mark; TTL removes it before the write's claim.
    await connect('c-vanished');
    await subscribe('c-vanished', 'vanished');
    const [mark] = await logOf('vanished');
    let removed = false;
    const pausing = Object.create(stores.sessions) as DynamoDbSessionStore;
    pausing.commit = async (target: SessionScope, change: TipChange) => {
      if (!removed) {
        removed = true;
        await stores.table.send(new DeleteCommand({ TableName: tableName, Key: { pk: mark?.pk, sk: mark?.sk } }));
      }
      return stores.sessions.commit(target, change);
    };

    // Act
    const written = await new SessionService(pausing).patchState(scopeOf('vanished'), { n: 1 });

    // Assess: one version, in the life's first place; no mark left behind with it.
    expect(written).toMatchObject({ version: 1 });
    const log = await logOf('vanished');
    expect(log.map((item) => [item.sk, item.kind])).toEqual([[mark?.sk, LOG_ITEM_KIND.version]]);
    expect(await stores.sessions.getMeta(scopeOf('vanished'))).not.toBeNull();
  });

  it('takes 50 subscriptions at once and 10 first writes at once to a session never written, and leaves no lone mark', async () => {
    // Prepare
    const service = new SessionService(stores.sessions);
    const scope = scopeOf('crowd-unwritten');
    const connections = Array.from({ length: 50 }, (_, index) => `c-crowd-unwritten-${index}`);
    for (const connectionId of connections) await connect(connectionId);

    // Act: the subscriptions and the session's first writes all at once; then one more write.
    const writes = Array.from({ length: 10 }, (_, index) => service.patchState(scope, { [`k${index}`]: index }));
    await Promise.all([...connections.map((connectionId) => subscribe(connectionId, 'crowd-unwritten')), ...writes]);
    await service.patchState(scope, { last: true });

    // Assess: 11 versions; what is left of the marks is the life's (no TTL); the version made
    // after every subscription was answered reaches all 50 followers.
    const log = await logOf('crowd-unwritten');
    expect(log.filter((item) => item.kind === LOG_ITEM_KIND.version)).toHaveLength(11);
    expect(log.filter((item) => item[tableKeys.timeToLive] !== undefined)).toEqual([]);
    const h = hook();
    await h.run((await streamed('crowd-unwritten')).filter((version) => version.version.version === 11));
    expect(new Set(h.posted.filter((sent) => sent.version === 11).map((sent) => sent.connectionId))).toEqual(new Set(connections));
  });

  it('keeps its lone mark provisional through a failed decision, and a follow after it puts one more, which the first write takes in', async () => {
    // Prepare: a follow of an id never written, and an agent whose worker fails.
    const { dependenciesFor } = await import('../../functions/http/dependencies.js');
    const { AgentStateError } = await import('../../functions/core/kernel/errors.js');
    const deps = dependenciesFor(stores, {
      invokeWorker: async () => {
        throw new AgentStateError('worker_failed', 'the worker answered 500');
      },
    });
    await deps.agents.putAgent(tenant, 'failing', { worker: { url: 'module:examples/worker.ts' }, config: {} });
    await connect('c-decided');
    await subscribe('c-decided', 'decided-unwritten');
    const [mark] = await logOf('decided-unwritten');

    // Act: a decision that fails; a follow hours later (beyond the mark's reach); the life's first write.
    await expect(deps.decide.decide(scopeOf('decided-unwritten'), { agentId: 'failing', trigger: { type: 'tick' } })).rejects.toMatchObject(
      { code: 'worker_failed' },
    );
    const afterDecision = await logOf('decided-unwritten');
    const later = laterLive(4 * 60 * 60 * 1000);
    await later.connect('c-decided-2', tenant);
    await later.subscribe('c-decided-2', 'decided-unwritten');
    const afterFollow = await logOf('decided-unwritten');
    await new SessionService(stores.sessions).patchState(scopeOf('decided-unwritten'), { n: 1 });

    // Assess: the lease left the mark its TTL (and gave it another writeId); the lease, its end
    // and the second mark carry TTLs too; the first write takes the second mark into the life,
    // and its version reaches both followers.
    expect(afterDecision.map((item) => [item.kind, item[tableKeys.timeToLive] === undefined])).toEqual([
      [LOG_ITEM_KIND.follow, false],
      [LOG_ITEM_KIND.lease, false],
      [LOG_ITEM_KIND.release, false],
    ]);
    expect(afterDecision[0]?.[tableKeys.timeToLive]).toEqual(mark?.[tableKeys.timeToLive]);
    expect(afterDecision[0]?.writeId).not.toEqual(mark?.writeId);
    expect(afterFollow.map((item) => [item.kind, item[tableKeys.timeToLive] === undefined])).toEqual([
      [LOG_ITEM_KIND.follow, false],
      [LOG_ITEM_KIND.lease, false],
      [LOG_ITEM_KIND.release, false],
      [LOG_ITEM_KIND.follow, false],
    ]);
    const log = await logOf('decided-unwritten');
    expect(log.map((item) => [item.kind, item[tableKeys.timeToLive] === undefined])).toEqual([
      [LOG_ITEM_KIND.follow, false],
      [LOG_ITEM_KIND.lease, false],
      [LOG_ITEM_KIND.release, false],
      [LOG_ITEM_KIND.follow, true],
      [LOG_ITEM_KIND.version, true],
    ]);
    const h = hook();
    await h.run(await streamed('decided-unwritten'));
    expect(h.posted.map((post) => post.connectionId).sort()).toEqual(['c-decided', 'c-decided-2']);
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
