import { beforeAll, describe, expect, it } from 'vitest';
import { type ContendedWrites, measureContendedWrites } from '../../bench/contended-writes.js';

/**
 * 100 blind writers on one target at once, with a core busy with another process (issue 33,
 * API.md section 8: commits without `expectedVersion` never fail because others commit at the
 * same time). Through the HTTP API of `npm start`, every DynamoDB request recorded
 * (bench/contended-writes.ts; the bench's `--only=contended` runs the same): every write is
 * acknowledged, every key is there, versions stay contiguous with each write's its own. A commit
 * to the shared document alone, or to a profile alone, claims its version once: it is one update
 * that cannot lose to writers of other keys. Any other write (a turn too) claims the target's
 * next version about twice: its first try, which a burst's writers mostly lose to each other,
 * then once in its turn in the target's write queue (write-retry.ts), never again and again.
 * Without the queue the same burst made 10 to 21 attempts a write and a third to a half of the
 * writes to a shared document or a node answered 409 (docs/architecture.md); 50 turns on one
 * session, before turns joined the queue, answered 409 on a loaded CI machine.
 * How fast it is, is the bench's; this file runs alone (vitest.config.ts), after the others.
 */
const WRITERS = 100;
let result: ContendedWrites;

beforeAll(async () => {
  result = await measureContendedWrites({ writers: WRITERS, loaded: true });
}, 240_000);

const paths = [
  'commits to one shared document',
  'commits to one profile',
  'commits to one thread',
  'merge patches at one node off the head',
  'turns on one session (messages with a state patch)',
];
/** What a path's writes answer: an append answers 201 (it makes nodes), every other write 200. */
const created = new Set(['turns on one session (messages with a state patch)']);

describe(`${WRITERS} blind writers on one target at once, the machine loaded`, () => {
  for (const label of paths) {
    const status = created.has(label) ? 201 : 200;
    it(`${label}: all answered ${status}, every key there, versions contiguous, no write retried again and again`, () => {
      const path = result.paths.find((measured) => measured.label === label);
      expect(path, label).toBeDefined();
      if (!path) return;
      expect(path.statuses).toEqual({ [status]: WRITERS });
      expect(path.problems).toEqual([]);
      // One claim of a version per write landed; what was lost is at most the burst's first tries.
      expect(path.attempts - path.lost).toBe(WRITERS);
      expect(path.lost).toBeLessThanOrEqual(WRITERS);
    });
  }

  // A commit to the shared document alone, or to the profile alone, writes it key by key in one
  // update that numbers its own version (document-store.ts `writeDocument`; a profile's also on
  // its fence, which only a PATCH of a session's user, an erasure or a whole put moves): commits
  // to other keys never make it lose, so the burst's writes are one attempt each, counted from
  // the server's own DynamoDB requests.
  for (const label of ['commits to one shared document', 'commits to one profile']) {
    it(`${label}: at most one attempt a write, none lost`, () => {
      const path = result.paths.find((measured) => measured.label === label);
      expect(path?.attempts).toBeLessThanOrEqual(WRITERS);
      expect(path?.lost).toBe(0);
    });
  }
});
