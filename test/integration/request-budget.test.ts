import { beforeAll, describe, expect, it } from 'vitest';
import { CommitService } from '../../functions/core/commit-service.js';
import { SessionService } from '../../functions/core/session-service.js';
import { dynamoDbClient } from '../../functions/store/client.js';
import { createStores, type Stores } from '../../functions/store/stores.js';
import { createTestTable, dynamoEndpoint } from '../helpers/dynamodb.js';

/**
 * DESIGN.md section 4 budgets, counted on the wire: every DynamoDB request the service makes
 * passes through a middleware that records its command name. Counts, not timings.
 */
let service: SessionService;
let stores: Stores;
let sent: string[] = [];

beforeAll(async () => {
  const tableName = await createTestTable('budget');
  const client = dynamoDbClient({ AGENTSTATE_DYNAMODB_ENDPOINT: dynamoEndpoint() });
  client.middlewareStack.add(
    (next, context) => async (args) => {
      sent.push(String(context.commandName).replace(/Command$/, ''));
      return next(args);
    },
    { step: 'initialize', name: 'countRequests' },
  );
  stores = createStores(client, tableName);
  service = new SessionService(stores.sessions);
});

async function count<T>(operation: () => Promise<T>): Promise<string[]> {
  sent = [];
  await operation();
  return sent;
}

const writes = (requests: string[]) => requests.filter((name) => /Put|Update|Transact|Delete|BatchWrite/.test(name));
const reads = (requests: string[]) => requests.filter((name) => /Get|Query/.test(name));

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
    expect(atVersion).toEqual(['GetItem']);
  });

  it('reads the tree in the same requests with or without message previews', async () => {
    const plain = await count(() => service.getTree(scope));
    const withPreview = await count(() => service.getTree(scope, { preview: true }));

    expect(withPreview).toEqual(plain);
    expect(plain.length).toBeLessThanOrEqual(3);
  });

  it('appends 25 messages with at most three reads and one transaction', async () => {
    const messages = Array.from({ length: 25 }, (_, index) => ({ role: 'user', text: `m${index}` }));

    const requests = await count(() => service.appendMessages(scope, { messages }));

    expect(reads(requests).length).toBeLessThanOrEqual(3);
    expect(writes(requests)).toEqual(['TransactWriteItems']);
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

  it('creates the session with its first write, in one transaction', async () => {
    const requests = await count(() => service.patchState({ tenant: 'budget', sessionId: 'first-write' }, { first: true }));

    expect(writes(requests)).toEqual(['TransactWriteItems']);
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
  it('stays within its budget: at most 6 requests besides the worker call', async () => {
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

    // Assess: the session item, the agents, the lease, the tip, the shared document, one commit.
    expect(requests.length, requests.join(', ')).toBeLessThanOrEqual(6);
    expect(writes(requests)).toEqual(['PutItem', 'TransactWriteItems']);
  });
});
