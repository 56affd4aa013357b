import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import { beforeAll, describe, expect, it } from 'vitest';
import { CommitService } from '../../functions/core/commits/commit-service.js';
import { parseJsonPatch } from '../../functions/core/json/json-patch.js';
import { invalidateTenant } from '../../functions/core/kernel/tenant-cache.js';
import { headState } from '../../functions/core/sessions/head-state.js';
import { SessionCopier } from '../../functions/core/sessions/session-copy.js';
import { SessionService } from '../../functions/core/sessions/session-service.js';
import { createStores, type Stores } from '../../functions/store/index.js';
import { dynamoDbClient } from '../../functions/store/table/client.js';
import * as keys from '../../functions/store/table/keys.js';
import { tableKeys } from '../../functions/store/table/table.js';
import { createTestTable, dynamoEndpoint } from '../helpers/dynamodb.js';

/**
 * DESIGN.md section 4 budgets, counted on the wire: every DynamoDB request the service makes
 * passes through a middleware that records its command name. Counts, not timings.
 */
let service: SessionService;
let stores: Stores;
let sent: string[] = [];
/** Write units DynamoDB reported for the requests counted (ReturnConsumedCapacity: TOTAL). */
let writeUnits = 0;
/** Read units DynamoDB reported for the requests counted. */
let readUnits = 0;
/** Sequential rounds: a request that starts while none is in flight starts a new round. */
let rounds = 0;
let inFlight = 0;
let tableName = '';
/** The client whose requests are counted, for a second process's stores. */
let counted: DynamoDBClient;
/** Run once before the next PutItem is sent (to land another writer's change in between). */
let beforeNextPut: (() => Promise<unknown>) | undefined;
/** Run once before the next TransactWriteItems is sent (to make a session item in between). */
let beforeNextTransact: (() => Promise<unknown>) | undefined;

beforeAll(async () => {
  tableName = await createTestTable('budget');
  const client = dynamoDbClient({ AGENTSTATE_DYNAMODB_ENDPOINT: dynamoEndpoint() });
  counted = client;
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const hook = context.commandName === 'PutItemCommand' ? beforeNextPut : undefined;
      if (hook) {
        beforeNextPut = undefined;
        await hook();
      }
      const transactHook = context.commandName === 'TransactWriteItemsCommand' ? beforeNextTransact : undefined;
      if (transactHook) {
        beforeNextTransact = undefined;
        await transactHook();
      }
      sent.push(String(context.commandName).replace(/Command$/, ''));
      const input = args.input as { ReturnConsumedCapacity?: string };
      input.ReturnConsumedCapacity ??= 'TOTAL';
      if (inFlight === 0) rounds++;
      inFlight++;
      try {
        const result = await next(args);
        const consumed = (result.output as { ConsumedCapacity?: unknown }).ConsumedCapacity;
        for (const entry of (Array.isArray(consumed) ? consumed : consumed ? [consumed] : []) as Array<{ CapacityUnits?: number }>) {
          if (/Put|Update|Delete|BatchWrite/.test(String(context.commandName))) writeUnits += entry.CapacityUnits ?? 0;
          if (/Get|Query|Scan/.test(String(context.commandName))) readUnits += entry.CapacityUnits ?? 0;
        }
        return result;
      } finally {
        inFlight--;
      }
    },
    { step: 'initialize', name: 'countRequests' },
  );
  stores = createStores(client, tableName);
  // As the message tree's group has it: appends may carry the new head's state.
  service = new SessionService(stores.sessions, { headState });
});

async function count<T>(operation: () => Promise<T>): Promise<string[]> {
  sent = [];
  await operation();
  return sent;
}

/** What an operation cost: its requests, the write and read units they consumed, and its sequential rounds. */
async function cost<T>(
  operation: () => Promise<T>,
): Promise<{ requests: string[]; writeUnits: number; readUnits: number; rounds: number }> {
  writeUnits = 0;
  readUnits = 0;
  rounds = 0;
  // A copy: reads made after this one must not count towards it.
  const requests = [...(await count(operation))];
  return { requests, writeUnits, readUnits, rounds };
}

const writes = (requests: string[]) => requests.filter((name) => /Put|Update|Transact|Delete|BatchWrite/.test(name));

describe('requests per operation', () => {
  const scope = { tenant: 'budget', sessionId: 'small' };

  it('writes state at the head with one read and one PutItem', async () => {
    await service.patchState(scope, { warm: true });

    const requests = await count(() => service.patchState(scope, { n: 1 }));

    expect(requests).toEqual(['Query', 'PutItem']);
  });

  it('reads state at the head with one Query', async () => {
    expect(await count(() => service.readState(scope, {}))).toEqual(['Query']);
  });

  it('reads state at another node, or after the head moved, in at most three requests', async () => {
    await service.appendMessages(scope, { messages: [{ id: 'q1', role: 'user' }] });
    await service.patchState(scope, { at: 'q1' });
    await service.appendMessages(scope, { messages: [{ id: 'a1', role: 'assistant' }] });

    const atHeadAfterMove = await count(() => service.readState(scope, {}));
    const atOtherNode = await count(() => service.readState(scope, { node: 'q1' }));
    const atVersion = await count(() => service.readState(scope, { version: 1 }));

    expect(atHeadAfterMove.length).toBeLessThanOrEqual(2);
    expect(atOtherNode.length).toBeLessThanOrEqual(3);
    // A version is the last change under its key's prefix: one Query of one item, the read
    // units of a GetItem (its place in the log is not known from its number alone). Beside it,
    // in the same round, the tip: a version alone cannot tell whether its session has expired
    // since, or had its expiry brought forward by a PATCH after it (API.md section 12).
    expect(atVersion).toEqual(['Query', 'Query']);
  });

  it('reads the tree in the same requests with or without message previews', async () => {
    const plain = await count(() => service.getTree(scope));
    const withPreview = await count(() => service.getTree(scope, { preview: true }));

    expect(withPreview).toEqual(plain);
    expect(plain.length).toBeLessThanOrEqual(3);
  });

  it('appends 25 messages with one read, one batch for the index and one PutItem, no transaction', async () => {
    const messages = Array.from({ length: 25 }, (_, index) => ({ role: 'user', text: `m${index}` }));

    const requests = await count(() => service.appendMessages(scope, { messages }));

    // The batch puts the index of the nodes the last change made (the head's append before),
    // beside the tip read: this process made that change (log-writer.ts, `writeAhead`).
    expect(requests).toEqual(['BatchWriteItem', 'Query', 'PutItem']);
  });

  it('writes state with one PutItem however long ago the last write was: activity is the change hook’s', async () => {
    // Prepare: a clock an hour ahead of the last write.
    const idle = { tenant: 'budget', sessionId: 'idle' };
    await service.patchState(idle, { first: true });
    const later = new SessionService(stores.sessions, { now: () => new Date(Date.now() + 60 * 60 * 1000) });

    // Act
    const requests = await count(() => later.patchState(idle, { anHourLater: true }));

    // Assess
    expect(requests).toEqual(['Query', 'PutItem']);
  });

  it('commits thread keys alone with one read and one PutItem, and documents in one transaction', async () => {
    // Prepare
    const commits = new CommitService(stores);
    const session = { tenant: 'budget', sessionId: 'commits' };
    await commits.commit(session, { commands: [{ key: 'first', scope: 'thread', merge: 'disjoint', set: true }] });

    // Act
    const threadOnly = await count(() =>
      commits.commit(session, { commands: [{ key: 'n', scope: 'thread', merge: 'commutative', set: { a: 1 } }] }),
    );
    const withRun = await count(() =>
      commits.commit(session, {
        runId: 'r1',
        commands: [
          { key: 'n', scope: 'thread', merge: 'commutative', set: { b: 2 } },
          { key: 'step', scope: 'run', merge: 'disjoint', set: 1 },
        ],
      }),
    );

    // Assess
    expect(threadOnly).toEqual(['Query', 'PutItem']);
    expect(writes(withRun)).toEqual(['TransactWriteItems']);
  });

  it('appends under the root of a session with nothing written without reading a node item', async () => {
    // Prepare: a session whose head is the root, and the same with the root named as parent.
    const fresh = { tenant: 'budget', sessionId: 'root-head' };
    const named = { tenant: 'budget', sessionId: 'root-named' };

    // Act
    const atHead = await count(() => service.appendMessages(fresh, { messages: [{ role: 'user', content: 'hello' }] }));
    const underRoot = await count(() =>
      service.appendMessages(named, { parentId: 'root', messages: [{ role: 'user', content: 'hello' }] }),
    );

    // Assess: the tip, then the first change, whose transaction proves the session item absent
    // (append-change.ts): the root is no item of its own, so nothing reads it.
    for (const requests of [atHead, underRoot]) {
      expect(requests.filter((name) => name === 'GetItem' || name === 'BatchGetItem')).toEqual([]);
      expect(requests.filter((name) => name === 'Query')).toEqual(['Query']);
    }
  });

  it('appends under the head it names with a state (LangGraph’s put) reading the tip and the new id in one round', async () => {
    // Prepare: a checkpoint appended with its state, then a write at it while it is the head
    // (LangGraph's putWrites), as a graph's step leaves a thread.
    const thread = { tenant: 'budget', sessionId: 'named-head' };
    const whole = (step: number) => ({ replace: true as const, value: { step, notes: 'x'.repeat(900) } });
    await service.appendMessages(thread, { messages: [{ id: 'c1', role: 'checkpoint' }], state: whole(1) });
    await service.patchState(thread, { writes: { task: 1 } }, { node: 'c1' });

    // Act: the next checkpoint under the one it names, which is the head.
    const put = await cost(() =>
      service.appendMessages(thread, { parentId: 'c1', messages: [{ id: 'c2', role: 'checkpoint' }], state: whole(2) }),
    );

    // Assess: the tip and the new id by key in one request, as this process made the change
    // before (the head is the tip's to tell, so its index is not read), the pointer the head's
    // write moved (it leaves the head), the change.
    expect(put.requests).toEqual(['BatchGetItem', 'UpdateItem', 'PutItem']);
    expect(put.rounds).toBe(3);
    expect(put.writeUnits).toBeLessThanOrEqual(3);
    expect((await service.readState(thread, {})).state).toEqual({ step: 2, notes: 'x'.repeat(900) });
    expect((await service.readState(thread, { node: 'c1' })).state).toEqual({ step: 1, notes: 'x'.repeat(900), writes: { task: 1 } });
  });

  it('puts LangGraph checkpoints in a line in three requests, two rounds and two write units, three rounds from another process', async () => {
    // Prepare: two checkpoints in a line, each appended with its whole state under the one before.
    const thread = { tenant: 'budget', sessionId: 'checkpoints' };
    const whole = (step: number) => ({ replace: true as const, value: { step, notes: 'x'.repeat(700) } });
    await service.appendMessages(thread, { messages: [{ id: 'k1', role: 'checkpoint' }], state: whole(1) });
    await service.appendMessages(thread, { parentId: 'k1', messages: [{ id: 'k2', role: 'checkpoint' }], state: whole(2) });
    const elsewhere = new SessionService(createStores(counted, tableName).sessions, { headState });

    // Act: the next checkpoint from this process, then one from another process.
    const here = await cost(() =>
      service.appendMessages(thread, { parentId: 'k2', messages: [{ id: 'k3', role: 'checkpoint' }], state: whole(3) }),
    );
    const there = await cost(() =>
      elsewhere.appendMessages(thread, { parentId: 'k3', messages: [{ id: 'k4', role: 'checkpoint' }], state: whole(4) }),
    );

    // Assess: here, k2's index (it leaves the tip) beside the keys of k2's change, of the place
    // after it and of k3's index; then the change. There, nothing is known: the tip beside k4's
    // keys, then k3's index, then the change.
    expect(here.requests).toEqual(['BatchWriteItem', 'BatchGetItem', 'PutItem']);
    expect(here.rounds).toBe(2);
    expect(here.writeUnits).toBeLessThanOrEqual(2);
    expect(there.requests).toEqual(['Query', 'Query', 'BatchWriteItem', 'PutItem']);
    expect(there.rounds).toBe(3);
    expect(there.writeUnits).toBeLessThanOrEqual(2);
    for (const [node, step] of [
      ['k2', 2],
      ['k3', 3],
      ['k4', 4],
    ] as const) {
      expect((await elsewhere.readState(thread, { node })).state).toEqual({ step, notes: 'x'.repeat(700) });
    }
  });

  it('appends under a parent it names that is not the head reading that parent after the tip', async () => {
    // Prepare: two checkpoints in a line; the head is the second.
    const thread = { tenant: 'budget', sessionId: 'named-parent' };
    await service.appendMessages(thread, { messages: [{ id: 'p1', role: 'checkpoint' }], state: { replace: true, value: { at: 1 } } });
    await service.appendMessages(thread, {
      parentId: 'p1',
      messages: [{ id: 'p2', role: 'checkpoint' }],
      state: { replace: true, value: { at: 2 } },
    });
    await service.patchState(thread, { settled: true });

    // Act: a fork under the first.
    const fork = await cost(() =>
      service.appendMessages(thread, {
        parentId: 'p1',
        messages: [{ id: 'f1', role: 'checkpoint' }],
        state: { value: { fork: true }, replace: false },
      }),
    );

    // Assess: the tip and the new id by key (this process made the change before), then the
    // parent's keys (a node read beside the tip could miss a change landing between the reads),
    // the parent's version (the patch applies to it), the pointer the head's write moved (the
    // head leaves it), the change.
    expect(fork.requests).toEqual(['BatchGetItem', 'Query', 'Query', 'UpdateItem', 'PutItem']);
    expect(fork.rounds).toBe(5);
    expect((await service.readState(thread, { node: 'f1' })).state).toEqual({ at: 1, fork: true });
  });

  it('appends with a state as the first write of a session made by POST /v1/sessions in three rounds, and no transaction refused', async () => {
    // Prepare: sessions made and never written (a thread's first checkpoint goes under the
    // root): one with an agent, one with metadata too (its own item, SM: session-item.ts).
    const made = { tenant: 'budget', sessionId: 'first-checkpoint' };
    const withMetadata = { tenant: 'budget', sessionId: 'first-checkpoint-metadata' };
    await service.createSession('budget', { sessionId: made.sessionId, agentId: 'made-with' });
    await service.createSession('budget', { sessionId: withMetadata.sessionId, agentId: 'made-with', metadata: { topic: 'billing' } });
    const put = (scope: typeof made) =>
      service.appendMessages(scope, { parentId: 'root', messages: [{ role: 'checkpoint' }], state: { replace: true, value: { step: 0 } } });

    // Act
    const measured = await cost(() => put(made));
    const measuredWithMetadata = await cost(() => put(withMetadata));

    // Assess: the tip, whose read finds the session item below the empty log (append-change.ts);
    // the session item (its agent, user and lifetime, for the append and for the state it carries
    // alike; with its metadata, one Query); the first change. A transaction sent as for no item
    // would be refused by it and billed as written: between f01cfe3 and this test, it was sent
    // ('Query', 'TransactWriteItems', 'TransactWriteItems'; one more Query with the metadata).
    for (const { requests, rounds } of [measured, measuredWithMetadata]) {
      expect(requests).toEqual(['Query', 'Query', 'TransactWriteItems']);
      expect(rounds).toBe(3);
    }
    for (const scope of [made, withMetadata]) {
      expect((await service.readState(scope, {})).state).toEqual({ step: 0 });
      expect((await stores.sessions.readTip(scope, { withState: false })).agentId).toBe('made-with');
    }
    expect((await service.getSession(withMetadata)).metadata).toEqual({ topic: 'billing' });
  });

  it("creates a session with its first append (LangGraph's first put) in two rounds: the tip beside the new id, then the change", async () => {
    // Prepare: a thread never written; and one whose item another request makes between the
    // append's tip read and its change (a POST /v1/sessions racing it).
    const thread = { tenant: 'budget', sessionId: 'first-put' };
    const raced = { tenant: 'budget', sessionId: 'first-put-raced' };
    const put = (scope: typeof thread) =>
      service.appendMessages(scope, {
        parentId: 'root',
        messages: [{ id: `${scope.sessionId}-c1`, role: 'checkpoint' }],
        state: { replace: true, value: { step: 1 } },
      });

    // Act
    const measured = await cost(() => put(thread));
    beforeNextTransact = () => service.createSession('budget', { sessionId: raced.sessionId, agentId: 'racer', userId: 'u-racer' });
    const racedAnswer = await put(raced);

    // Assess: the tip and the new id's index beside it, then the transaction that creates the
    // session. Before append-change.ts the session item was read between them: three rounds.
    expect(measured.requests).toEqual(['Query', 'Query', 'TransactWriteItems']);
    expect(measured.rounds).toBe(2);
    const session = await service.getSession(thread);
    expect(session).toMatchObject({ sessionId: thread.sessionId, agentId: null, userId: null, metadata: null, head: 'first-put-c1' });
    expect((await service.readState(thread, {})).state).toEqual({ step: 1 });
    expect((await service.listSessions('budget', { limit: 100 })).items.map((item) => item.sessionId)).toContain(thread.sessionId);
    // The item made in between is the session's: its transaction, made as for none, is refused,
    // and the append is made again from that item (the tip carries its agent and user).
    expect(racedAnswer).toMatchObject({ head: 'first-put-raced-c1', version: 1, changed: true });
    const racedTip = await stores.sessions.readTip(raced, { withState: false });
    expect([racedTip.agentId, racedTip.userId]).toEqual(['racer', 'u-racer']);
    expect((await service.readState(raced, {})).state).toEqual({ step: 1 });
  });

  it("commits a user's first profile in a transaction that checks the session item names the user, and the next in one keyed update", async () => {
    // Prepare: a session of a user, never written; the user has no profile.
    const commits = new CommitService(stores);
    const session = { tenant: 'budget', sessionId: 'profile-first' };
    await service.createSession('budget', { sessionId: session.sessionId, userId: 'ada' });
    const command = (tz: string) => ({ commands: [{ key: 'tz', scope: 'profile', merge: 'disjoint', set: tz }] as never });

    // Act
    const first = await count(() => commits.commit(session, command('Europe/London')));
    const next = await count(() => commits.commit(session, command('Europe/Paris')));

    // Assess: the first, the tip, the session item (its user and agent, read once for both),
    // the profile (none, no fence), and the transaction that puts it with a fence, on the
    // condition that the session item still names the user (an erasure done meanwhile leaves
    // none: commit-service.ts). The next, the same reads, the session item again (still the
    // user's after the profile and its fence were read), one keyed update (no transaction). The
    // session item is read with its metadata, in one Query (session-read.ts).
    expect(first).toEqual(['Query', 'Query', 'GetItem', 'TransactWriteItems']);
    expect(next).toEqual(['Query', 'Query', 'GetItem', 'Query', 'UpdateItem']);
  });

  it('answers a write at an unknown node of a session with nothing written from the tip read alone', async () => {
    // Prepare: a session made, never written; and no session at all.
    const made = { tenant: 'budget', sessionId: 'unknown-node' };
    await service.createSession('budget', { sessionId: made.sessionId });
    const missing = { tenant: 'budget', sessionId: 'no-such-session' };

    for (const scope of [made, missing]) {
      // Act
      let code: unknown;
      const requests = await count(() =>
        service.patchState(scope, { a: 1 }, { node: 'nope' }).catch((error: { code?: unknown }) => {
          code = error.code;
        }),
      );

      // Assess: the tip (a write's first look is at a replica, whose empty answer is read again
      // consistently) and the node's keys; no session item, nothing written.
      expect(code).toBe('node_not_found');
      expect(requests, requests.join(', ')).toEqual(['Query', 'Query', 'Query']);
    }
  });

  it('queues a blind write behind a writer that lost a race a moment ago: one more tip read, then its put', async () => {
    // Prepare: a write that loses its race to another writer's, landed between its read and its put.
    const crowded = { tenant: 'budget', sessionId: 'crowded' };
    await service.patchState(crowded, { start: true });
    const other = new SessionService(createStores(dynamoDbClient({ AGENTSTATE_DYNAMODB_ENDPOINT: dynamoEndpoint() }), tableName).sessions);
    beforeNextPut = () => other.patchState(crowded, { other: 1 });
    await service.patchState(crowded, { raced: 1 });

    // Act: the next blind write, then the one after it.
    const queued = await count(() => service.patchState(crowded, { next: 1 }));
    const after = await count(() => service.patchState(crowded, { after: 1 }));

    // Assess: the first waits its turn (it reads the tip again after waiting); the crowd is
    // gone once a writer wins at its first try, so the one after it goes straight in.
    expect(queued).toEqual(['Query', 'Query', 'PutItem']);
    expect(after).toEqual(['Query', 'PutItem']);
    expect((await service.readState(crowded, {})).state).toEqual({ start: true, other: 1, raced: 1, next: 1, after: 1 });
  });

  it("deletes a session in its own time with the erase's requests alone, and leaves nothing due", async () => {
    const doomed = { tenant: 'budget', sessionId: 'deleted' };
    await service.appendMessages(doomed, { messages: [{ id: 'd1', role: 'user', content: 'hi' }] });
    await service.patchState(doomed, { n: 1 });

    const spent = await cost(() => stores.sessions.deleteSession(doomed));
    const left = await stores.table.send(
      new QueryCommand({
        TableName: tableName,
        KeyConditionExpression: 'pk = :pk',
        ExpressionAttributeValues: { ':pk': keys.session(doomed) },
        ConsistentRead: true,
      }),
    );

    // The tip and the item; the fence; the item, the page, its tombstones and its deletes; the
    // fence closed. The fence carries its entry of the retention sweep's index while it is held
    // (in case its eraser dies), so it costs an index write when put and one when closed: 2 of
    // the 9 units, no request. Nothing is left due.
    expect(spent.requests).toEqual([
      'Query',
      'GetItem',
      'PutItem',
      'DeleteItem',
      'Query',
      'BatchWriteItem',
      'BatchWriteItem',
      'UpdateItem',
    ]);
    expect(spent.writeUnits).toBe(9);
    expect((left.Items ?? []).filter((item) => item[tableKeys.pruneDueIndex.sortKey] !== undefined)).toEqual([]);
    expect((left.Items ?? []).filter((item) => item.fence !== undefined).map((item) => item.fence)).toEqual(['closed']);
  });

  it('creates the session with its first write, in one transaction', async () => {
    const requests = await count(() => service.patchState({ tenant: 'budget', sessionId: 'first-write' }, { first: true }));

    expect(writes(requests)).toEqual(['TransactWriteItems']);
  });
});

describe('a copy (POST …/copy)', () => {
  it("opens with its last append, whose index it leaves owed to the copy's next write as the source's last append's is", async () => {
    // Prepare: a source of 100 short messages in two appends, and a copier as the tree function wires it.
    const source = { tenant: 'budget', sessionId: 'copy-source' };
    for (let turn = 0; turn < 2; turn++) {
      const messages = Array.from({ length: 50 }, (_, n) => ({ id: `c${turn}-${n}`, role: 'user', text: `message ${n}` }));
      await service.appendMessages(source, { messages });
    }
    const store = stores.sessions;
    const copier = new SessionCopier({
      tree: service,
      readVersion: (scope, version) => store.getVersion(scope, version),
      storedStates: (scope, versions) => store.storedStates(scope, versions),
      agents: async () => [],
      open: (scope) => store.openCopy(scope),
    });
    const copy = { tenant: 'budget', sessionId: 'copy-target' };

    // Act: copy it, read a node of the copy's last append, and append to the copy and to the source.
    const copying = await cost(() => copier.copy(source, { sessionId: copy.sessionId }));
    const node = await service.getNode(copy, 'c1-49');
    const nextOfCopy = await count(() => service.appendMessages(copy, { messages: [{ role: 'user', text: 'after the copy' }] }));
    const nextOfSource = await count(() => service.appendMessages(source, { messages: [{ role: 'user', text: 'after the source' }] }));

    // Assess: the session made, the first append (the life's first change, in a transaction
    // that checks the copy's session item), the index the first append owes (two batches of
    // 25), and the last append in the transaction that opens the copy: no change of its own
    // after it, which paid the last append's index (50 write units, two batches more) before.
    expect(writes(copying.requests)).toEqual(['PutItem', 'TransactWriteItems', 'BatchWriteItem', 'BatchWriteItem', 'TransactWriteItems']);
    // The last append's nodes are read from the tip until a write indexes them, which the next one does, as the source's.
    expect(node).toMatchObject({ id: 'c1-49', parentId: 'c1-48', depth: 100 });
    expect(writes(nextOfCopy)).toEqual(writes(nextOfSource));
    expect(writes(nextOfCopy).filter((name) => name === 'BatchWriteItem')).toHaveLength(2);
  });
});

describe('a 4 MiB state', () => {
  const scope = { tenant: 'budget', sessionId: 'large' };
  const entry = (n: number) => ({ id: `e${n}`, text: `${n} ${'what the agent saw and said '.repeat(40)}`.slice(0, 1000) });

  it('takes a 1 KB change in three requests and no piece: the tip, its pieces and splices, the version', async () => {
    // Prepare: a 4 MiB state (its pieces put once) and one change on it.
    const log = Array.from({ length: 4000 }, (_, n) => entry(n));
    await service.replaceState(scope, { log });
    await service.jsonPatchState(scope, parseJsonPatch([{ op: 'add', path: '/log/-', value: entry(-1) }]));

    // Act
    const append = await count(() => service.jsonPatchState(scope, parseJsonPatch([{ op: 'add', path: '/log/-', value: entry(-2) }])));
    const merge = await count(() => service.patchState(scope, { note: entry(-3) }));
    const read = await count(() => service.readState(scope, {}));

    // Assess
    expect(append).toEqual(['Query', 'BatchGetItem', 'PutItem']);
    expect(merge).toEqual(['Query', 'BatchGetItem', 'PutItem']);
    expect(read).toEqual(['Query', 'BatchGetItem']);
    expect((await service.readState(scope, {})).state).toMatchObject({ note: entry(-3) });
  });
});

describe('cost stays flat with depth and history', () => {
  it('costs the same at depth 300 and 3000 versions as on a fresh session', async () => {
    // Prepare: a deep chain with a long history.
    const deep = { tenant: 'budget', sessionId: 'deep' };
    for (let batch = 0; batch < 12; batch++) {
      const messages = Array.from({ length: 25 }, (_, index) => ({ id: `d${batch * 25 + index}`, role: 'user' }));
      await service.appendMessages(deep, { messages });
      for (let write = 0; write < 25; write++) await service.patchState(deep, { batch, write });
    }
    const fresh = { tenant: 'budget', sessionId: 'fresh' };
    await service.appendMessages(fresh, {
      messages: [
        { id: 'd0', role: 'user' },
        { id: 'd1', role: 'user' },
      ],
    });
    await service.patchState(fresh, { a: 1 });

    // Act
    const deepHead = await count(() => service.readState(deep, {}));
    const freshHead = await count(() => service.readState(fresh, {}));
    const deepNode = await count(() => service.readState(deep, { node: 'd1' }));
    const freshNode = await count(() => service.readState(fresh, { node: 'd0' }));
    const deepWrite = await count(() => service.patchState(deep, { last: true }));
    const freshWrite = await count(() => service.patchState(fresh, { last: true }));

    // Assess
    expect(deepHead).toEqual(freshHead);
    expect(deepNode).toEqual(freshNode);
    expect(deepWrite).toEqual(freshWrite);
  }, 120_000);
});

describe('decide', () => {
  it('stays within its budget: at most 5 requests besides the worker call', async () => {
    // Prepare: an agent with an in-process worker, and a session of it with some history.
    const { dependenciesFor } = await import('../../functions/http/dependencies.js');
    const deps = dependenciesFor(stores, {
      invokeWorker: async (_worker, body) => {
        const request = JSON.parse(body) as { state: { turns?: number } | null };
        return { state: { turns: (request.state?.turns ?? 0) + 1 } };
      },
    });
    const decided = { tenant: 'budget', sessionId: 'decided' };
    await deps.agents.putAgent('budget', 'counter', { worker: { url: 'module:examples/worker.ts' }, config: { model: 'm' } });
    await deps.sessions.createSession('budget', { sessionId: decided.sessionId, agentId: 'counter' });
    await deps.decide.decide(decided, { trigger: { type: 'warm-up' } });

    // Act
    const requests = await count(() => deps.decide.decide(decided, { trigger: { type: 'tick' } }));

    // Assess: the agents with the shared document (one Query), the tip (with the newest
    // changes: the path), the lease, one commit; the lease and the commit are single PutItems
    // in the session's log.
    expect(requests.length, requests.join(', ')).toBeLessThanOrEqual(5);
    expect(writes(requests)).toEqual(['PutItem', 'PutItem']);
  });
});

describe('what a decision keeps', () => {
  it("bills the worker's state once: the commit of a 3 KB answered state costs the state's units plus one, and replays it", async () => {
    // Prepare: a worker that answers an incompressible 3 KB state and a short reply.
    const { dependenciesFor } = await import('../../functions/http/dependencies.js');
    const { randomBytes } = await import('node:crypto');
    const notes = randomBytes(2304).toString('base64');
    const deps = dependenciesFor(stores, {
      invokeWorker: async (_worker, body) => {
        const request = JSON.parse(body) as { state: { turns?: number } | null };
        return { state: { turns: (request.state?.turns ?? 0) + 1, notes }, messages: [{ role: 'assistant', content: 'ok' }] };
      },
    });
    const scope = { tenant: 'budget', sessionId: 'kept-once' };
    await deps.agents.putAgent('budget', 'noter', { worker: { url: 'module:examples/worker.ts' }, config: { model: 'm' } });
    await deps.sessions.createSession('budget', { sessionId: scope.sessionId, agentId: 'noter' });
    await deps.decide.decide(scope, { trigger: { type: 'warm-up' } });
    const trigger = { type: 'client.messages', messages: [{ role: 'user', content: 'note this' }] };

    // Act
    let first: Awaited<ReturnType<typeof deps.decide.decide>> | undefined;
    const measured = await cost(async () => {
      first = await deps.decide.decide(scope, { decisionId: 'kept-once-1', trigger });
    });
    const replayed = await deps.decide.decide(scope, { decisionId: 'kept-once-1', trigger });

    // Assess: the index of the last turn's reply (1 unit), the lease (1) and the commit, which
    // holds the 3 KB state once (3 units) and the rest in one more; keeping the worker's state
    // beside it cost 3 more.
    expect(writes(measured.requests)).toEqual(['BatchWriteItem', 'PutItem', 'PutItem']);
    expect(measured.writeUnits).toBeLessThanOrEqual(6);
    expect(first).toMatchObject({ decisionId: 'kept-once-1', state: { turns: 2, notes } });
    expect(replayed).toEqual(first);
    expect(replayed.decision).toEqual({ state: { turns: 2, notes }, messages: [{ role: 'assistant', content: 'ok' }] });
  });
});

describe('what a decision keeps: its reply', () => {
  it('stores a reply once, as its node: the commit of a 2 KB reply costs its units plus one, and replays it', async () => {
    // Prepare: a worker that replies with an incompressible 2 KB message, and one with an id of its own.
    const { dependenciesFor } = await import('../../functions/http/dependencies.js');
    const { randomBytes } = await import('node:crypto');
    const content = randomBytes(1536).toString('base64');
    let ownId = false;
    const deps = dependenciesFor(stores, {
      invokeWorker: async () => ({
        messages: [{ role: 'assistant', content, ...(ownId ? { id: 'reply-with-its-id' } : {}), meta: { n: 1 } }],
      }),
    });
    const scope = { tenant: 'budget', sessionId: 'reply-once' };
    await deps.agents.putAgent('budget', 'replier', { worker: { url: 'module:examples/worker.ts' }, config: { model: 'm' } });
    await deps.sessions.createSession('budget', { sessionId: scope.sessionId, agentId: 'replier' });
    await deps.decide.decide(scope, { trigger: { type: 'warm-up' } });
    const trigger = { type: 'client.messages', messages: [{ role: 'user', content: 'tell me' }] };

    // Act
    let first: Awaited<ReturnType<typeof deps.decide.decide>> | undefined;
    const measured = await cost(async () => {
      first = await deps.decide.decide(scope, { decisionId: 'reply-once-1', trigger });
    });
    const replayed = await deps.decide.decide(scope, { decisionId: 'reply-once-1', trigger });
    ownId = true;
    await deps.decide.decide(scope, { decisionId: 'reply-once-2', trigger });
    const replayedWithId = await deps.decide.decide(scope, { decisionId: 'reply-once-2', trigger });

    // Assess: the index of the warm-up's reply (1 unit), the lease (1) and the commit: the 2 KB
    // reply (2 units) and the rest (1); keeping the reply in the answer as well cost 2 more.
    expect(writes(measured.requests)).toEqual(['BatchWriteItem', 'PutItem', 'PutItem']);
    expect(measured.writeUnits).toBeLessThanOrEqual(5);
    expect(first?.decision).toEqual({ messages: [{ role: 'assistant', content, meta: { n: 1 } }] });
    expect(replayed).toEqual(first);
    expect(replayedWithId.decision).toEqual({ messages: [{ role: 'assistant', content, id: 'reply-with-its-id', meta: { n: 1 } }] });
  });
});

describe('conversations at scale (issue 20): cost at message 10 and at message 1,000', () => {
  /** A session whose head is at `depth`, in appends of `perAppend` messages (one change each). */
  async function conversation(sessionId: string, depth: number, agentId?: string, tenant = 'budget', perAppend = 25) {
    const scope = { tenant, sessionId };
    if (agentId) await service.createSession(tenant, { sessionId, agentId });
    for (let made = 0; made < depth; made += perAppend) {
      const messages = Array.from({ length: Math.min(perAppend, depth - made) }, (_, index) => ({
        id: `${sessionId}-${made + index}`,
        role: 'user',
        content: `message ${made + index}`,
      }));
      await service.appendMessages(scope, { messages });
    }
    return scope;
  }
  const one = (n: number) => ({ messages: [{ role: 'user', content: `a short message ${n}` }] });
  /** A client's message of a turn. */
  const turn = (n: number) => ({ trigger: { type: 'client.messages', messages: [{ role: 'user', content: `question ${n}` }] } });
  /**
   * What a decision costs when its instance reads the registry (the first of a second: core/
   * kernel/tenant-cache.ts), the most it reads: the budgets below hold for that one.
   */
  const registryDue = <T>(tenant: string, decision: () => Promise<T>) => {
    invalidateTenant('registry', tenant);
    return decision();
  };
  /** The services with an in-process worker that counts turns, tells how many messages it saw, and replies. */
  async function replyingWorker() {
    const { dependenciesFor } = await import('../../functions/http/dependencies.js');
    return dependenciesFor(stores, {
      invokeWorker: async (_worker, body) => {
        const request = JSON.parse(body) as { state: { turns?: number } | null; messages: unknown[] };
        return {
          state: { turns: (request.state?.turns ?? 0) + 1, seen: request.messages.length },
          messages: [{ role: 'assistant', content: 'ok' }],
        };
      },
    });
  }

  it('appends one short message with three requests and at most two write units, at any depth', async () => {
    // Prepare
    const shallow = await conversation('append-10', 10);
    const deep = await conversation('append-1000', 1000);
    await service.appendMessages(shallow, one(0));
    await service.appendMessages(deep, one(0));

    // Act
    const atTen = await cost(() => service.appendMessages(shallow, one(1)));
    const atThousand = await cost(() => service.appendMessages(deep, one(1)));

    // Assess: the index of the message before (it leaves the tip) beside the tip read, as this
    // process made that change; the new change.
    for (const measured of [atTen, atThousand]) {
      expect(measured.requests).toEqual(['BatchWriteItem', 'Query', 'PutItem']);
      expect(measured.rounds).toBe(2);
      expect(measured.writeUnits).toBeLessThanOrEqual(2);
    }
  });

  it('appends 25 messages with at most 30 write units: one per message, no doubling', async () => {
    const scope = await conversation('append-25s', 50);
    const messages = Array.from({ length: 25 }, (_, index) => ({ role: 'assistant', content: `message ${index}: ${'words '.repeat(12)}` }));

    const measured = await cost(() => service.appendMessages(scope, { messages }));

    expect(measured.requests).toEqual(['BatchWriteItem', 'Query', 'PutItem']);
    expect(measured.writeUnits).toBeLessThanOrEqual(30);
  });

  it('reads the path at depth 1,000 in at most three sequential rounds, and a short one in one round', async () => {
    const deep = await conversation('path-1000', 1000);
    const short = await conversation('path-10', 10);

    const longPath = await cost(() => service.getPath(deep));
    const shortPath = await cost(() => service.getPath(short));
    const path = await service.getPath(deep);

    expect(longPath.rounds).toBeLessThanOrEqual(3);
    // The newest change's key, consistently, beside the newest changes from a replica.
    expect(shortPath.requests).toEqual(['Query', 'Query']);
    expect(shortPath.rounds).toBe(1);
    expect(shortPath.readUnits).toBeLessThanOrEqual(1.5);
    expect(path.ancestry).toHaveLength(1001);
    expect(path.messages.at(-1)).toMatchObject({ content: 'message 999' });
  }, 60_000);

  it('holds a turn to five requests and six write units at depth 10 and 600 alike (worker shown its last 20 messages)', async () => {
    // Prepare: an agent whose worker replies and counts, shown the last 20 messages.
    const deps = await replyingWorker();
    await deps.agents.putAgent('budget', 'turns', { worker: { url: 'module:examples/worker.ts', messages: { last: 20 } } });
    const shallow = await conversation('turn-10', 10, 'turns');
    const deep = await conversation('turn-600', 600, 'turns');
    for (const scope of [shallow, deep]) for (let n = 0; n < 2; n++) await deps.decide.decide(scope, turn(n));

    // Act
    const atTen = await cost(() => registryDue('budget', () => deps.decide.decide(shallow, turn(9))));
    const atSixHundred = await cost(() => registryDue('budget', () => deps.decide.decide(deep, turn(9))));

    // Assess: the agents with the shared document; the index of the last turn's two messages
    // (this process made that change, so it goes beside the tip read), the tip with the newest
    // changes (the path's end); the lease; the commit.
    expect(atTen.requests).toEqual(['Query', 'BatchWriteItem', 'Query', 'PutItem', 'PutItem']);
    expect(atTen.writeUnits).toBeLessThanOrEqual(6);
    expect(atSixHundred.requests).toEqual(atTen.requests);
    expect(atSixHundred.writeUnits).toBeLessThanOrEqual(6);
    expect(await service.readState(deep, {})).toMatchObject({ state: { seen: 20 } });
  }, 60_000);

  it('shows the worker the whole path (worker.messages "all") in five requests at depth 10 and 10,000 alike', async () => {
    // Prepare: a tenant whose agent shows its worker every message (the default), on a short
    // and a long conversation.
    const deps = await replyingWorker();
    await deps.agents.putAgent('everything', 'all-turns', { worker: { url: 'module:examples/worker.ts' } });
    const shallow = await conversation('all-10', 10, 'all-turns', 'everything');
    // 200 changes of 50 messages (the most an append takes): far past the 48 newest changes,
    // within one page of the log.
    const deep = await conversation('all-10000', 10_000, 'all-turns', 'everything', 50);
    for (const scope of [shallow, deep]) for (let n = 0; n < 2; n++) await deps.decide.decide(scope, turn(n));

    // Act
    const atTen = await cost(() => registryDue('everything', () => deps.decide.decide(shallow, turn(9))));
    const atDeep = await cost(() => registryDue('everything', () => deps.decide.decide(deep, turn(9))));

    // Assess: the agents with the shared document (one Query, which says the worker is shown
    // everything), the index of the last turn's messages beside the tip with a page of the log
    // (the whole path, at 10 and at 10,000), the lease, the commit: five requests at either depth.
    expect(atTen.requests).toEqual(['Query', 'BatchWriteItem', 'Query', 'PutItem', 'PutItem']);
    expect(atDeep.requests).toEqual(atTen.requests);
    expect(atTen.writeUnits).toBeLessThanOrEqual(6);
    expect(atDeep.writeUnits).toBeLessThanOrEqual(6);
    expect(await service.readState(deep, {})).toMatchObject({ state: { seen: 10_005 } });
    expect(await service.readState(shallow, {})).toMatchObject({ state: { seen: 15 } });
  }, 120_000);

  it('does not read a page of versions piled after the path for a decision without messages', async () => {
    // Prepare: ten messages, then 300 state writes (a loop of ticks, a tool updating state).
    const deps = await replyingWorker();
    await deps.agents.putAgent('everything', 'all-turns', { worker: { url: 'module:examples/worker.ts' } });
    const scope = await conversation('piled-up', 10, 'all-turns', 'everything');
    for (let n = 0; n < 300; n++) await service.patchState(scope, { n, note: `tick ${n} `.repeat(40) });
    const tick = { trigger: { type: 'tick' } };

    // Act: a decision without messages, then a turn of the conversation on the same log.
    const ticked = await cost(() => registryDue('everything', () => deps.decide.decide(scope, tick)));
    const turned = await cost(() => registryDue('everything', () => deps.decide.decide(scope, turn(1))));

    // Assess: the tick reads the 48 newest changes and the path's range (six requests, few
    // units); the turn reads a page of the log, the versions included (five requests). Both
    // show the worker the whole path: the turn sees the ten, the tick's reply and its question.
    expect(ticked.requests.filter((name) => name === 'Query')).toHaveLength(3);
    expect(turned.requests.filter((name) => name === 'Query')).toHaveLength(2);
    expect(ticked.readUnits * 3).toBeLessThan(turned.readUnits);
    expect(await service.readState(scope, {})).toMatchObject({ state: { seen: 12 } });
  }, 120_000);

  it('keeps five requests at depth when the request names an agent that shows everything, in a tenant whose agents differ', async () => {
    // Prepare: tenant "budget" also has an agent shown only its last 20 messages (above).
    const deps = await replyingWorker();
    await deps.agents.putAgent('budget', 'turns', { worker: { url: 'module:examples/worker.ts', messages: { last: 20 } } });
    await deps.agents.putAgent('budget', 'all-turns', { worker: { url: 'module:examples/worker.ts' } });
    const deep = await conversation('named-1500', 1500, 'all-turns');
    const unnamed = await conversation('unnamed-1500', 1500, 'all-turns');
    const named = (n: number) => ({ ...turn(n), agentId: 'all-turns' });
    for (let n = 0; n < 2; n++) await deps.decide.decide(deep, named(n));
    for (let n = 0; n < 2; n++) await deps.decide.decide(unnamed, turn(n));

    // Act
    const atDeep = await cost(() => registryDue('budget', () => deps.decide.decide(deep, named(9))));
    const withoutName = await cost(() => registryDue('budget', () => deps.decide.decide(unnamed, turn(9))));

    // Assess: named, the agent says "all" before the tip is read: a page, five requests. Not
    // named, the session's agent is known only from the tip, and the tenant has an agent shown
    // its last messages: the 48 newest changes, then the path's older part in one range read.
    expect(atDeep.requests).toEqual(['Query', 'BatchWriteItem', 'Query', 'PutItem', 'PutItem']);
    expect([...withoutName.requests].sort()).toEqual([...atDeep.requests, 'Query'].sort());
    expect(await service.readState(deep, {})).toMatchObject({ state: { seen: 1505 } });
    expect(await service.readState(unnamed, {})).toMatchObject({ state: { seen: 1505 } });
  }, 120_000);
});

describe("what a chat turn's log takes (issue 33: reads cost what they return)", () => {
  it('writes a turn of two short messages as four changes under 2 KB, each keyed answer in at most 64 bytes', async () => {
    // Prepare: a chat turn as a client sends it, each write with an Idempotency-Key: the user's
    // message, a decision with one reply and a state, a small PATCH.
    const { dependenciesFor, useDependencies } = await import('../../functions/http/dependencies.js');
    const { keysFromEnv } = await import('../../functions/http/edge/auth.js');
    const { handlers } = await import('../../functions/http/index.js');
    const { invoke } = await import('../../bench/invoke.js');
    const { itemSize } = await import('../../bench/capacity-rules.js');
    const { DynamoDBClient, QueryCommand } = await import('@aws-sdk/client-dynamodb');
    useDependencies(
      dependenciesFor(stores, {
        resolveKey: keysFromEnv('budget:budget-key'),
        invokeWorker: async (_worker, body) => {
          const { state } = JSON.parse(body) as { state: { turns?: number } | null };
          const turns = (state?.turns ?? 0) + 1;
          return { state: { ...state, turns }, messages: [{ role: 'assistant', content: `answer ${turns}: ${'a few words '.repeat(6)}` }] };
        },
      }),
    );
    const headers = () => ({
      authorization: 'Bearer budget-key',
      'content-type': 'application/json',
      'idempotency-key': crypto.randomUUID(),
    });
    const path = '/v1/sessions/chat-log';
    const send = async (method: string, url: string, body: unknown) => {
      const response = await invoke(handlers, { method, url, headers: headers(), body: JSON.stringify(body) });
      expect(response.status, response.text).toBeLessThan(300);
    };
    await send('PUT', '/v1/agents/chatter', { worker: { url: 'module:examples/worker.ts' }, config: { model: 'fast' } });
    await send('POST', '/v1/sessions', { sessionId: 'chat-log', agentId: 'chatter', userId: 'chat-user' });
    const turn = async (n: number) => {
      await send('POST', `${path}/messages`, { messages: [{ role: 'user', content: `question ${n}: ${'some words '.repeat(6)}` }] });
      await send('POST', `${path}/decide`, { agentId: 'chatter', trigger: { type: 'user.turn', turn: n } });
      await send('PATCH', `${path}/state`, { lastTurn: n });
    };
    const raw = new DynamoDBClient({
      endpoint: dynamoEndpoint(),
      region: 'local',
      credentials: { accessKeyId: 'x', secretAccessKey: 'x' },
    });
    const log = async () =>
      (
        await raw.send(
          new QueryCommand({
            TableName: tableName,
            KeyConditionExpression: 'pk = :pk AND begins_with(sk, :log)',
            ExpressionAttributeValues: { ':pk': { S: 'S#budget#chat-log' }, ':log': { S: 'V#' } },
            ConsistentRead: true,
          }),
        )
      ).Items ?? [];
    try {
      for (let n = 1; n <= 5; n++) await turn(n);
      const before = new Set((await log()).map((item) => item.sk?.S));

      // Act
      await turn(6);

      // Assess: what a read of the log's newest changes pays for, a turn at a time. Each change
      // repeats what it carries (`t`) and keeps its request's answer (`ia`): both deflated with
      // what they share with their item, where they took 1.4 KB of the turn's 2.8.
      const changes = (await log()).filter((item) => !before.has(item.sk?.S));
      const sizes = changes.map((item) => itemSize(item as never));
      const answers = changes.flatMap((item) => (item.ia ? [itemSize({ ia: item.ia } as never)] : []));
      expect(changes.map((item) => item.kind?.S)).toEqual(['a', 'l', 'v', 'v']);
      expect(
        sizes.reduce((sum, size) => sum + size, 0),
        `the changes: ${sizes.join(', ')} bytes`,
      ).toBeLessThanOrEqual(2_000);
      expect(answers).toHaveLength(3);
      for (const answer of answers) expect(answer).toBeLessThanOrEqual(64);
    } finally {
      raw.destroy();
      useDependencies(undefined);
    }
  });
});
