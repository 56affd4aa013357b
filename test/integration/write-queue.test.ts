import { beforeAll, describe, expect, it } from 'vitest';
import { CommitService } from '../../functions/core/commits/commit-service.js';
import type { DocumentStore, SessionStore } from '../../functions/core/model/ports.js';
import { SessionService } from '../../functions/core/sessions/session-service.js';
import { createStores } from '../../functions/store/index.js';
import { dynamoDbClient } from '../../functions/store/table/client.js';
import { createTestTable, dynamoEndpoint } from '../helpers/dynamodb.js';

/**
 * The write queue of a crowded session (functions/core/write/write-retry.ts): a change whose writer lost a
 * race first says so on the tip, and for a second after it a blind write's first attempt waits
 * its turn (one more tip read) instead of going straight in. That holds for every blind write
 * to a session's log, appends and commits as much as state writes: an append that ignored the queue took
 * the log's next place from writers that had waited, again and again (20 appenders on one
 * session: p99 1.6-2.3 s against 0.7-1.0 s once they queue; docs/architecture.md).
 */
let real: SessionStore;
let documents: DocumentStore;
const tipReads: string[] = [];
let raceNextCommit: ((scope: { tenant: string; sessionId: string }) => Promise<void>) | null = null;
let service: SessionService;
let commits: CommitService;
/** A rival writer on the same session, through the real store: it wins the place the next commit wanted. */
let rival: SessionService;

beforeAll(async () => {
  const tableName = await createTestTable('write-queue');
  const stores = createStores(dynamoDbClient({ AGENTSTATE_DYNAMODB_ENDPOINT: dynamoEndpoint() }), tableName);
  real = stores.sessions;
  documents = stores.documents;
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
  commits = new CommitService({ sessions: store, documents });
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

  it('makes a commit that moves the thread wait its turn behind a change whose writer lost a race', async () => {
    // Prepare: a state write that loses a race to a rival's append, then lands: its change is contended.
    const scope = { tenant: 'queue', sessionId: 'commit-after-a-lost-race' };
    await service.patchState(scope, { started: true });
    raceNextCommit = async (raced) => void (await rival.appendMessages(raced, { messages: [{ id: 'r1', role: 'user' }] }));
    await service.patchState(scope, { second: true });
    tipReads.length = 0;

    // Act: a blind commit of a thread key, well within the second.
    const committed = await commits.commit(scope, { commands: [{ key: 'step', scope: 'thread', merge: 'disjoint', set: 1 }] });

    // Assess: its first attempt read the tip and queued; the second read it again and landed.
    expect(committed).toMatchObject({ node: 'r1', changed: true });
    expect(tipReads).toHaveLength(2);
    expect((await service.readState(scope, {})).state).toEqual({ started: true, second: true, step: 1 });
  });

  it('marks a commit that lost a race as contended, so that the next blind write queues behind it', async () => {
    // Prepare: a thread commit with a run document (one transaction) that loses a race to a
    // rival's state write, then lands.
    const scope = { tenant: 'queue', sessionId: 'commit-lost-a-race' };
    await service.patchState(scope, { started: true });
    raceNextCommit = async (raced) => void (await rival.patchState(raced, { rival: true }));
    await commits.commit(scope, {
      runId: 'run-1',
      commands: [
        { key: 'step', scope: 'thread', merge: 'disjoint', set: 1 },
        { key: 'tool', scope: 'run', merge: 'disjoint', set: 'search' },
      ],
    });
    tipReads.length = 0;

    // Act: a blind state write, well within the second.
    const written = await service.patchState(scope, { after: true });

    // Assess: it queued once behind the commit (two tip reads), then landed on top of it.
    expect(written).toMatchObject({ changed: true });
    expect(tipReads).toHaveLength(2);
    expect((await service.readState(scope, {})).state).toEqual({ started: true, rival: true, step: 1, after: true });
  });

  it('lets a commit guarded by expectedVersion, or one of documents alone, go straight in', async () => {
    // Prepare: a contended change on the session, a moment ago.
    const scope = { tenant: 'queue', sessionId: 'commit-no-queue' };
    await service.patchState(scope, { started: true });
    raceNextCommit = async (raced) => void (await rival.appendMessages(raced, { messages: [{ id: 'r1', role: 'user' }] }));
    const contended = await service.patchState(scope, { second: true });
    tipReads.length = 0;

    // Act: a commit that names the version it expects, then one that changes only a run.
    const guarded = await commits.commit(scope, {
      expectedVersion: contended.version,
      commands: [{ key: 'step', scope: 'thread', merge: 'disjoint', set: 1 }],
    });
    const guardedReads = tipReads.length;
    tipReads.length = 0;
    const runOnly = await commits.commit(scope, {
      runId: 'run-1',
      commands: [{ key: 'tool', scope: 'run', merge: 'disjoint', set: 'search' }],
    });

    // Assess: each read the tip once. A guarded write is answered 412 or lands, never queues;
    // a documents-only commit takes no place in the log, so it has no one to queue behind.
    expect(guarded).toMatchObject({ changed: true, version: contended.version + 1 });
    expect(guardedReads).toBe(1);
    expect(runOnly).toMatchObject({ changed: false, run: { version: 1, state: { tool: 'search' } } });
    expect(tipReads).toHaveLength(1);
  });
});
