import { beforeAll, describe, expect, it } from 'vitest';
import type { Dependencies } from '../../functions/http/dependencies.js';
import { createStores, type Stores } from '../../functions/store/index.js';
import { dynamoDbClient } from '../../functions/store/table/client.js';
import { createTestTable, dynamoEndpoint } from '../helpers/dynamodb.js';

/**
 * Reads of the log's newest changes from a replica (eventually consistent, half the read
 * units; docs/architecture.md, "Reads from a replica"). DynamoDB Local's replica never lags, so
 * a middleware makes one: it drops the newest items (or one in the middle) from the answer of
 * an eventually consistent Query of a session's log, as a replica that has not yet applied the
 * latest writes would answer. Every answer must still be the one a consistent read gives.
 */
type Lag = 'newest' | 'middle';
let lag: Lag | undefined;
/** The log Queries sent, each as consistent or not. */
let logReads: Array<'consistent' | 'replica'> = [];
let stores: Stores;
let deps: Dependencies;
/** What each worker call was shown: the contents of its messages. */
let shown: string[][] = [];

beforeAll(async () => {
  const tableName = await createTestTable('replica');
  const client = dynamoDbClient({ AGENTSTATE_DYNAMODB_ENDPOINT: dynamoEndpoint() });
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const input = args.input as { ConsistentRead?: boolean; Limit?: number; ExpressionAttributeValues?: Record<string, unknown> };
      const prefix = input.ExpressionAttributeValues?.[':prefix'];
      const ofLog = context.commandName === 'QueryCommand' && (prefix === 'V#' || (prefix as { S?: string } | undefined)?.S === 'V#');
      // A replica one change behind answers a tip read (Limit 1) with the change before the newest.
      const behindByOne = ofLog && !input.ConsistentRead && lag === 'newest' && input.Limit === 1;
      if (behindByOne) input.Limit = 2;
      const result = await next(args);
      if (!ofLog) return result;
      logReads.push(input.ConsistentRead ? 'consistent' : 'replica');
      const output = result.output as { Items?: unknown[]; Count?: number };
      if (behindByOne && output.Items) {
        output.Items = output.Items.slice(1);
        output.Count = output.Items.length;
      } else if (!input.ConsistentRead && lag && output.Items && output.Items.length > 2) {
        // A lagging replica: without the newest change, or (never in DynamoDB) with a hole.
        output.Items = lag === 'newest' ? output.Items.slice(1) : [output.Items[0], ...output.Items.slice(2)];
        output.Count = output.Items.length;
      }
      return result;
    },
    { step: 'initialize', name: 'laggingReplica' },
  );
  stores = createStores(client, tableName);
  const { dependenciesFor } = await import('../../functions/http/dependencies.js');
  deps = dependenciesFor(stores, {
    invokeWorker: async (_worker, body) => {
      const request = JSON.parse(body) as { state: { turns?: number } | null; messages: Array<{ content: string }> };
      shown.push(request.messages.map((message) => message.content));
      return {
        state: { turns: (request.state?.turns ?? 0) + 1 },
        messages: [{ role: 'assistant', content: `re: ${request.messages.at(-1)?.content}` }],
      };
    },
  });
  await deps.agents.putAgent('replica', 'chat', { worker: { url: 'module:examples/worker.ts' } });
});

async function conversation(sessionId: string) {
  const scope = { tenant: 'replica', sessionId };
  await deps.sessions.createSession('replica', { sessionId, agentId: 'chat' });
  for (let turn = 1; turn <= 3; turn++) {
    await deps.sessions.appendMessages(scope, { messages: [{ role: 'user', content: `question ${turn}` }] });
    await deps.decide.decide(scope, { trigger: { type: 'user.turn' } });
  }
  return scope;
}

describe('a decision reads the newest changes from a replica', () => {
  it('reads them eventually consistent, once, when the replica is current', async () => {
    const scope = await conversation('current');
    await deps.sessions.appendMessages(scope, { messages: [{ role: 'user', content: 'question 4' }] });
    lag = undefined;
    logReads = [];
    shown = [];

    await deps.decide.decide(scope, { trigger: { type: 'user.turn' } });

    expect(logReads).toEqual(['replica']);
    expect(shown[0]?.at(-1)).toBe('question 4');
  });

  it('shows the worker a message appended a moment before when the replica has not got it yet: the lease fails, the reads are made again consistently', async () => {
    // Prepare: the message the client has just appended (answered 201) is the newest change.
    const scope = await conversation('lagging');
    await deps.sessions.appendMessages(scope, { messages: [{ role: 'user', content: 'question 4' }] });
    lag = 'newest';
    logReads = [];
    shown = [];

    // Act
    const result = await deps.decide.decide(scope, { trigger: { type: 'user.turn' } });
    lag = undefined;

    // Assess: the replica's tip was one change behind; the lease at the place after it was
    // taken, so the decision began again from a consistent read and showed the new message.
    expect(logReads).toEqual(['replica', 'consistent']);
    expect(shown).toHaveLength(1);
    expect(shown[0]?.slice(-2)).toEqual(['re: question 3', 'question 4']);
    expect((await deps.sessions.getPath(scope)).messages.map((message) => message.content).slice(-3)).toEqual([
      're: question 3',
      'question 4',
      're: question 4',
    ]);
    // Versions stay contiguous: one for each of the three decisions before, and this one.
    expect(result.version).toBe(4);
  });

  it('reads again consistently a replica answer with a change missing in the middle', async () => {
    const scope = await conversation('holed');
    await deps.sessions.appendMessages(scope, { messages: [{ role: 'user', content: 'question 4' }] });
    lag = 'middle';
    logReads = [];
    shown = [];

    await deps.decide.decide(scope, { trigger: { type: 'user.turn' } });
    lag = undefined;

    expect(logReads).toEqual(['replica', 'consistent']);
    expect(shown[0]).toEqual([
      'question 1',
      're: question 1',
      'question 2',
      're: question 2',
      'question 3',
      're: question 3',
      'question 4',
    ]);
  });

  it('answers another decision in progress only after a consistent read says so', async () => {
    // Prepare: a lease the replica does not show yet (a decision just began elsewhere).
    const scope = await conversation('leased');
    const tip = await stores.sessions.readTip(scope, { withState: true });
    await stores.sessions.commit(scope, {
      basedOn: tip,
      head: { id: tip.head, version: tip.headVersion, depth: tip.headDepth },
      newNodes: [],
      takeLease: { holder: 'another', untilMs: Date.now() + 60_000 },
      mayCreateSession: false,
    });
    lag = 'newest';
    logReads = [];

    // Act
    const attempt = deps.decide.decide(scope, { trigger: { type: 'user.turn' } });

    // Assess
    await expect(attempt).rejects.toMatchObject({ code: 'decision_in_progress' });
    lag = undefined;
    expect(logReads).toEqual(['replica', 'consistent']);
  });
});

describe('the path at the head reads the newest changes from a replica, checked against the newest key', () => {
  it('reads the replica beside the newest key, and keeps its answer when it reaches that key', async () => {
    const scope = await conversation('path-current');
    lag = undefined;
    logReads = [];

    const path = await deps.sessions.getPath(scope);

    expect([...logReads].sort()).toEqual(['consistent', 'replica']);
    expect(path.messages.map((message) => message.content).at(-1)).toBe('re: question 3');
  });

  it('reads again consistently when the replica has not got the message appended a moment before', async () => {
    const scope = await conversation('path-lagging');
    await deps.sessions.appendMessages(scope, { messages: [{ role: 'user', content: 'question 4' }] });
    lag = 'newest';
    logReads = [];

    const path = await deps.sessions.getPath(scope);
    lag = undefined;

    expect([...logReads].sort()).toEqual(['consistent', 'consistent', 'replica']);
    expect(path.messages.map((message) => message.content).slice(-2)).toEqual(['re: question 3', 'question 4']);
  });

  it('reads again consistently a replica answer with a change missing in the middle', async () => {
    const scope = await conversation('path-holed');
    lag = 'middle';
    logReads = [];

    const path = await deps.sessions.getPath(scope);
    lag = undefined;

    expect([...logReads].sort()).toEqual(['consistent', 'consistent', 'replica']);
    expect(path.messages.map((message) => message.content)).toEqual([
      'question 1',
      're: question 1',
      'question 2',
      're: question 2',
      'question 3',
      're: question 3',
    ]);
  });
});

describe('a state write reads its tip from a replica, which its put confirms', () => {
  /** A session at version 2 (state {a: 2}), its newest change a PATCH the client was just answered. */
  async function written(sessionId: string) {
    const scope = { tenant: 'replica', sessionId };
    await deps.sessions.createSession('replica', { sessionId });
    await deps.sessions.patchState(scope, { a: 1 });
    await deps.sessions.patchState(scope, { a: 2 });
    return scope;
  }

  it('reads the tip once, eventually consistent, when the replica is current', async () => {
    const scope = await written('write-current');
    lag = undefined;
    logReads = [];

    const result = await deps.sessions.patchState(scope, { b: 1 });

    expect(logReads).toEqual(['replica']);
    expect(result).toMatchObject({ version: 3, prevVersion: 2, state: { a: 2, b: 1 }, changed: true });
  });

  it('writes on the newest state when the replica has not got the write before: the put at the place after its tip fails, the write is made again consistently', async () => {
    const scope = await written('write-lagging');
    lag = 'newest';
    logReads = [];

    const result = await deps.sessions.patchState(scope, { b: 1 });
    lag = undefined;

    // The replica's tip was version 1 ({a: 1}): a write on it would have lost {a: 2}.
    expect(logReads).toEqual(['replica', 'consistent']);
    expect(result).toMatchObject({ version: 3, prevVersion: 2, state: { a: 2, b: 1 }, changed: true });
    expect((await deps.sessions.listVersions(scope, { limit: 10 })).items.map((version) => version.version)).toEqual([3, 2, 1]);
  });

  it('answers If-Match of the newest version, which the replica does not have yet, with the write, not 412', async () => {
    const scope = await written('write-if-match');
    lag = 'newest';

    const result = await deps.sessions.patchState(scope, { b: 1 }, { ifMatch: 2 });
    lag = undefined;

    expect(result).toMatchObject({ version: 3, prevVersion: 2, changed: true });
  });

  it('answers "no change" only after a consistent read says so', async () => {
    // Prepare: on the replica's state ({a: 1}) this patch changes nothing; on the newest it does.
    const scope = await written('write-no-change');
    lag = 'newest';
    logReads = [];

    // Act
    const result = await deps.sessions.patchState(scope, { a: 1 });
    lag = undefined;

    // Assess
    expect(logReads).toEqual(['replica', 'consistent']);
    expect(result).toMatchObject({ version: 3, prevVersion: 2, state: { a: 1 }, changed: true });
    lag = undefined;
    expect(await deps.sessions.patchState(scope, { a: 1 })).toMatchObject({ version: 3, changed: false });
  });
});
