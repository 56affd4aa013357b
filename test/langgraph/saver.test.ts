import { createClient } from '@agentstate/client';
import { AgentStateSaver } from '@agentstate/langgraph';
import { Annotation, END, START, StateGraph } from '@langchain/langgraph';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkpoint } from '../helpers/checkpoints.js';
import { type RunningApi, startApi } from '../helpers/e2e.js';

/**
 * What the conformance suite does not try: writes that reach agentstate before their
 * checkpoint (as LangGraph's loop sends them), savers with different prefixes on one tenant,
 * ids agentstate would refuse as they are, and a bad prefix.
 */
let api: RunningApi;

beforeAll(async () => {
  api = await startApi();
});
afterAll(async () => {
  await api?.stop();
});

const saverWith = (prefix?: string) => new AgentStateSaver({ baseUrl: api.url, apiKey: 'dev-key', ...(prefix ? { prefix } : {}) });
const metadata = { source: 'loop' as const, step: 0, parents: {} };

describe('AgentStateSaver', () => {
  it('keeps writes sent before their checkpoint is put, first and later checkpoints alike', async () => {
    // Prepare
    const saver = saverWith('early');
    const thread = { configurable: { thread_id: 'early-writes', checkpoint_ns: '' } };
    const first = checkpoint(1, { count: 1 });
    const second = checkpoint(2, { count: 2 });

    // Act: the writes of each checkpoint leave before its put, as LangGraph's loop sends them.
    const firstWrites = saver.putWrites({ configurable: { ...thread.configurable, checkpoint_id: first.id } }, [['count', 10]], 'task-a');
    const firstConfig = await saver.put(thread, first, metadata, { count: 1 });
    const secondWrites = saver.putWrites({ configurable: { ...thread.configurable, checkpoint_id: second.id } }, [['count', 20]], 'task-b');
    await saver.put(firstConfig, second, { ...metadata, step: 1 }, { count: 2 });
    await Promise.all([firstWrites, secondWrites]);

    // Assess
    const atFirst = await saver.getTuple({ configurable: { ...thread.configurable, checkpoint_id: first.id } });
    const latest = await saver.getTuple(thread);
    expect(atFirst?.pendingWrites).toEqual([['task-a', 'count', 10]]);
    expect(latest?.checkpoint.id).toBe(second.id);
    expect(latest?.checkpoint.channel_values).toEqual({ count: 2 });
    expect(latest?.pendingWrites).toEqual([['task-b', 'count', 20]]);
  });

  it('keeps savers with different prefixes apart on one tenant, the same thread ids in both', async () => {
    // Prepare
    const blue = saverWith('blue');
    const green = saverWith('green');
    const thread = { configurable: { thread_id: 'shared-id', checkpoint_ns: '' } };

    // Act
    await blue.put(thread, checkpoint(1, { colour: 'blue' }), metadata, { colour: 1 });
    await green.put(thread, checkpoint(2, { colour: 'green' }), metadata, { colour: 2 });
    const blueList = [];
    for await (const tuple of blue.list({})) blueList.push(tuple);
    await green.deleteThread('shared-id');

    // Assess
    expect(blueList.map((tuple) => tuple.checkpoint.channel_values)).toEqual([{ colour: 'blue' }]);
    expect((await blue.getTuple(thread))?.checkpoint.channel_values).toEqual({ colour: 'blue' });
    expect(await green.getTuple(thread)).toBeUndefined();
  });

  it('takes thread ids, namespaces and checkpoint ids that agentstate ids cannot hold as they are', async () => {
    // Prepare
    const saver = saverWith('names');
    const long = 'x'.repeat(200);
    const threads = ['chat/42 für Zoë', long];

    // Act
    for (const thread_id of threads) {
      const config = { configurable: { thread_id, checkpoint_ns: 'tools:search|1' } };
      const made = checkpoint(1, { thread_id });
      made.id = 'root';
      await saver.put(config, made, metadata, { thread_id: 1 });
    }

    // Assess: each reads back under its own names, and its session is there for any client.
    const client = createClient({ baseUrl: api.url, apiKey: 'dev-key' });
    for (const thread_id of threads) {
      const tuple = await saver.getTuple({ configurable: { thread_id, checkpoint_ns: 'tools:search|1' } });
      expect(tuple?.config.configurable).toEqual({ thread_id, checkpoint_ns: 'tools:search|1', checkpoint_id: 'root' });
      expect(tuple?.checkpoint.channel_values).toEqual({ thread_id });
      await expect(client.sessions.get(await saver.sessionIdOf(thread_id, 'tools:search|1'))).resolves.toBeDefined();
    }
    expect(await saver.sessionIdOf('chat/42 für Zoë', 'tools:search|1')).toBe('names@chat~2F42~20f~C3~BCr~20Zo~C3~AB~~tools:search~7C1');
    expect(await saver.sessionIdOf(long)).toMatch(/^names@~h[0-9a-f]{40}$/);
  });

  it('refuses a prefix that could name another saver’s sessions, before any request', () => {
    for (const prefix of ['a@b', 'a~b', 'x'.repeat(65), 'with space']) {
      expect(() => saverWith(prefix)).toThrow(TypeError);
    }
  });

  it('sends a run’s writes to its session one at a time: none that lands overlaps another, over a 20-step graph', async () => {
    // Prepare: a client that records when each write to agentstate was in flight, and how it ended.
    const writes: Array<{ start: number; end: number; status: number }> = [];
    const recording: typeof fetch = async (input, init) => {
      const start = performance.now();
      const response = await fetch(input, init);
      if (init?.method === 'POST' || init?.method === 'PATCH') writes.push({ start, end: performance.now(), status: response.status });
      return response;
    };
    const saver = new AgentStateSaver({ client: createClient({ baseUrl: api.url, apiKey: 'dev-key', fetch: recording }), prefix: 'turns' });
    const State = Annotation.Root({ n: Annotation<number> });
    let builder = new StateGraph(State) as unknown as StateGraph<typeof State.spec>;
    for (let step = 1; step <= 20; step++) builder = builder.addNode(`s${step}`, (state) => ({ n: state.n + 1 })) as typeof builder;
    builder = builder.addEdge(START, 's1' as never) as typeof builder;
    for (let step = 1; step < 20; step++) builder = builder.addEdge(`s${step}` as never, `s${step + 1}` as never) as typeof builder;
    const graph = builder.addEdge('s20' as never, END).compile({ checkpointer: saver });

    // Act: LangGraph sends a step's writes while the next checkpoint's put is under way.
    const out = await graph.invoke({ n: 0 }, { configurable: { thread_id: 'twenty' } });

    // Assess: every write that landed (2xx: 22 puts, a step's writes, the input's) ran alone, so none raced another for the session's
    // next version (a lost race is a read again and a backoff on the server); writes sent before
    // their checkpoint existed answer 404 without writing, and are sent again in turn.
    expect(out.n).toBe(20);
    const landed = writes.filter((write) => write.status < 300).sort((a, b) => a.start - b.start);
    expect(landed.length).toBeGreaterThanOrEqual(42);
    const overlapping = landed.filter((write, index) => index > 0 && write.start < (landed[index - 1] as { end: number }).end);
    expect(overlapping).toEqual([]);
  });
});
