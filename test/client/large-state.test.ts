import { type AgentStateClient, createClient, type StateChangedEvent } from '@agentstate/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningApi, startApi } from '../helpers/e2e.js';
import { eventually, uniqueId } from './support.js';

/**
 * Following a 4 MiB state with `onStateChanged`: its events arrive truncated (API.md section
 * 9) with the change as a merge patch and as RFC 6902 operations, which the client applies to
 * the state it knows, so a follower reads a version only when an event cannot tell it the
 * change (or it does not know the state before). Against the server as `npm start` runs it.
 */
let api: RunningApi;
const clients: AgentStateClient[] = [];
/** Every request a client sent, as `METHOD path`. */
const sent: string[] = [];

beforeAll(async () => {
  api = await startApi();
});
afterAll(async () => {
  for (const each of clients) each.close();
  await api?.stop();
});

function newClient(options: { counted?: boolean } = {}): AgentStateClient {
  const countingFetch: typeof fetch = (input, init) => {
    const url = new URL(input instanceof Request ? input.url : String(input));
    sent.push(`${init?.method ?? 'GET'} ${url.pathname}`);
    return globalThis.fetch(input, init);
  };
  const client = createClient({
    baseUrl: api.url,
    apiKey: 'dev-key',
    reconnect: { baseDelayMs: 50, maxDelayMs: 200 },
    ...(options.counted ? { fetch: countingFetch } : {}),
  });
  clients.push(client);
  return client;
}

type Log = { log: Array<{ id: string; text: string }>; turns: number };

function largeState(bytes: number): Log {
  const log: Array<{ id: string; text: string }> = [];
  for (let n = 0; log.length * 1050 < bytes; n++) log.push({ id: `m${n}`, text: `${n} ${'what the agent noted on the way '.repeat(32)}` });
  return { log, turns: 0 };
}

describe('onStateChanged on a 4 MiB state', () => {
  it('applies each change an event carries, and reads a version only when an event cannot say it', async () => {
    // Prepare: a 4 MiB state, and a follower whose every request is counted.
    const sid = uniqueId('big-follow');
    const writer = newClient();
    const state = largeState(4 * 1024 * 1024 - 256 * 1024);
    await writer.state.replace(sid, state);
    const follower = newClient({ counted: true });
    const seen: Array<{ next: Log | null; prev: Log | null; event: StateChangedEvent }> = [];
    const subscription = follower.session<Log>(sid).onStateChanged((next, prev, event) => void seen.push({ next, prev, event }));
    await subscription.ready;
    const versionReads = () => sent.filter((request) => /^GET .*\/versions\/\d+$/.test(request)).length;

    // Act: a first change (the follower knows no state yet), then an append and a merge patch.
    await writer.state.patch(sid, { turns: 1 });
    await eventually('the first event', () => seen.length >= 1);
    const readsForFirst = versionReads();
    const entry = { id: 'appended', text: 'a new line of the log' };
    await writer.state.jsonPatch(sid, [{ op: 'add', path: '/log/-', value: entry }]);
    await writer.state.patch(sid, { turns: 2 });
    await eventually('three events', () => seen.length >= 3);
    const readsForChanges = versionReads() - readsForFirst;
    // A change of 100 KB: its event is truncated and carries no change, so the follower reads it.
    const long = 'x'.repeat(100 * 1024);
    await writer.state.jsonPatch(sid, [{ op: 'replace', path: '/log/0/text', value: long }]);
    await eventually('four events', () => seen.length >= 4);
    const readsForLarge = versionReads() - readsForFirst - readsForChanges;

    // Assess: each delivery has the states the server has; the two small changes cost no read.
    const server = (await writer.state.get(sid)).state as Log;
    expect(seen.map(({ event }) => event.version)).toEqual([2, 3, 4, 5]);
    // The appended line came as the operation that added it, not as a 4 MiB state.
    expect(seen[1]?.event).toMatchObject({ truncated: true, jsonPatch: [{ op: 'add', path: '/log/-', value: entry }] });
    expect(seen[0]?.next).toEqual({ ...state, turns: 1 });
    expect(seen[0]?.prev).toEqual(state);
    expect(seen[1]?.next?.log.at(-1)).toEqual(entry);
    expect(seen[1]?.prev).toEqual(seen[0]?.next);
    expect(seen[2]?.next).toEqual({ ...seen[1]?.next, turns: 2 });
    expect(seen[3]?.next).toEqual(server);
    expect(seen[3]?.next?.log[0]?.text).toBe(long);
    expect(readsForFirst).toBeLessThanOrEqual(2);
    expect(readsForChanges).toBe(0);
    expect(readsForLarge).toBe(1);
    subscription();
  }, 60_000);
});
