import { beforeAll, describe, expect, it } from 'vitest';
import type { SessionScope } from '../../functions/core/model/model.js';
import { SessionService } from '../../functions/core/sessions/session-service.js';
import { ErasureFinisher } from '../../functions/store/erasure/erasure-finish.js';
import { DynamoDbErasureStore } from '../../functions/store/erasure/erasure-store.js';
import { createStores, type Stores } from '../../functions/store/index.js';
import { dynamoDbClient } from '../../functions/store/table/client.js';
import * as keys from '../../functions/store/table/keys.js';
import { createTestTable, dynamoEndpoint, partitionItems } from '../helpers/dynamodb.js';

/**
 * A write in flight while its session is deleted, or its user erased, puts the node index its
 * change owes before it claims the log's next place (docs/architecture.md, "Message nodes and
 * their index"). When that put lands after the delete's erase read the session, the index
 * item (with its message's preview: the user's text) is under the closed life's keys, which
 * nobody reads, but it is stored: API.md section 12 says that once an erasure is `done` none
 * of it is, and a `DELETE` of a session erases every item of it. The writer's claim then fails
 * (the fence, a tombstone, or a change the delete has not tombstoned yet): it must take back
 * what it put under the closed life. Real DynamoDB Local; the put held on the writer's client
 * until the delete or the erasure is over.
 */

const client = dynamoDbClient({ AGENTSTATE_DYNAMODB_ENDPOINT: dynamoEndpoint() });
let tableName: string;
let stores: Stores;
const tenant = 't';

beforeAll(async () => {
  tableName = await createTestTable('straggler-index');
  stores = createStores(client, tableName);
});

/** A promise and what settles it. */
function signal(): { promise: Promise<void>; fire: () => void } {
  let fire!: () => void;
  const promise = new Promise<void>((resolve) => {
    fire = resolve;
  });
  return { promise, fire };
}

/** A put of a node index: a BatchWriteItem of items with a preview. */
const isIndexPut = (command: string, sent: string) => command === 'BatchWriteItemCommand' && sent.includes('"preview"');

/**
 * Stores of another process whose calls that `holds` picks, once `arm()`ed, wait for
 * `release()`: `arrived` resolves when the first waits and a read (Query, BatchGetItem) sent
 * since arming and not held has answered, or when `holds` picks reads too.
 */
function holdingCalls(holds: (command: string, sent: string) => boolean = isIndexPut) {
  const writer = dynamoDbClient({ AGENTSTATE_DYNAMODB_ENDPOINT: dynamoEndpoint() });
  const gate = signal();
  const waiting = signal();
  const read = signal();
  let armed = false;
  writer.middlewareStack.add(
    (next, context) => async (args) => {
      if (!armed) return next(args);
      const command = String(context.commandName);
      if (holds(command, JSON.stringify(args.input))) {
        if (command === 'BatchGetItemCommand') read.fire();
        else waiting.fire();
        await gate.promise;
        return next(args);
      }
      const answer = await next(args);
      if (/QueryCommand|BatchGetItemCommand/.test(command)) read.fire();
      return answer;
    },
    { step: 'initialize', name: 'holdTheIndexPut' },
  );
  return {
    stores: createStores(writer, tableName),
    arm: () => {
      armed = true;
    },
    arrived: Promise.all([waiting.promise, read.promise]),
    release: gate.fire,
  };
}

/** The items of the session that hold anything of `text`, straight from the table. */
async function holding(scope: SessionScope, text: string): Promise<string[]> {
  const items = await partitionItems(client, tableName, keys.session(scope));
  return items.filter((item) => JSON.stringify(item).includes(text)).map((item) => String(item.sk?.S));
}

const secret = 'the old life, which must not stay';

describe('an append whose index put lands after a delete erased its session', () => {
  it.each([
    ['owed to another process’s change', false],
    ['written ahead by the process that made the change before', true],
  ])('takes back the index it put under the closed life: %s', async (_, sameProcess) => {
    // Prepare: a message the log has not moved past yet (its index is owed by the next change),
    // and an append that read the tip and is held at its put of that index.
    const scope = { tenant, sessionId: `deleted-${sameProcess ? 'ahead' : 'owed'}` };
    const held = holdingCalls();
    const first = new SessionService(sameProcess ? held.stores.sessions : stores.sessions);
    await first.appendMessages(scope, { messages: [{ id: 'm1', role: 'user', content: secret }] });
    held.arm();
    const straggler = new SessionService(held.stores.sessions).appendMessages(scope, {
      messages: [{ id: 'm2', role: 'user', content: 'late' }],
    });
    await held.arrived;

    // Act: the session is deleted (204), then the held put lands.
    await new SessionService(stores.sessions).deleteSession(scope);
    held.release();
    const written = await straggler;

    // Assess: the append went on in the next life; nothing of the old one is stored.
    expect(written.nodes.map((node) => [node.id, node.parentId])).toEqual([['m2', 'root']]);
    expect(await holding(scope, secret)).toEqual([]);
    expect(await holding(scope, keys.nodeIndex('m1', 0))).toEqual([]);
  });

  it('takes it back when the tip it reads beside its index written ahead is the next life’s', async () => {
    // Prepare: this process made the change before, so an append puts the index it owes
    // beside its read of the tip (written ahead); both are held, and the session deleted meanwhile.
    const scope = { tenant, sessionId: 'deleted-read-after' };
    const held = holdingCalls((command, sent) => command === 'BatchGetItemCommand' || isIndexPut(command, sent));
    const writer = new SessionService(held.stores.sessions);
    await writer.appendMessages(scope, { messages: [{ id: 'm1', role: 'user', content: secret }] });
    held.arm();
    const straggler = writer.appendMessages(scope, { messages: [{ id: 'm2', role: 'user', content: 'late' }] });
    await held.arrived;

    // Act: the session is deleted (204); then the index put lands and the read finds the next life.
    await new SessionService(stores.sessions).deleteSession(scope);
    held.release();
    const written = await straggler;

    // Assess: the append claimed nothing in the old life, and took back what it wrote there ahead.
    expect(written.nodes.map((node) => [node.id, node.parentId])).toEqual([['m2', 'root']]);
    expect(await holding(scope, secret)).toEqual([]);
    expect(await holding(scope, keys.nodeIndex('m1', 0))).toEqual([]);
  });
});

describe('an append whose index put lands after a user’s erasure is done', () => {
  it('takes back the index it put under the life the erasure closed', async () => {
    // Prepare: the user's session with a message not indexed yet, and the held append.
    const scope = { tenant, sessionId: 'erased-user-session' };
    const sessions = new SessionService(stores.sessions);
    await sessions.createSession(tenant, { sessionId: scope.sessionId, userId: 'u-erased' });
    await sessions.appendMessages(scope, { messages: [{ id: 'm1', role: 'user', content: secret }] });
    const held = holdingCalls();
    held.arm();
    const straggler = new SessionService(held.stores.sessions).appendMessages(scope, {
      messages: [{ id: 'm2', role: 'user', content: 'late' }],
    });
    await held.arrived;

    // Act: the erasure runs to done, then the held put lands.
    const { erasureId } = await new DynamoDbErasureStore(stores.table, stores.sessions, 0).start(tenant, 'u-erased');
    const erasures = new ErasureFinisher(stores.table, stores.sessions);
    for (let runs = 0; (await erasures.get(tenant, erasureId))?.status !== 'done'; runs++) {
      expect(runs).toBeLessThan(20);
      await erasures.finish(tenant, erasureId);
    }
    held.release();
    await straggler;

    // Assess
    expect(await erasures.get(tenant, erasureId)).toMatchObject({ status: 'done', sessions: 1 });
    expect(await holding(scope, secret)).toEqual([]);
    expect(await holding(scope, keys.nodeIndex('m1', 0))).toEqual([]);
  });
});
