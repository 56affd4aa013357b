import { describe, expect, it } from 'vitest';
import { KEY_RECHECK_MS, KeyLiveness } from '../../functions/core/fanout/key-liveness.js';
import type { Json } from '../../functions/core/json/json.js';
import { liveBroadcaster, memoryBroadcaster } from '../../functions/ws/broadcast.js';
import { stateChangedEvent } from '../helpers/event-fixtures.js';

/** A key store whose answers the test sets, counting reads; a clock the test moves. */
function world() {
  const revoked = new Set<string>();
  const reads: string[] = [];
  let now = 0;
  const keys = new KeyLiveness(
    async (keyHash) => {
      reads.push(keyHash);
      return !revoked.has(keyHash);
    },
    () => now,
  );
  return {
    keys,
    reads,
    revoke: (keyHash: string) => revoked.add(keyHash),
    advance: (ms: number) => {
      now += ms;
    },
  };
}

describe('KeyLiveness', () => {
  it('reads a key at most once per bound, and knows a revoke once what it knew is older than the bound', async () => {
    // Prepare
    const { keys, reads, revoke, advance } = world();

    // Act: checks within the bound, a revoke, checks up to and past the bound.
    const first = await Promise.all([keys.isLive('k1'), keys.isLive('k1')]);
    advance(KEY_RECHECK_MS - 1);
    revoke('k1');
    const within = await keys.isLive('k1');
    advance(1);
    const past = await keys.isLive('k1');
    advance(10 * KEY_RECHECK_MS);
    const later = await keys.isLive('k1');

    // Assess: one read per bound; a revoked key is not read again.
    expect(first).toEqual([true, true]);
    expect(within).toBe(true);
    expect(past).toBe(false);
    expect(later).toBe(false);
    expect(reads).toEqual(['k1', 'k1']);
  });

  it('keeps no failed read', async () => {
    let fail = true;
    const keys = new KeyLiveness(
      async () => {
        if (fail) throw new Error('throttled');
        return true;
      },
      () => 0,
    );
    await expect(keys.isLive('k1')).rejects.toThrow('throttled');
    fail = false;
    expect(await keys.isLive('k1')).toBe(true);
  });
});

describe('the broadcasters with a key check', () => {
  const event = stateChangedEvent(1, { next: { n: 1 } as Json });

  it('send a follower of a revoked key nothing, close its connection and delete its records; others get the events', async () => {
    // Prepare
    const posted: string[] = [];
    const closed: string[] = [];
    const deleted: string[] = [];
    const gateway = {
      post: async (connectionId: string) => {
        posted.push(connectionId);
        return 'sent' as const;
      },
      close: async (connectionId: string) => {
        closed.push(connectionId);
      },
    };
    const deleteConnection = async (connectionId: string) => {
      deleted.push(connectionId);
    };
    const keyLive = async (keyHash: string) => keyHash !== 'revoked';
    const followers = [
      { connectionId: 'of-revoked', agentId: null, mode: 'full' as const, keyHash: 'revoked' },
      { connectionId: 'of-live', agentId: null, mode: 'full' as const, keyHash: 'live' },
      { connectionId: 'of-env-key', agentId: null, mode: 'full' as const, keyHash: null },
    ];
    const live = liveBroadcaster({ followers: async () => followers, deleteConnection }, gateway, keyLive);
    const memory = memoryBroadcaster({ namespaceFollowers: async () => followers, deleteConnection }, gateway, keyLive);

    // Act
    await live({ tenant: 't', sessionId: 's1' }, [event]);
    await memory('t', ['notes'], [event as never]);

    // Assess
    expect(posted.sort()).toEqual(['of-env-key', 'of-env-key', 'of-live', 'of-live']);
    expect(closed).toEqual(['of-revoked', 'of-revoked']);
    expect(deleted).toEqual(['of-revoked', 'of-revoked']);
  });
});
