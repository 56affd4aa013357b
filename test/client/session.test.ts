import {
  type AgentStateClient,
  AgentStateError,
  CodecError,
  createClient,
  type SchemaMismatchError as Mismatch,
  SchemaMismatchError,
  type StateChangedEvent,
} from '@agentstate/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { type RunningApi, startApi } from '../helpers/e2e.js';
import { eventually, uniqueId } from './support.js';

/**
 * The state surface of a session handle — reads and writes, the codec through the server,
 * typed keys, and live changes over the WebSocket (`onStateChanged`: live events, catch-up
 * from history, resuming without gaps after drops) — against the server as `npm start` runs
 * it (its stream read from DynamoDB Local).
 */

let api: RunningApi;
let client: AgentStateClient;
const clients: AgentStateClient[] = [];

beforeAll(async () => {
  api = await startApi();
  client = newClient();
});
afterAll(async () => {
  for (const each of clients) each.close();
  await api?.stop();
});

/** What the server stores, without the codec. */
const stored = async (sid: string) => client.state.get(sid);

describe('getState / setState / replaceState', () => {
  it('reads an unwritten session as initialState and never writes it', async () => {
    // Prepare
    const sid = uniqueId('initial');
    const chat = client.session(sid, { initialState: { turns: 0, model: 'fast' } });

    // Act
    const first = await chat.getState();
    first.turns = 99;
    const second = await chat.getState();

    // Assess
    expect(second).toEqual({ turns: 0, model: 'fast' });
    expect(await stored(sid)).toMatchObject({ version: 0, state: null });
    await expect(client.sessions.get(sid)).rejects.toMatchObject({ code: 'session_not_found' });
  });

  it('reads null for an unwritten session without initialState', async () => {
    expect(await client.session(uniqueId('none')).getState()).toBeNull();
  });

  it('merges patches and returns the merged state; the first write starts from initialState', async () => {
    const sid = uniqueId('merge');
    type Chat = { turns: number; model: string; prefs: { lang: string; tone?: string; units?: string } };
    const chat = client.session<Chat>(sid, { initialState: { turns: 0, model: 'fast', prefs: { lang: 'en', tone: 'dry' } } });

    const afterFirst = await chat.setState({ turns: 1 });
    const afterSecond = await chat.setState({ prefs: { tone: null, units: 'metric' } });
    const replaced = await chat.replaceState({ turns: 5, model: 'slow', prefs: { lang: 'fr', tone: 'warm' } });

    expect(afterFirst).toEqual({ turns: 1, model: 'fast', prefs: { lang: 'en', tone: 'dry' } });
    expect(afterSecond).toEqual({ turns: 1, model: 'fast', prefs: { lang: 'en', units: 'metric' } });
    expect(replaced).toEqual({ turns: 5, model: 'slow', prefs: { lang: 'fr', tone: 'warm' } });
    expect((await client.versions.list(sid)).versions.map((version) => version.cause)).toEqual(['replace', 'patch', 'replace']);
    expect((await stored(sid)).state).toEqual(replaced);
  });

  it('applies an updater function against the current state, retrying on conflicts', async () => {
    const sid = uniqueId('updater');
    const chat = client.session(sid, { initialState: { n: 0 } });

    await Promise.all(Array.from({ length: 5 }, () => chat.setState((current) => ({ n: current.n + 1 }))));

    expect(await chat.getState()).toEqual({ n: 5 });
  });

  it('writes at a pinned node and acts as the handle agent', async () => {
    const sid = uniqueId('node');
    await client.messages.append(sid, {
      messages: [
        { id: 'u1', role: 'user' },
        { id: 'a1', role: 'assistant' },
      ],
    });
    await client.messages.append(sid, { parentId: 'u1', messages: [{ id: 'a2', role: 'assistant' }] });
    const onA1 = client.session(sid, { node: 'a1', agentId: 'planner' });

    await onA1.setState({ branch: 'a1' });

    expect((await client.state.get(sid, { node: 'a1' })).state).toEqual({ branch: 'a1' });
    expect((await client.state.get(sid)).state).toBeNull();
    expect((await client.versions.get(sid, 1)).author).toBe('planner');
  });
});

describe('the codec through the server', () => {
  it('round-trips Date, Map, Set, BigInt, RegExp, bytes and undefined in arrays', async () => {
    // Prepare
    const sid = uniqueId('codec');
    const value = {
      due: new Date('2025-06-01T10:00:00.000Z'),
      seen: new Map<string, Set<number>>([['u1', new Set([1, 2])]]),
      total: 2n ** 70n,
      pattern: /^a+$/i,
      blob: new Uint8Array([0, 255, 7]),
      buffer: new Float32Array([0.5, -2]).buffer,
      slots: [1, undefined, 3],
      $as: 'a user key that looks like a tag',
    };

    // Act
    const written = await client.session(sid).replaceState(value);
    const read = await client.session(sid).getState();

    // Assess
    expect(written).toEqual(value);
    expect(read).toEqual(value);
    expect((await stored(sid)).state).toMatchObject({
      due: { $as: 'Date', $v: '2025-06-01T10:00:00.000Z' },
      $$as: 'a user key that looks like a tag',
    });
  });

  it('replaces tagged values whole and merges plain objects, whatever the stored value was', async () => {
    const sid = uniqueId('type-change');
    const chat = client.session<Record<string, unknown>>(sid);
    await chat.replaceState({ when: new Date(0), where: { city: 'Lisbon', zip: '1000' }, tags: new Set(['a']) });

    // A plain object onto a stored Date, a Date onto a stored plain object, a Set onto a Set.
    const merged = await chat.setState({ when: { day: 'monday' }, where: new Date(1000), tags: new Set(['b']) });
    const again = await chat.setState({ when: { hour: 9 } });

    expect(merged).toEqual({ when: { day: 'monday' }, where: new Date(1000), tags: new Set(['b']) });
    expect(again).toEqual({ when: { day: 'monday', hour: 9 }, where: new Date(1000), tags: new Set(['b']) });
    expect((await stored(sid)).state).toEqual({
      when: { day: 'monday', hour: 9 },
      where: { $as: 'Date', $v: '1970-01-01T00:00:01.000Z' },
      tags: { $as: 'Set', $v: ['b'] },
    });
  });

  it('refuses functions, class instances, symbols and cycles before sending anything', async () => {
    class Cart {
      items = [];
    }
    const cycle: Record<string, unknown> = {};
    cycle.me = cycle;
    const sid = uniqueId('refused');
    const chat = client.session<Record<string, unknown>>(sid);

    for (const bad of [{ f: () => 1 }, { cart: new Cart() }, { s: Symbol('x') }, cycle]) {
      await expect(chat.setState(bad)).rejects.toBeInstanceOf(CodecError);
      await expect(chat.replaceState(bad)).rejects.toBeInstanceOf(CodecError);
    }

    await expect(client.sessions.get(sid)).rejects.toMatchObject({ code: 'session_not_found' });
  });
});

describe('typed keys', () => {
  const settingsSchema = z.object({ theme: z.enum(['light', 'dark']), fontSize: z.number().int().min(8), since: z.date().nullable() });
  const settings = () => client.key('settings', settingsSchema, { theme: 'light', fontSize: 12, since: null });

  it('reads the default when absent, without writing it', async () => {
    const sid = uniqueId('key-absent');
    expect(await client.session(sid).key(settings()).get()).toEqual({ theme: 'light', fontSize: 12, since: null });
    expect((await stored(sid)).version).toBe(0);
  });

  it('sets and reads a value, nulls and rich values included, leaving other keys alone', async () => {
    const sid = uniqueId('key-set');
    const session = client.session(sid);
    await session.setState({ other: 1 });
    const key = session.key(settings());

    await key.set({ theme: 'dark', fontSize: 14, since: new Date('2025-01-01T00:00:00.000Z') });
    await key.set({ theme: 'dark', fontSize: 16, since: null });

    expect(await key.get()).toEqual({ theme: 'dark', fontSize: 16, since: null });
    expect((await stored(sid)).state).toEqual({ other: 1, settings: { theme: 'dark', fontSize: 16, since: null } });
  });

  it('fails on stored data that no longer matches, and never replaces it', async () => {
    // Prepare: someone stored settings of an older shape.
    const sid = uniqueId('key-mismatch');
    await client.state.replace(sid, { settings: { theme: 'sepia', fontSize: 12 } });
    const key = client.session(sid).key(settings());

    // Act
    const error = await key.get().catch((thrown: unknown) => thrown);
    const reports: Mismatch[] = [];
    const lenient = await key.getLenient((problem) => reports.push(problem));

    // Assess
    expect(error).toBeInstanceOf(SchemaMismatchError);
    expect(error).toBeInstanceOf(AgentStateError);
    expect(error).toMatchObject({ code: 'schema_mismatch', key: 'settings', phase: 'read', value: { theme: 'sepia', fontSize: 12 } });
    expect((error as Mismatch).issues.map((issue) => issue.path?.join('.'))).toEqual(expect.arrayContaining(['theme', 'since']));
    expect(lenient.value).toEqual({ theme: 'light', fontSize: 12, since: null });
    expect(lenient.error).toBeInstanceOf(SchemaMismatchError);
    expect(reports).toEqual([lenient.error]);
    expect((await stored(sid)).state).toEqual({ settings: { theme: 'sepia', fontSize: 12 } });
  });

  it('validates writes and sends nothing that does not match', async () => {
    const sid = uniqueId('key-write');
    const key = client.session(sid).key(settings());
    await expect(key.set({ theme: 'dark', fontSize: 2, since: null })).rejects.toMatchObject({ code: 'schema_mismatch', phase: 'write' });
    expect((await stored(sid)).version).toBe(0);
  });

  it('addresses cells by runtime params: review/{id}/state is a top-level key', async () => {
    // Prepare
    const review = client.cell('review/{id}/state', z.object({ status: z.enum(['open', 'approved']), notes: z.array(z.string()) }), {
      status: 'open',
      notes: [],
    });
    const session = client.session(uniqueId('cells'));

    // Act
    await session.key(review, { id: 42 }).set({ status: 'approved', notes: ['lgtm'] });
    const other = await session.key(review, { id: 'x7' }).get();
    const updated = await session.key(review, { id: 42 }).update((current) => ({ ...current, notes: [...current.notes, 'merged'] }));

    // Assess
    expect(review.address({ id: 42 })).toBe('review/42/state');
    expect(other).toEqual({ status: 'open', notes: [] });
    expect(updated).toEqual({ status: 'approved', notes: ['lgtm', 'merged'] });
    expect((await stored(session.id)).state).toEqual({ 'review/42/state': { status: 'approved', notes: ['lgtm', 'merged'] } });
    expect(() => session.key(review, { id: 'a/b' })).toThrow(/without "\/"/);
  });

  it('removes a key, which then reads as its default', async () => {
    const session = client.session(uniqueId('key-remove'));
    const key = session.key(settings());
    await key.set({ theme: 'dark', fontSize: 20, since: null });
    await key.remove();
    expect(await key.get()).toEqual({ theme: 'light', fontSize: 12, since: null });
  });
});

describe('fold keys', () => {
  it('loses no delta under 8 concurrent writers: re-reads and retries on 412', async () => {
    // Prepare
    const counter = client.fold('counter', z.number().int(), 0, (total, delta: number) => total + delta, { deltaSchema: z.number().int() });
    const sid = uniqueId('fold');
    // Eight clients, as eight workers would be.
    const writers = Array.from({ length: 8 }, () => createClient({ baseUrl: api.url, apiKey: 'dev-key' }).session(sid).fold(counter));

    // Act
    const results = await Promise.all(writers.map((writer, index) => writer.apply(index + 1)));

    // Assess: 1 + 2 + … + 8, and one version per delta, each a commit.
    const final = await client.session(sid).fold(counter).get();
    expect(final).toBe(36);
    expect(Math.max(...results)).toBe(36);
    const versions = await client.versions.list(sid);
    expect(versions.versions).toHaveLength(8);
    expect(versions.versions.every((version) => version.cause === 'commit')).toBe(true);
  });

  it('folds rich values and validates deltas before reading', async () => {
    const seen = client.fold(
      'seen/{day}',
      z.map(z.string(), z.date()),
      new Map<string, Date>(),
      (value, delta: { user: string; at: Date }) => new Map(value).set(delta.user, delta.at),
      { deltaSchema: z.object({ user: z.string().min(1), at: z.date() }) },
    );
    const session = client.session(uniqueId('fold-rich'));
    const day = session.fold(seen, { day: '2025-06-01' });

    await day.apply({ user: 'ann', at: new Date(1) });
    const both = await day.applyAll([
      { user: 'bob', at: new Date(2) },
      { user: 'ann', at: new Date(3) },
    ]);
    const refused = await day.apply({ user: '', at: new Date(4) }).catch((error: unknown) => error);

    expect(both).toEqual(
      new Map([
        ['ann', new Date(3)],
        ['bob', new Date(2)],
      ]),
    );
    expect(await day.get()).toEqual(both);
    expect(refused).toMatchObject({ code: 'schema_mismatch', phase: 'write' });
    expect((await client.versions.list(session.id)).versions).toHaveLength(2);
  });

  it('gives up after its attempts with the 412', async () => {
    // Prepare: every attempt loses, because another write lands between its read and its commit.
    const sid = uniqueId('give-up');
    const key = client.session(sid).key(client.key('contended', z.number(), 0));
    let attempts = 0;

    // Act
    const error = await key
      .update(
        async (current) => {
          attempts++;
          await client.state.patch(sid, { noise: attempts });
          return current + 1;
        },
        { conflictRetry: { attempts: 3, baseDelayMs: 1, maxDelayMs: 1 } },
      )
      .catch((thrown: unknown) => thrown);

    // Assess
    expect(error).toMatchObject({ code: 'version_mismatch', status: 412 });
    expect(attempts).toBe(3);
    expect((await stored(sid)).state).toEqual({ noise: 3 });
  });
});

/** Every request a counted client (below) sent, as `METHOD path`. */
const sent: string[] = [];

function newClient(apiKey = 'dev-key', options: { counted?: boolean } = {}): AgentStateClient {
  /** Records every request the client sends, in `sent`. */
  const countingFetch: typeof fetch = (input, init) => {
    const url = new URL(input instanceof Request ? input.url : String(input));
    sent.push(`${init?.method ?? 'GET'} ${url.pathname}`);
    return globalThis.fetch(input, init);
  };
  const client = createClient({
    baseUrl: api.url,
    apiKey,
    reconnect: { baseDelayMs: 50, maxDelayMs: 200 },
    ...(options.counted ? { fetch: countingFetch } : {}),
  });
  clients.push(client);
  return client;
}

interface Delivery<S> {
  next: S;
  prev: S;
  event: StateChangedEvent;
}

describe('onStateChanged', () => {
  it('delivers each new version with the decoded next and previous state', async () => {
    // Prepare
    const client = newClient();
    const sid = uniqueId('live');
    const chat = client.session(sid, { initialState: { turns: 0, at: new Date(0) } });
    const seen: Delivery<{ turns: number; at: Date }>[] = [];
    const subscription = chat.onStateChanged((next, prev, event) => void seen.push({ next, prev, event }));
    await subscription.ready;

    // Act
    await chat.setState({ turns: 1 });
    await chat.setState({ at: new Date(5_000) });
    await client.state.patch(sid, { turns: 2 }, { agentId: 'planner' });
    await eventually('three events', () => seen.length >= 3);

    // Assess
    expect(seen.map(({ event }) => event.id)).toEqual([`${sid}:1`, `${sid}:2`, `${sid}:3`]);
    // prev of the first version is the initial state: nothing had been written.
    expect(seen[0]).toMatchObject({ next: { turns: 1, at: new Date(0) }, prev: { turns: 0, at: new Date(0) } });
    expect(seen[1]).toMatchObject({ next: { turns: 1, at: new Date(5_000) }, prev: { turns: 1, at: new Date(0) } });
    expect(seen[2]?.next).toEqual({ turns: 2, at: new Date(5_000) });
    expect(seen[2]?.event).toMatchObject({
      type: 'state.changed',
      sessionId: sid,
      version: 3,
      prevVersion: 2,
      cause: 'patch',
      author: 'planner',
      node: 'root',
    });
    expect(subscription.lastVersion).toBe(3);
    subscription();
  });

  it('catches up from history with `since`, then goes on live', async () => {
    const client = newClient();
    const sid = uniqueId('since');
    const chat = client.session<{ n: number } | null>(sid);
    for (const n of [1, 2, 3]) await chat.replaceState({ n });
    const versions: number[] = [];

    const subscription = chat.onStateChanged((_next, _prev, event) => void versions.push(event.version), { since: 1 });
    await subscription.ready;
    await chat.replaceState({ n: 4 });
    await eventually('version 4', () => versions.includes(4));

    expect(versions).toEqual([2, 3, 4]);
    subscription.unsubscribe();
  });

  it('resumes after the connection drops: every version once, in order, none lost while disconnected', async () => {
    // Prepare
    const client = newClient();
    const writer = newClient();
    const sid = uniqueId('reconnect');
    const deliveries: Delivery<{ n: number } | null>[] = [];
    const subscription = client
      .session<{ n: number } | null>(sid)
      .onStateChanged((next, prev, event) => void deliveries.push({ next, prev, event }));
    await subscription.ready;
    await writer.state.replace(sid, { n: 1 });
    await writer.state.replace(sid, { n: 2 });
    await eventually('two events', () => deliveries.length >= 2);

    // Act: drop the socket, write while it is down, write again after it is back.
    client.live.terminate({ reconnectDelayMs: 2_500 });
    await eventually('the drop', () => client.live.status === 'reconnecting');
    for (const n of [3, 4, 5]) await writer.state.replace(sid, { n });
    expect(client.live.status).toBe('reconnecting');
    await eventually('the reconnect', () => client.live.connects === 2 && client.live.status === 'open');
    await writer.state.replace(sid, { n: 6 });
    await eventually('six events', () => deliveries.length >= 6);
    // Anything late (a duplicate) would arrive within this pause.
    await new Promise((resolve) => setTimeout(resolve, 300));

    // Assess
    expect(deliveries.map(({ event }) => event.version)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(deliveries.map(({ next }) => next?.n)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(deliveries.map(({ prev }) => prev?.n ?? null)).toEqual([null, 1, 2, 3, 4, 5]);
    // The versions read back from history have the event shape of live ones.
    expect(deliveries[3]?.event).toEqual({
      id: `${sid}:4`,
      type: 'state.changed',
      sessionId: sid,
      node: 'root',
      version: 4,
      prevVersion: 3,
      cause: 'replace',
      author: null,
      decisionId: null,
      next: { n: 4 },
      prev: { n: 3 },
      agent: null,
      occurredAt: expect.any(String),
    });
    subscription();
  });

  it('stays exact while the connection drops again and again under a steady writer', async () => {
    const client = newClient();
    const writer = newClient();
    const sid = uniqueId('drops');
    const versions: number[] = [];
    const subscription = client.session(sid).onStateChanged((_next, _prev, event) => void versions.push(event.version));
    await subscription.ready;

    const writes = (async () => {
      for (let n = 1; n <= 20; n++) await writer.state.replace(sid, { n });
    })();
    for (let drop = 0; drop < 3; drop++) {
      await new Promise((resolve) => setTimeout(resolve, 150));
      client.live.terminate();
    }
    await writes;
    await eventually('twenty events', () => versions.length >= 20, 15_000);
    await new Promise((resolve) => setTimeout(resolve, 300));

    expect(versions).toEqual(Array.from({ length: 20 }, (_, index) => index + 1));
    expect(client.live.connects).toBeGreaterThanOrEqual(2);
    subscription();
  });

  it('keeps other listeners going when one unsubscribes or throws', async () => {
    const client = newClient();
    const sid = uniqueId('listeners');
    const chat = client.session<{ n: number } | null>(sid);
    const first: number[] = [];
    const second: number[] = [];
    const errors: unknown[] = [];
    const one = chat.onStateChanged((_next, _prev, event) => void first.push(event.version));
    const two = chat.onStateChanged(
      (_next, _prev, event) => {
        second.push(event.version);
        throw new Error('listener bug');
      },
      { onError: (error) => errors.push(error) },
    );
    await Promise.all([one.ready, two.ready]);

    await chat.replaceState({ n: 1 });
    await eventually('both listeners', () => first.length === 1 && second.length === 1);
    one();
    await chat.replaceState({ n: 2 });
    await eventually('the second listener', () => second.length === 2);
    await new Promise((resolve) => setTimeout(resolve, 200));

    expect(first).toEqual([1]);
    expect(second).toEqual([1, 2]);
    expect(errors).toHaveLength(2);
    two();
  });

  it('refuses a bad key: ready rejects with 401', async () => {
    const client = newClient('not-a-key');
    const subscription = client.session(uniqueId('refused')).onStateChanged(() => undefined, { since: 0, onError: () => undefined });
    await expect(subscription.ready).rejects.toMatchObject({ code: 'unauthorized', status: 401 });
  });
});

// From large-state.test.ts, a file of its own before, which started a server as this one does: its
// test on this file's, on a session of its own, its counted client made by newClient above. Last
// here, so that its 4 MiB state comes after the other tests' writes on this file's DynamoDB Local.
/**
 * Following a 4 MiB state with `onStateChanged`: its events arrive truncated (API.md section
 * 9) with the change as a merge patch and as RFC 6902 operations, which the client applies to
 * the state it knows, so a follower reads a version only when an event cannot tell it the
 * change (or it does not know the state before). Against the server as `npm start` runs it.
 */
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
    const follower = newClient('dev-key', { counted: true });
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
