import { beforeAll, describe, expect, it } from 'vitest';
import type { SessionStore } from '../../functions/core/ports.js';
import { SessionService } from '../../functions/core/session-service.js';
import { dynamoDbClient } from '../../functions/store/client.js';
import { createStores } from '../../functions/store/stores.js';
import { createTestTable, dynamoEndpoint } from '../helpers/dynamodb.js';

/**
 * The write queue of a crowded session (functions/core/retry.ts): a change whose writer lost a
 * race first says so on the tip, and for a second after it a blind write's first attempt waits
 * its turn (one more tip read) instead of going straight in. That holds for every blind write
 * to a session's log, appends as much as state writes: an append that ignored the queue took
 * the log's next place from writers that had waited, again and again (20 appenders on one
 * session: p99 1.6-2.3 s against 0.7-1.0 s once they queue; docs/architecture.md).
 */
let real: SessionStore;
const tipReads: string[] = [];
let raceNextCommit: ((scope: { tenant: string; sessionId: string }) => Promise<void>) | null = null;
let service: SessionService;
/** A rival writer on the same session, through the real store: it wins the place the next commit wanted. */
let rival: SessionService;

beforeAll(async () => {
  const tableName = await createTestTable('write-queue');
  real = createStores(dynamoDbClient({ AGENTSTATE_DYNAMODB_ENDPOINT: dynamoEndpoint() }), tableName).sessions;
  // The real store, with its tip reads counted and, on demand, a rival's write made just before
  // the next commit, so that the commit loses the race for the log's next place for real.
  const store = new Proxy(real, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver);
      if (typeof value !== 'function') return value;
      if (property === 'readTipWithNodes' || property === 'readTip') {
        return (...args: unknown[]) => {
          tipReads.push(String(property));
          return value.apply(target, args);
        };
      }
      if (property === 'commit') {
        return async (...args: [{ tenant: string; sessionId: string }, ...unknown[]]) => {
          const race = raceNextCommit;
          raceNextCommit = null;
          if (race) await race(args[0]);
          return value.apply(target, args);
        };
      }
      return value.bind(target);
    },
  });
  service = new SessionService(store);
  rival = new SessionService(real);
});

describe('the write queue of a crowded session', () => {
  it('makes an append wait its turn behind a change whose writer lost a race a moment ago', async () => {
    // Prepare: a state write that loses a race to a rival's append, then lands: its change is contended.
    const scope = { tenant: 'queue', sessionId: 'after-a-lost-race' };
    await service.patchState(scope, { started: true });
    raceNextCommit = async (raced) => void (await rival.appendMessages(raced, { messages: [{ id: 'r1', role: 'user' }] }));
    await service.patchState(scope, { second: true });
    tipReads.length = 0;

    // Act: a blind append, well within the second.
    const appended = await service.appendMessages(scope, { messages: [{ id: 'u1', role: 'user' }] });

    // Assess: its first attempt read the tip and queued; the second read it again and landed.
    expect(appended.head).toBe('u1');
    expect(tipReads).toHaveLength(2);
    expect((await service.readState(scope, {})).state).toEqual({ started: true, second: true });
  });

  it('marks an append that lost a race as contended, so that the next blind write queues behind it', async () => {
    // Prepare: an append that loses a race to a rival's state write, then lands.
    const scope = { tenant: 'queue', sessionId: 'append-lost-a-race' };
    await service.patchState(scope, { started: true });
    raceNextCommit = async (raced) => void (await rival.patchState(raced, { rival: true }));
    await service.appendMessages(scope, { messages: [{ id: 'u1', role: 'user' }] });
    tipReads.length = 0;

    // Act: a blind state write, well within the second.
    const written = await service.patchState(scope, { after: true });

    // Assess: it queued once behind the append (two tip reads), then landed at the head the append made.
    expect(written).toMatchObject({ node: 'u1', changed: true });
    expect(tipReads).toHaveLength(2);
    expect((await service.readState(scope, {})).state).toEqual({ started: true, rival: true, after: true });
  });

  it('lets a blind append go straight in on a session nobody is waiting for', async () => {
    // Prepare: writes that never raced.
    const scope = { tenant: 'queue', sessionId: 'quiet' };
    await service.patchState(scope, { started: true });
    await service.appendMessages(scope, { messages: [{ id: 'u1', role: 'user' }] });
    tipReads.length = 0;

    // Act
    await service.appendMessages(scope, { messages: [{ id: 'u2', role: 'user' }] });

    // Assess: one tip read, one commit.
    expect(tipReads).toHaveLength(1);
  });
});
