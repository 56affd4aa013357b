import { beforeAll, describe, expect, it } from 'vitest';
import { type KeyLoad, measurePartitionLoad, type PartitionLoad } from '../../bench/partition-load.js';

/**
 * API.md section 14 from outside: a tenant's conversations, driven through the HTTP API of
 * `npm start` with every DynamoDB request and every index write priced per partition key
 * (bench/partition-load.ts; the bench's partition-load section runs the same with more
 * conversations and prints the tenant's ceiling). A key that every conversation shares may
 * take no cost per turn: no write but a session's activity, at most once per interval, and
 * reads at most once per function instance (here one process) and second.
 */
const CONVERSATIONS = 8;
const TURNS_EACH = 3;
/** How long after the last turn the hooks are given (partition-load.ts `settle`): they read the stream then. */
const SETTLE_SECONDS = 1.5;
/** How far the sessions list may trail a session's activity (API.md section 2). */
const ACTIVITY_INTERVAL_SECONDS = 30;

let load: PartitionLoad;

beforeAll(async () => {
  load = await measurePartitionLoad({ conversations: CONVERSATIONS, turnsEach: TURNS_EACH });
}, 120_000);

const shared = () => load.keys.filter((key) => key.scope === 'tenant');
const describeKey = (key: KeyLoad) =>
  `${key.where} ${key.key}: ${key.reads} reads (${(key.readUnits / load.turns).toFixed(2)} RCU a turn), ${key.writes} writes (${(key.writeUnits / load.turns).toFixed(2)} WCU a turn)`;

describe('one tenant, many conversations: the keys they share', () => {
  it('answered every turn and counted what each key took', () => {
    expect(load.turns).toBe(CONVERSATIONS * TURNS_EACH);
    // Each conversation's own partition carries its turns: the measurement saw them.
    expect(load.keys.some((key) => key.scope === 'conversation' && key.writeUnits > 0)).toBe(true);
    expect(load.keys.some((key) => key.scope === 'request' && key.writeUnits > 0)).toBe(true);
  });

  it('writes no key every conversation shares but a session activity, at most once an interval', () => {
    // Sessions were made just before the turns: within one interval none needs to move.
    const intervals = Math.floor((load.seconds + SETTLE_SECONDS) / ACTIVITY_INTERVAL_SECONDS) + 1;
    // A move is an index entry's delete and put, each under 1 KB, in each list the session is in
    // (the tenant's, its agent's, a metadata string's: every conversation here shares all three).
    const allowed = CONVERSATIONS * intervals * 2;
    const written = shared().filter((key) => key.writes > 0);
    const lists = new Map<string, KeyLoad[]>();
    for (const key of written) {
      const list = `${key.where} ${key.key.replace(/#\d\d$/, '')}`;
      lists.set(list, [...(lists.get(list) ?? []), key]);
    }
    // The turns' writes were recorded; a list key may have none: a session's first write within
    // an interval of its creation moves no list (log-writer.ts), and these turns take less.
    expect(load.indexes.writeUnits + load.table.writeUnits).toBeGreaterThan(0);
    for (const [list, keys] of lists) {
      const writes = keys.reduce((sum, key) => sum + key.writes, 0);
      expect(writes, `${list}, written per turn:\n${keys.map(describeKey).join('\n')}`).toBeLessThanOrEqual(allowed);
    }
  });

  it('reads each key every conversation shares at most once a second', () => {
    const seconds = Math.ceil(load.seconds + SETTLE_SECONDS) + 1;
    const hot = shared().filter((key) => key.reads > seconds);
    expect(hot.map(describeKey), `at most ${seconds} reads each in ${load.seconds.toFixed(1)} s of turns`).toEqual([]);
  });
});

describe('one tenant, many conversations: what nobody asked for', () => {
  it('looks up no WebSocket followers of a conversation nobody follows (a follow puts its mark on the log first)', () => {
    const followers = load.keys.filter((key) => key.key.startsWith('W#'));
    expect(followers.map(describeKey)).toEqual([]);
  });
});
