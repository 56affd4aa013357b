import { createClient } from '@agentstate/client';
import { AgentStateSaver } from '@agentstate/langgraph';
import { type BaseCheckpointSaver, type CheckpointTuple, MemorySaver } from '@langchain/langgraph-checkpoint';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkpoint } from '../helpers/checkpoints.js';
import { type RunningApi, startApi } from '../helpers/e2e.js';

/**
 * What `list` reads (issue 36: `list` ≤ 2 HTTP requests a page, whatever its limit): the nodes and
 * the pending writes of the checkpoints it yields, and not those of every checkpoint of the
 * thread, which grow with the thread (past 6 MB the answer would not fit a Lambda's). Real HTTP on
 * DynamoDB Local; the saver's client counts the requests it sends and the bytes it receives, the
 * IAM gate the items DynamoDB reads. A thread's namespace is named (`checkpoint_ns`), so no
 * request goes to find its others.
 */
let api: RunningApi;

beforeAll(async () => {
  api = await startApi({}, { everyCallThroughGate: true });
});
afterAll(async () => {
  await api?.stop();
});

const metadata = { source: 'loop' as const, step: 0, parents: {} };
/** Each checkpoint's pending write: some 20 KB, so 40 of them are 800 KB. */
const WRITE = 'w'.repeat(20_000);
const CHECKPOINTS = 40;

interface Traffic {
  requests: string[];
  bytes: number;
}

function recordingSaver(prefix: string): { traffic: Traffic; saver: AgentStateSaver } {
  const traffic: Traffic = { requests: [], bytes: 0 };
  const recording: typeof fetch = async (input, init) => {
    const response = await fetch(input, init);
    const url = new URL(String(input));
    traffic.requests.push(`${init?.method ?? 'GET'} ${url.pathname.replace(/^\/v1\/sessions\/[^/]+/, '…')}${url.search}`);
    const body = await response.arrayBuffer();
    traffic.bytes += body.byteLength;
    return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
  };
  return {
    traffic,
    saver: new AgentStateSaver({ client: createClient({ baseUrl: api.url, apiKey: 'dev-key', fetch: recording }), prefix }),
  };
}

/**
 * A thread of `count` checkpoints, each with one pending write of `WRITE`; their ids, oldest
 * first. `longIds`: ids of 105 characters (in step order) instead of uuid6 ones.
 */
async function threadWithWrites(saver: AgentStateSaver, thread: string, count = CHECKPOINTS, longIds = false): Promise<string[]> {
  let config = { configurable: { thread_id: thread, checkpoint_ns: '' } } as { configurable: Record<string, unknown> };
  const ids: string[] = [];
  for (let step = 1; step <= count; step++) {
    const made = checkpoint(step, { count: step });
    if (longIds) made.id = `${'c'.repeat(100)}-${String(step).padStart(4, '0')}`;
    config = (await saver.put(config, made, { ...metadata, step }, { count: step })) as typeof config;
    await saver.putWrites(config, [['count', `${step}:${WRITE}`]], `task-${step}`);
    ids.push(made.id);
  }
  return ids;
}

/**
 * The thread of `CHECKPOINTS` checkpoints with their writes that the tests below list (saver
 * prefix `list-reads`, thread `forty`): none of them writes to it, so it is put once, by whichever
 * runs first (a test run alone with -t puts it itself), and each lists it with a saver of its own
 * that counts only its own requests. Its checkpoints' ids, oldest first.
 */
let fortyPut: Promise<string[]> | undefined;
const FORTY = { prefix: 'list-reads', thread: 'forty' };
const forty = (saver: AgentStateSaver) => {
  fortyPut ??= threadWithWrites(saver, FORTY.thread);
  return fortyPut;
};
const fortyConfig = { configurable: { thread_id: FORTY.thread, checkpoint_ns: '' } };

async function listed(saver: AgentStateSaver, ...args: Parameters<AgentStateSaver['list']>): Promise<CheckpointTuple[]> {
  const tuples: CheckpointTuple[] = [];
  for await (const tuple of saver.list(...args)) tuples.push(tuple);
  return tuples;
}

const stepOf = (tuple: CheckpointTuple) => Number(String(tuple.pendingWrites?.[0]?.[2]).split(':')[0]);

describe("AgentStateSaver.list reads the listed checkpoints' writes only", () => {
  it('list(limit 3) of a 40-checkpoint thread: 2 requests, the 3 newest with their writes, not the 800 KB of all of them', async () => {
    // Prepare
    const { traffic, saver } = recordingSaver(FORTY.prefix);
    const ids = await forty(saver);
    traffic.requests = [];
    traffic.bytes = 0;

    // Act
    const tuples = await listed(saver, fortyConfig, { limit: 3 });

    // Assert
    expect(tuples.map((tuple) => tuple.checkpoint.id)).toEqual(ids.slice(-3).reverse());
    expect(tuples.map(stepOf)).toEqual([40, 39, 38]);
    expect(tuples[0]?.pendingWrites).toEqual([['task-40', 'count', `40:${WRITE}`]]);
    expect(traffic.requests).toHaveLength(2);
    // The 3 writes and the states, not the 40 writes.
    expect(traffic.bytes).toBeLessThan(10 * WRITE.length);
  });

  it('list without a limit yields every checkpoint with its own write: a page of its nodes and one page of history with the writes', async () => {
    // Prepare
    const { traffic, saver } = recordingSaver(FORTY.prefix);
    const ids = await forty(saver);
    traffic.requests = [];

    // Act
    const tuples = await listed(saver, fortyConfig);

    // Assert
    expect(tuples.map((tuple) => tuple.checkpoint.id)).toEqual([...ids].reverse());
    expect(tuples.map(stepOf)).toEqual(Array.from({ length: CHECKPOINTS }, (_, index) => CHECKPOINTS - index));
    expect(traffic.requests).toHaveLength(2);
  });

  it('a checkpoint far back (before, limit 1) comes with its write, in 2 requests', async () => {
    // Prepare
    const { traffic, saver } = recordingSaver(FORTY.prefix);
    const ids = await forty(saver);
    traffic.requests = [];

    // Act
    const tuples = await listed(saver, fortyConfig, { limit: 1, before: { configurable: { checkpoint_id: ids[2] } } });

    // Assert
    expect(tuples.map((tuple) => tuple.checkpoint.id)).toEqual([ids[1]]);
    expect(tuples[0]?.pendingWrites).toEqual([['task-2', 'count', `2:${WRITE}`]]);
    expect(traffic.requests).toHaveLength(2);
  });

  it('a filter that matches only far back reads batches that double, not a page and a state per checkpoint passed', async () => {
    // Prepare
    const { traffic, saver } = recordingSaver(FORTY.prefix);
    const ids = await forty(saver);
    traffic.requests = [];

    // Act
    const tuples = await listed(saver, fortyConfig, { limit: 1, filter: { step: 1 } });

    // Assert
    expect(tuples.map((tuple) => tuple.checkpoint.id)).toEqual([ids[0]]);
    expect(tuples[0]?.pendingWrites).toEqual([['task-1', 'count', `1:${WRITE}`]]);
    // Batches of 1, 2, 4, 8, 16 and 32 checkpoints: a page of nodes and a read of states each.
    expect(traffic.requests.length).toBeLessThanOrEqual(12);
  });

  it('cuts a batch of long checkpoint ids to what one request line takes, each batch with its own writes', async () => {
    // Prepare: 80 ids of 105 characters are 8,640 bytes of notesOf, over the 7,000 one request carries.
    const { traffic, saver } = recordingSaver('list-long');
    const ids = await threadWithWrites(saver, 'long', 80, true);
    traffic.requests = [];

    // Act
    const tuples = await listed(saver, { configurable: { thread_id: 'long', checkpoint_ns: '' } });

    // Assert
    expect(tuples.map((tuple) => tuple.checkpoint.id)).toEqual([...ids].reverse());
    expect(tuples.map(stepOf)).toEqual(Array.from({ length: 80 }, (_, index) => 80 - index));
    expect(traffic.requests).toHaveLength(3);
    for (const request of traffic.requests) expect(request.length).toBeLessThan(7_500);
  });

  it('list(limit 10) of a thread of 3,000 checkpoints reads about 10 nodes, in 2 requests, not the thread', async () => {
    // Prepare: 2,990 checkpoint nodes appended 50 to a request (ids below uuid6 ones; no state of
    // their own, so no list yields them), then 10 checkpoints the saver puts, each with its write.
    const { traffic, saver } = recordingSaver('list-long-thread');
    const sid = await saver.sessionIdOf('long-thread');
    for (let chain = 0; chain < 2_990 / 50; chain++) {
      const messages = Array.from({ length: 50 }, (_, index) => ({
        id: `00000000-${String(chain * 50 + index).padStart(5, '0')}`,
        role: 'checkpoint',
        content: 'an older checkpoint',
      }));
      const appended = await fetch(`${api.url}/v1/sessions/${sid}/messages`, {
        method: 'POST',
        headers: { authorization: 'Bearer dev-key', 'content-type': 'application/json' },
        body: JSON.stringify({ messages }),
      });
      expect(appended.status).toBe(201);
    }
    const ids = await threadWithWrites(saver, 'long-thread', 10);
    traffic.requests = [];
    const before = api.itemsRead();

    // Act
    const tuples = await listed(saver, { configurable: { thread_id: 'long-thread', checkpoint_ns: '' } }, { limit: 10 });

    // Assert
    const itemsRead = api.itemsRead() - before;
    expect(tuples.map((tuple) => tuple.checkpoint.id)).toEqual([...ids].reverse());
    expect(tuples.map(stepOf)).toEqual([10, 9, 8, 7, 6, 5, 4, 3, 2, 1]);
    expect(traffic.requests).toHaveLength(2);
    // The tip, 11 nodes' index keys, 10 versions and their notes: not the 3,000 nodes of the tree.
    expect(itemsRead).toBeLessThan(100);
  });

  it('lists checkpoint ids the saver escapes (a space, a slash, a letter outside ASCII) in the order MemorySaver does', async () => {
    // Prepare: the same checkpoints put in both savers; each id's node is escaped but `ab`, `a-b`, `a`, `b`.
    const { saver } = recordingSaver('list-escaped');
    const memory = new MemorySaver();
    const odd = ['a b', 'ab', 'a-b', 'Zoë', 'a/b', 'a', 'b', 'b~c', 'ä'];
    for (const target of [saver, memory] as BaseCheckpointSaver[]) {
      let config = { configurable: { thread_id: 'escaped', checkpoint_ns: '' } } as { configurable: Record<string, unknown> };
      for (const [step, id] of odd.entries()) {
        const made = checkpoint(step + 1, { count: step });
        made.id = id;
        config = (await target.put(config, made, { ...metadata, step }, { count: step + 1 })) as typeof config;
      }
    }
    const thread = { configurable: { thread_id: 'escaped', checkpoint_ns: '' } };
    const ask: Array<Parameters<AgentStateSaver['list']>[1]> = [
      {},
      { limit: 2 },
      { limit: 4 },
      { before: { configurable: { checkpoint_id: 'b' } } },
      { before: { configurable: { checkpoint_id: 'Zoë' } }, limit: 3 },
      { before: { configurable: { checkpoint_id: 'c' } }, limit: 1 },
    ];

    for (const options of ask) {
      // Act
      const ours = await listed(saver, thread, options);
      const theirs: CheckpointTuple[] = [];
      for await (const tuple of memory.list(thread, options)) theirs.push(tuple);

      // Assert
      expect(ours.map((tuple) => tuple.checkpoint.id)).toEqual(theirs.map((tuple) => tuple.checkpoint.id));
    }
  });

  it("never shows a thread another tenant's saver wrote", async () => {
    // Prepare
    const { saver } = recordingSaver(FORTY.prefix);
    await forty(saver);
    const other = new AgentStateSaver({ client: createClient({ baseUrl: api.url, apiKey: 'other-key' }), prefix: FORTY.prefix });

    // Act
    const theirs = await listed(other, { configurable: { thread_id: FORTY.thread } }, { limit: 5 });

    // Assert
    expect(theirs).toEqual([]);
  });
});
