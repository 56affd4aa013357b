import { type AgentStateApi, createClient } from '@agentstate/client';
import { AgentStateSaver } from '@agentstate/langgraph';
import type { RunnableConfig } from '@langchain/core/runnables';
import { Command } from '@langchain/langgraph';
import type { CheckpointTuple } from '@langchain/langgraph-checkpoint';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tripPlanner } from '../../examples/langgraph.js';
import { checkpoint } from '../helpers/checkpoints.js';
import { type RunningApi, startApi } from '../helpers/e2e.js';

/**
 * A thread's lifetime through the saver (API.md section 12 underneath): `copyThread`,
 * `prune` (keep the latest checkpoints, or delete) and the `ttl` option, on a real server and
 * DynamoDB Local, with subgraph namespaces, pending writes and a real StateGraph going on
 * from a copy and from a pruned thread.
 */
let api: RunningApi;
let agentstate: AgentStateApi;

beforeAll(async () => {
  api = await startApi();
  agentstate = createClient({ baseUrl: api.url, apiKey: 'dev-key' });
});
afterAll(async () => {
  await api?.stop();
});

const saverWith = (prefix: string, options: { ttl?: { defaultTtl?: number }; client?: AgentStateApi } = {}) =>
  new AgentStateSaver({ baseUrl: api.url, apiKey: 'dev-key', prefix, ...options });
const metadata = (step: number) => ({ source: 'loop' as const, step, parents: {} });

/** A thread of three checkpoints in its own namespace and two in a subgraph's, with pending writes. */
async function threadWithSubgraph(saver: AgentStateSaver, thread: string): Promise<void> {
  let config: RunnableConfig = { configurable: { thread_id: thread, checkpoint_ns: '' } };
  for (const step of [1, 2, 3]) config = await saver.put(config, checkpoint(step, { count: step }), metadata(step), { count: step });
  await saver.putWrites(config, [['count', 30]], 'task-main');
  let child: RunnableConfig = { configurable: { thread_id: thread, checkpoint_ns: 'child:1' } };
  for (const step of [4, 5]) child = await saver.put(child, checkpoint(step, { inner: step }), metadata(step), { inner: step });
  await saver.putWrites(child, [['inner', 50]], 'task-child');
}

async function listed(saver: AgentStateSaver, thread: string, checkpointNs?: string): Promise<CheckpointTuple[]> {
  const tuples: CheckpointTuple[] = [];
  const configurable = { thread_id: thread, ...(checkpointNs === undefined ? {} : { checkpoint_ns: checkpointNs }) };
  for await (const tuple of saver.list({ configurable })) tuples.push(tuple);
  return tuples;
}

/** What a tuple says, without the thread it was read in. */
function contentOf(tuple: CheckpointTuple | undefined) {
  return {
    id: tuple?.checkpoint.id,
    ns: tuple?.config.configurable?.checkpoint_ns,
    values: tuple?.checkpoint.channel_values,
    writes: tuple?.pendingWrites,
    parent: tuple?.parentConfig?.configurable?.checkpoint_id,
  };
}

describe('copyThread', () => {
  it('copies every checkpoint and write of every namespace; the copy names its own thread and is independent', async () => {
    // Prepare
    const saver = saverWith('copy');
    await threadWithSubgraph(saver, 'source');

    // Act
    await saver.copyThread('source', 'target');
    const later = checkpoint(9, { count: 9 });
    const latestOfCopy = await saver.getTuple({ configurable: { thread_id: 'target', checkpoint_ns: '' } });
    await saver.put(latestOfCopy?.config ?? {}, later, metadata(9), { count: 9 });

    // Assess: every checkpoint of the source is in the copy, read as the copy's.
    const source = await listed(saver, 'source');
    const copied = (await listed(saver, 'target')).filter((tuple) => tuple.checkpoint.id !== later.id);
    expect(source).toHaveLength(5);
    expect(copied.map(contentOf)).toEqual(source.map(contentOf));
    expect(new Set(copied.map((tuple) => tuple.config.configurable?.thread_id))).toEqual(new Set(['target']));
    expect(new Set(copied.map((tuple) => tuple.parentConfig?.configurable?.thread_id).filter(Boolean))).toEqual(new Set(['target']));
    const child = await saver.getTuple({ configurable: { thread_id: 'target', checkpoint_ns: 'child:1' } });
    expect(contentOf(child)).toMatchObject({ values: { inner: 5 }, writes: [['task-child', 'inner', 50]] });
    // The copy's registry names its own subgraph session: deleting the source leaves the copy whole.
    await saver.deleteThread('source');
    expect(await listed(saver, 'source')).toEqual([]);
    expect(await listed(saver, 'target')).toHaveLength(6);
    expect((await saver.getTuple({ configurable: { thread_id: 'target', checkpoint_ns: '' } }))?.checkpoint.id).toBe(later.id);
  });

  it('refuses a target that has checkpoints, copies nothing from a thread that has none, and names a hashed copy by its metadata', async () => {
    // Prepare
    const saver = saverWith('copy-edges');
    await Promise.all([threadWithSubgraph(saver, 'a'), threadWithSubgraph(saver, 'b')]);
    const longName = `long-${'x'.repeat(200)}`;

    // Act
    const refused = await saver.copyThread('a', 'b').catch((error: Error) => error.message);
    await saver.copyThread('never-written', 'still-empty');
    await saver.copyThread('a', longName);

    // Assess
    expect(refused).toMatch(/has checkpoints/);
    expect(await listed(saver, 'still-empty')).toEqual([]);
    const everyThread: CheckpointTuple[] = [];
    for await (const tuple of saver.list({})) everyThread.push(tuple);
    const ofLong = everyThread.filter((tuple) => tuple.config.configurable?.thread_id === longName);
    expect(ofLong.map(contentOf).sort(byId)).toEqual((await listed(saver, 'a')).map(contentOf).sort(byId));
  });

  it('copies one thread to 30 threads at once, each copy whole', async () => {
    // Prepare
    const saver = saverWith('copy-many');
    await threadWithSubgraph(saver, 'origin');
    const targets = Array.from({ length: 30 }, (_, index) => `copy-${index}`);

    // Act
    const answers = await Promise.allSettled(targets.map((target) => saver.copyThread('origin', target)));

    // Assess
    expect(answers.filter((answer) => answer.status === 'rejected')).toEqual([]);
    // (The copies read side by side, after the copying: nothing writes meanwhile.)
    const [origin, ...copies] = await Promise.all(
      ['origin', ...targets].map(async (thread) => (await listed(saver, thread)).map(contentOf)),
    );
    copies.forEach((copy, index) => {
      expect(copy, targets[index]).toEqual(origin);
    });
  });

  it('lets a real graph go on from a copy while the source stays where it was', async () => {
    // Prepare: a run that stops at the interrupt.
    const saver = saverWith('copy-graph');
    const graph = tripPlanner(saver);
    await graph.invoke({ destination: 'Lisbon', nights: 3 }, { configurable: { thread_id: 'trip' } });

    // Act
    await saver.copyThread('trip', 'trip-copy');
    const done = await graph.invoke(new Command({ resume: 'yes' }), { configurable: { thread_id: 'trip-copy' } });

    // Assess
    expect(done).toMatchObject({ approved: true, booking: 'Lisbon/3' });
    expect((await graph.getState({ configurable: { thread_id: 'trip' } })).next).toEqual(['review']);
    expect((await graph.getState({ configurable: { thread_id: 'trip-copy' } })).next).toEqual([]);
  });
});

describe('prune', () => {
  it('keep_latest leaves each namespace its latest checkpoint with its writes, and a real graph goes on from it', async () => {
    // Prepare
    const saver = saverWith('prune');
    await threadWithSubgraph(saver, 'long');
    const latestBefore = await saver.getTuple({ configurable: { thread_id: 'long', checkpoint_ns: '' } });
    const childBefore = await saver.getTuple({ configurable: { thread_id: 'long', checkpoint_ns: 'child:1' } });
    const graph = tripPlanner(saver);
    await graph.invoke({ destination: 'Porto', nights: 2 }, { configurable: { thread_id: 'trip' } });
    const historyBefore = [];
    for await (const snapshot of graph.getStateHistory({ configurable: { thread_id: 'trip' } })) historyBefore.push(snapshot);

    // Act
    await saver.prune(['long', 'trip']);

    // Assess
    const left = await listed(saver, 'long');
    expect(left.map(contentOf).sort(byId)).toEqual([contentOf(latestBefore), contentOf(childBefore)].sort(byId));
    expect(contentOf(latestBefore)).toMatchObject({ values: { count: 3 }, writes: [['task-main', 'count', 30]] });
    expect(contentOf(latestBefore).parent).toEqual(expect.any(String));
    expect(historyBefore.length).toBeGreaterThan(2);
    const history = [];
    for await (const snapshot of graph.getStateHistory({ configurable: { thread_id: 'trip' } })) history.push(snapshot);
    expect(history).toHaveLength(1);
    expect(history[0]?.next).toEqual(['review']);
    const done = await graph.invoke(new Command({ resume: 'yes' }), { configurable: { thread_id: 'trip' } });
    expect(done).toMatchObject({ approved: true, booking: 'Porto/2' });
    // Nothing of the scratch thread the prune wrote through is left.
    const sessions = await agentstate.sessions.list({ prefix: 'prune@' });
    expect(sessions.sessions.map((session) => session.sessionId).filter((id) => id.includes('prune~'))).toEqual([]);
  });

  it('delete removes the threads, every namespace of them', async () => {
    // Prepare
    const saver = saverWith('prune-delete');
    await threadWithSubgraph(saver, 'gone');
    await threadWithSubgraph(saver, 'kept');

    // Act
    await saver.prune(['gone'], { strategy: 'delete' });

    // Assess
    expect(await listed(saver, 'gone')).toEqual([]);
    expect(await listed(saver, 'kept')).toHaveLength(5);
    await expect(saver.prune(['kept'], { strategy: 'drop' as never })).rejects.toThrow(/strategy/);
  });

  it('finishes a prune that stopped after deleting the thread, run again', async () => {
    // Prepare: a client whose first copy of a session fails, as if the process died there.
    const flaky = createClient({ baseUrl: api.url, apiKey: 'dev-key' });
    const copy = flaky.sessions.copy;
    let failed = false;
    flaky.sessions.copy = async (...args) => {
      if (!failed) {
        failed = true;
        throw new Error('the process stopped here');
      }
      return copy(...args);
    };
    const saver = saverWith('prune-resume', { client: flaky });
    await threadWithSubgraph(saver, 'crashing');
    const latest = await saver.getTuple({ configurable: { thread_id: 'crashing', checkpoint_ns: '' } });

    // Act
    const first = await saver.prune(['crashing']).catch((error: Error) => error.message);
    const between = await listed(saver, 'crashing');
    await saver.prune(['crashing']);

    // Assess
    expect(first).toBe('the process stopped here');
    expect(between).toEqual([]);
    const left = await listed(saver, 'crashing');
    expect(left).toHaveLength(2);
    expect(contentOf(await saver.getTuple({ configurable: { thread_id: 'crashing', checkpoint_ns: '' } }))).toEqual(contentOf(latest));
  });
});

describe('ttl', () => {
  it('gives every session of a thread, and of its copies, an idle expiry of defaultTtl minutes', async () => {
    // Prepare
    const saver = saverWith('ttl', { ttl: { defaultTtl: 90 } });
    await threadWithSubgraph(saver, 'short-lived');

    // Act
    await saver.copyThread('short-lived', 'short-copy');

    // Assess
    for (const [thread, ns] of [
      ['short-lived', ''],
      ['short-lived', 'child:1'],
      ['short-copy', ''],
      ['short-copy', 'child:1'],
    ] as const) {
      const session = await agentstate.sessions.get(await saver.sessionIdOf(thread, ns));
      expect(session).toMatchObject({ ttlSeconds: 5400 });
      expect(Date.parse(session.expiresAt as string) - Date.now()).toBeGreaterThan(5300_000);
    }
    expect(() => saverWith('ttl-bad', { ttl: { defaultTtl: 0 } })).toThrow(/ttl must be/);
  });
});

function byId(a: { id?: string }, b: { id?: string }): number {
  return (a.id ?? '').localeCompare(b.id ?? '');
}
