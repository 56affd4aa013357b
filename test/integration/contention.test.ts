import { beforeAll, describe, expect, it } from 'vitest';
import { CommitService } from '../../functions/core/commits/commit-service.js';
import { SessionService } from '../../functions/core/sessions/session-service.js';
import { createStores } from '../../functions/store/index.js';
import { dynamoDbClient } from '../../functions/store/table/client.js';
import { createTestTable, dynamoEndpoint } from '../helpers/dynamodb.js';

/**
 * Many writers on one session at once (issue 20): blind writes (no If-Match) race for the log's
 * next place, lose, re-read and retry. Nothing acknowledged may be lost, and the versions stay
 * 1, 2, 3, … with no gap, even with appends and commits claiming places of the log between them. How fast
 * this is, is for `npm run bench` (section 3), not for a test.
 */
let service: SessionService;
let commits: CommitService;

// On this file's own DynamoDB Local, as every file's (test/helpers/dynamodb.ts): what this test
// asserts (nothing lost, no gap) must not depend on what other files wrote before it. On the
// run's shared instance, as it was, its writers' retries ran out of their 15 s on a fresh clone.
beforeAll(async () => {
  const tableName = await createTestTable('contention');
  const stores = createStores(dynamoDbClient({ AGENTSTATE_DYNAMODB_ENDPOINT: dynamoEndpoint() }), tableName);
  service = new SessionService(stores.sessions);
  commits = new CommitService(stores);
});

const WRITERS = 20;
const WRITES_EACH = 5;

describe('20 blind writers on one session', () => {
  it('lose nothing, and leave versions contiguous, with appends and commits racing them', async () => {
    // Prepare
    const scope = { tenant: 'contention', sessionId: 'hot' };
    await service.patchState(scope, { started: true });

    // Act: every writer sets keys of its own; two more append messages meanwhile, and two
    // commit keys of their own into one shared object (a commutative merge with the stored value).
    const [written, appended, committed] = await Promise.all([
      Promise.all(
        Array.from({ length: WRITERS }, async (_, writer) => {
          const results = [];
          for (let write = 0; write < WRITES_EACH; write++)
            results.push(await service.patchState(scope, { [`w${writer}-${write}`]: write }));
          return results;
        }),
      ),
      Promise.all(
        ['a', 'b'].map(async (appender) => {
          const results = [];
          for (let index = 0; index < 5; index++) {
            results.push(await service.appendMessages(scope, { messages: [{ id: `${appender}${index}`, role: 'user' }] }));
          }
          return results;
        }),
      ),
      Promise.all(
        ['x', 'y'].map(async (committer) => {
          const results = [];
          for (let index = 0; index < 5; index++) {
            const commands = [
              { key: 'tally', scope: 'thread' as const, merge: 'commutative' as const, set: { [`${committer}${index}`]: index } },
            ];
            results.push(await commits.commit(scope, { commands }));
          }
          return results;
        }),
      ),
    ]);

    // Assess: every write acknowledged and in the final state; versions 1..n, each on the one before.
    const state = (await service.readState(scope, {})).state as Record<string, unknown>;
    for (let writer = 0; writer < WRITERS; writer++) {
      for (let write = 0; write < WRITES_EACH; write++) expect(state[`w${writer}-${write}`]).toBe(write);
    }
    expect(written.flat().every((result) => result.changed)).toBe(true);
    expect(state.tally).toEqual({ x0: 0, x1: 1, x2: 2, x3: 3, x4: 4, y0: 0, y1: 1, y2: 2, y3: 3, y4: 4 });
    expect(committed.flat().every((result) => result.changed)).toBe(true);
    const versions = (await service.listVersions(scope, { limit: 500 })).items;
    const total = 1 + WRITERS * WRITES_EACH + 10;
    expect(versions.map((version) => version.version)).toEqual(Array.from({ length: total }, (_, index) => total - index));
    expect(new Set([...written.flat(), ...committed.flat()].map((result) => result.version)).size).toBe(WRITERS * WRITES_EACH + 10);
    const tree = await service.getTree(scope);
    expect(tree.nodes.map((node) => node.id).sort()).toEqual(['a0', 'a1', 'a2', 'a3', 'a4', 'b0', 'b1', 'b2', 'b3', 'b4', 'root']);
    expect(appended.flat()).toHaveLength(10);
  }, 60_000);
});
