import { beforeAll, describe, expect, it } from 'vitest';
import { SessionService } from '../../functions/core/sessions/session-service.js';
import { createStores } from '../../functions/store/index.js';
import { dynamoDbClient } from '../../functions/store/table/client.js';
import { createTestTable, dynamoEndpoint } from '../helpers/dynamodb.js';

/**
 * The first read of every LangGraph run (issue 36): the saver's `getTuple` on a new thread is
 * `GET …/state?notes=1` of a session that does not exist yet. It used to read the tip, then the
 * root's notes, one after the other, on the critical path of the run, although a session that
 * was never made has no notes. Counted on the wire: every DynamoDB request the service makes
 * passes through a middleware that records its command name and the round it started in.
 */
let service: SessionService;
/** The stores' and the service's clock, which a test moves past an expiry. */
let clock = Date.parse('2026-06-01T10:00:00.000Z');
let sent: string[] = [];
/** Sequential rounds: a request that starts while none is in flight starts a new round. */
let rounds = 0;
let inFlight = 0;

beforeAll(async () => {
  const tableName = await createTestTable('notes-read');
  const client = dynamoDbClient({ AGENTSTATE_DYNAMODB_ENDPOINT: dynamoEndpoint() });
  client.middlewareStack.add(
    (next, context) => async (args) => {
      sent.push(String(context.commandName).replace(/Command$/, ''));
      if (inFlight === 0) rounds++;
      inFlight++;
      try {
        return await next(args);
      } finally {
        inFlight--;
      }
    },
    { step: 'initialize', name: 'countRequests' },
  );
  service = new SessionService(createStores(client, tableName, { now: () => clock }).sessions, { now: () => new Date(clock) });
});

/** What `operation` answered, and the requests and sequential rounds it made. */
async function counted<T>(operation: () => Promise<T>): Promise<{ answer: T; requests: string[]; rounds: number }> {
  sent = [];
  rounds = 0;
  const answer = await operation();
  return { answer, requests: [...sent], rounds };
}

const tenant = 'notes-read';

describe("a state read with its notes at the head (LangGraph's getTuple)", () => {
  it('answers for a session that was never made after the tip read alone, as never written and with no notes', async () => {
    const scope = { tenant, sessionId: 'never-made' };

    const { answer, requests } = await counted(() => service.readState(scope, { notes: true }));

    // What it answered before: the state of a session with nothing written, and no notes.
    expect(answer).toEqual({ sessionId: 'never-made', node: 'root', version: 0, state: null, agent: null, updatedAt: null, notes: {} });
    // Before, a Query of the root's notes followed the tip's: ['Query', 'Query'] in two rounds.
    expect(requests).toEqual(['Query']);
  });

  it("still reads the root's notes of a session made and never written: they may hold some", async () => {
    const withNote = (await service.createSession(tenant, { sessionId: 'made-noted' })).sessionId;
    await service.putNote({ tenant, sessionId: withNote }, 'root', 'k', { v: 1 });
    const without = (await service.createSession(tenant, { sessionId: 'made-bare' })).sessionId;

    const noted = await counted(() => service.readState({ tenant, sessionId: withNote }, { notes: true }));
    const bare = await counted(() => service.readState({ tenant, sessionId: without }, { notes: true }));

    expect(noted.answer).toMatchObject({ node: 'root', version: 0, state: null, notes: { k: { v: 1 } } });
    expect(bare.answer).toMatchObject({ node: 'root', version: 0, state: null, notes: {} });
    expect(noted.requests).toEqual(['Query', 'Query']);
    expect(bare.requests).toEqual(['Query', 'Query']);
  });

  it("reads the head's notes after the tip in a session with a log, as before", async () => {
    const scope = { tenant, sessionId: 'written' };
    await service.appendMessages(scope, { messages: [{ id: 'c1', role: 'checkpoint' }] });
    await service.putNote(scope, 'c1', 'w', 1);

    const { answer, requests, rounds } = await counted(() => service.readState(scope, { notes: true }));

    expect(answer).toMatchObject({ node: 'c1', notes: { w: 1 } });
    expect(requests).toEqual(['Query', 'Query']);
    expect(rounds).toBe(2);
  });

  it('answers a named node of a session that was never made from the tip and its notes read beside it, without the session item', async () => {
    const scope = { tenant, sessionId: 'never-made-named' };

    const { answer, requests, rounds } = await counted(() => service.readState(scope, { node: 'c9', notes: true }));

    expect(answer).toEqual({
      sessionId: 'never-made-named',
      node: 'c9',
      version: 0,
      state: null,
      agent: null,
      updatedAt: null,
      notes: {},
    });
    // Before, the node's index and then the session item were read after them: four requests in three rounds.
    expect(requests).toEqual(['Query', 'Query']);
    expect(rounds).toBe(1);
  });

  it('shows no notes of a session that expired, as for one that does not exist, whose root holds some', async () => {
    const scope = { tenant, sessionId: 'expired' };
    await service.patchState(scope, { n: 1 });
    await service.putNote(scope, 'root', 'k', 'before');
    await service.updateSession(scope, { ttlSeconds: 60 });
    expect(await service.readState(scope, { notes: true })).toMatchObject({ version: 1, notes: { k: 'before' } });
    clock += 61_000;

    const { answer, requests } = await counted(() => service.readState(scope, { notes: true }));

    // An expired session reads as unknown from its expiry on (API.md section 12): its state as never
    // written, and, now, its notes as none. Before, the root's notes of the expired life were read and shown.
    expect(answer).toEqual({ sessionId: 'expired', node: 'root', version: 0, state: null, agent: null, updatedAt: null, notes: {} });
    expect(requests).toEqual(['Query']);
  });
});
