import { createClient } from '@agentstate/client';
import { AgentStateSaver } from '@agentstate/langgraph';
import type { RunnableConfig } from '@langchain/core/runnables';
import { Annotation, Command, END, interrupt, Send, START, StateGraph } from '@langchain/langgraph';
import {
  type BaseCheckpointSaver,
  type Checkpoint,
  type CheckpointMetadata,
  emptyCheckpoint,
  MemorySaver,
  uuid6,
} from '@langchain/langgraph-checkpoint';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningApi, startApi } from '../helpers/e2e.js';

/**
 * What LangGraph.js's own test files found when run on AgentStateSaver instead of MemorySaver
 * (docs/langgraph.md, "LangGraph's own tests"): each scenario runs on both savers, and ours must
 * answer as MemorySaver does.
 */
let api: RunningApi;
let savers = 0;

beforeAll(async () => {
  api = await startApi();
});
afterAll(async () => {
  await api?.stop();
});

/** A fresh AgentStateSaver (its own prefix: it starts empty, as a new MemorySaver does), counting its requests. */
function agentStateSaver(counter = { requests: 0 }): AgentStateSaver {
  const counting: typeof fetch = (input, init) => {
    counter.requests += 1;
    return fetch(input, init);
  };
  savers += 1;
  return new AgentStateSaver({
    client: createClient({ baseUrl: api.url, apiKey: 'dev-key', fetch: counting }),
    prefix: `parity-${savers}`,
  });
}

/**
 * A fresh AgentStateSaver whose appends (its puts) answer `ms` late, as over a slow network: the
 * puts LangGraph's loop sends without waiting are then still on their way when the run returns.
 */
function slowPutSaver(ms: number): AgentStateSaver {
  const slow: typeof fetch = async (input, init) => {
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    if (init?.method === 'POST' && new URL(url).pathname.endsWith('/messages')) await new Promise((resolve) => setTimeout(resolve, ms));
    return fetch(input, init);
  };
  savers += 1;
  return new AgentStateSaver({ client: createClient({ baseUrl: api.url, apiKey: 'dev-key', fetch: slow }), prefix: `parity-${savers}` });
}

/** The scenario's answer on MemorySaver and on AgentStateSaver. */
async function onBoth<T>(scenario: (saver: BaseCheckpointSaver) => Promise<T>): Promise<{ memory: T; ours: T }> {
  return { memory: await scenario(new MemorySaver()), ours: await scenario(agentStateSaver()) };
}

const Counter = Annotation.Root({
  x: Annotation<number>,
  log: Annotation<string[]>({ reducer: (a, b) => [...a, ...b], default: () => [] }),
});

function counterGraph(saver: BaseCheckpointSaver) {
  return new StateGraph(Counter)
    .addNode('one', () => ({ x: 1, log: ['one'] }))
    .addNode('two', () => ({ x: 2, log: ['two'] }))
    .addEdge(START, 'one')
    .addEdge('one', 'two')
    .addEdge('two', END)
    .compile({ checkpointer: saver });
}

describe('AgentStateSaver as MemorySaver', () => {
  it('reads a __copy__ fork of the first checkpoint (no parent) with the input it copies, and its update as a task', async () => {
    // Prepare: the first checkpoint has no parent, so its copy is put under none, with no new
    // versions; the values it carries (the __start__ input) are the thread's own at those versions.
    const scenario = async (saver: BaseCheckpointSaver) => {
      const graph = counterGraph(saver);
      const config = { configurable: { thread_id: 'copy-first' } };
      await graph.invoke({ x: 0 }, config);
      const history = [];
      for await (const snapshot of graph.getStateHistory(config)) history.push(snapshot);
      const first = history[history.length - 1];

      // Act
      const fork = await graph.updateState(first?.config ?? config, [[{ x: 5 }, '__start__']] as never, '__copy__');
      const forked = await graph.getState(fork);
      const copy = await graph.getState(forked.parentConfig ?? fork);
      const done = await graph.invoke(null, fork);
      return {
        copyTasks: copy.tasks.map((task) => ({ name: task.name, result: task.result })),
        forked: forked.values,
        next: forked.next,
        done,
      };
    };
    const { memory, ours } = await onBoth(scenario);

    // Assess
    expect(memory.copyTasks).toEqual([{ name: '__start__', result: { x: 5 } }]);
    expect(memory.done).toEqual({ x: 2, log: ['one', 'two'] });
    expect(ours).toEqual(memory);
  });

  it('reads a __copy__ fork with the values of the checkpoint it copies, not its parent', async () => {
    // Prepare: a copy is put under the copied checkpoint's parent, with no new channel versions.
    const scenario = async (saver: BaseCheckpointSaver) => {
      const graph = counterGraph(saver);
      const config = { configurable: { thread_id: 'copy' } };
      await graph.invoke({ x: 0 }, config);

      // Act
      const copy = await graph.updateState(config, null, '__copy__');
      const copied = await graph.getState(copy);
      return { values: copied.values, latest: (await graph.getState(config)).values };
    };
    const { memory, ours } = await onBoth(scenario);

    // Assess
    expect(memory.values).toEqual({ x: 2, log: ['one', 'two'] });
    expect(ours).toEqual(memory);
  });

  it('asks again on a __copy__ fork of the checkpoint before an interrupt, and resumes it with the new answer', async () => {
    // Prepare
    const scenario = async (saver: BaseCheckpointSaver) => {
      const graph = new StateGraph(Counter)
        .addNode('draft', () => ({ log: ['a'] }))
        .addNode('ask', () => ({ log: [`human:${interrupt('your input?')}`] }))
        .addNode('finish', () => ({ log: ['b'] }))
        .addEdge(START, 'draft')
        .addEdge('draft', 'ask')
        .addEdge('ask', 'finish')
        .compile({ checkpointer: saver });
      const config = { configurable: { thread_id: 'copy-interrupt' } };
      await graph.invoke({ log: [] }, config);
      await graph.invoke(new Command({ resume: 'hello' }), config);
      const history = [];
      for await (const snapshot of graph.getStateHistory(config)) history.push(snapshot);
      const beforeAsk = history.filter((snapshot) => snapshot.next.includes('ask')).at(-1);

      // Act
      const fork = await graph.updateState(beforeAsk?.config ?? config, null, '__copy__');
      const asked = await graph.invoke(null, fork);
      const final = await graph.invoke(new Command({ resume: 'new answer' }), fork);
      const interrupts = (asked as { __interrupt__?: Array<{ value: unknown }> }).__interrupt__;
      return { asked: interrupts?.map((one) => one.value), final: final.log };
    };
    const { memory, ours } = await onBoth(scenario);

    // Assess
    expect(memory).toEqual({ asked: ['your input?'], final: ['a', 'human:new answer', 'b'] });
    expect(ours).toEqual(memory);
  });

  it('takes a put without newVersions, and reads back every channel value as it was put', async () => {
    // Prepare: LangGraph's own tests put checkpoints so; a channel without a version (as the
    // tasks channel) and a value with nulls inside are kept as they are.
    const scenario = async (saver: BaseCheckpointSaver) => {
      const thread = { configurable: { thread_id: 'no-versions', checkpoint_ns: '' } };
      const first: Checkpoint = { ...emptyCheckpoint(), id: uuid6(1) };
      first.channel_values = { a: 1, b: { keep: null, list: [null, 2] }, __pregel_tasks: [] };
      first.channel_versions = { a: 1, b: 1 };
      const second: Checkpoint = { ...emptyCheckpoint(), id: uuid6(2) };
      second.channel_values = { a: 2 };
      second.channel_versions = { a: 2, b: 1 };

      // Act: the first without newVersions (as LangGraph's own tests call it), the second with
      // newVersions that name nothing.
      const putWithout = saver.put.bind(saver) as (
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
      ) => Promise<RunnableConfig>;
      const firstConfig = await putWithout(thread, first, { source: 'input', step: -1, parents: {} });
      await saver.put(firstConfig, second, { source: 'loop', step: 0, parents: {} }, {});
      const [atFirst, latest] = await Promise.all([saver.getTuple(firstConfig), saver.getTuple(thread)]);
      return { first: atFirst?.checkpoint.channel_values, latest: latest?.checkpoint.channel_values };
    };
    const { memory, ours } = await onBoth(scenario);

    // Assess
    expect(memory).toEqual({ first: { a: 1, b: { keep: null, list: [null, 2] }, __pregel_tasks: [] }, latest: { a: 2 } });
    expect(ours).toEqual(memory);
  });

  it('resumes interrupts in subgraphs sent in a fan-out, each with its own answer', async () => {
    // Prepare: five subgraph tasks each stop at an interrupt in their own namespace.
    const scenario = async (saver: BaseCheckpointSaver) => {
      const child = new StateGraph(Annotation.Root({ prompt: Annotation<string>, answers: Annotation<string[]> }))
        .addNode('ask', (state) => ({ answers: [interrupt(state.prompt) as string] }))
        .addEdge(START, 'ask')
        .compile();
      const graph = new StateGraph(
        Annotation.Root({
          prompts: Annotation<string[]>,
          answers: Annotation<string[]>({ reducer: (a, b) => [...a, ...b], default: () => [] }),
        }),
      )
        .addNode('child', child)
        .addConditionalEdges(START, ({ prompts }) => prompts.map((prompt) => new Send('child', { prompt })), ['child'])
        .addEdge('child', END)
        .compile({ checkpointer: saver });
      const config = { configurable: { thread_id: 'fan-out-interrupts' } };
      await graph.invoke({ prompts: ['a', 'b', 'c', 'd', 'e'] }, config);
      const waiting = (await graph.getState(config)).tasks.flatMap((task) => task.interrupts);

      // Act
      const resume = Object.fromEntries(waiting.map((one) => [one.id, `answer ${one.value}`]));
      const done = await graph.invoke(new Command({ resume }), config);
      return { asked: waiting.map((one) => one.value).sort(), answers: [...done.answers].sort() };
    };
    const { memory, ours } = await onBoth(scenario);

    // Assess
    expect(memory.answers).toEqual(['answer a', 'answer b', 'answer c', 'answer d', 'answer e']);
    expect(ours).toEqual(memory);
  });

  it('resumes nested subgraphs that interrupted in parallel with durability "exit" after the run put its checkpoint again', async () => {
    // Prepare: with durability "exit" a run saves only when it stops. The second run resumes the
    // checkpoint before `outer1`, runs `outer1`, and stops at the interrupt inside `inner`
    // without finishing its step; LangGraph 1.4 (loop.ts `finishAndHandleError`; 1.7 skips a
    // checkpoint it saved already) then sends the step's writes and puts that same checkpoint
    // again, under itself and with no new versions, the put a microtask after the writes.
    const scenario = async (saver: BaseCheckpointSaver) => {
      const Keyed = Annotation.Root({ myKey: Annotation<string>({ reducer: (a, b) => a + b, default: () => '' }) });
      const inner = new StateGraph(Keyed)
        .addNode('inner1', async () => {
          await new Promise((resolve) => setTimeout(resolve, 20));
          return { myKey: 'got here' };
        })
        .addNode('inner2', () => ({ myKey: ' and there' }))
        .addEdge(START, 'inner1')
        .addEdge('inner1', 'inner2')
        .compile({ interruptBefore: ['inner2'] });
      const graph = new StateGraph(Keyed)
        .addNode('inner', inner)
        .addNode('outer1', () => ({ myKey: ' and parallel' }))
        .addNode('outer2', () => ({ myKey: ' and back again' }))
        .addEdge(START, 'inner')
        .addEdge(START, 'outer1')
        .addEdge(['inner', 'outer1'], 'outer2')
        .compile({ checkpointer: saver, interruptBefore: ['outer1'] });
      const config = { configurable: { thread_id: 'exit-parallel' }, streamMode: 'values' as const, durability: 'exit' as const };
      const run = async (input: { myKey: string } | null) => {
        const values = [];
        for await (const value of await graph.stream(input, config)) values.push(value);
        return values;
      };
      const first = await run({ myKey: '' });
      const second = await run(null);
      const stopped = await saver.getTuple(config);
      const metadata = stopped?.metadata;
      if (!stopped || !metadata) throw new Error('no checkpoint after the second run');
      const byTask = new Map<string, Array<[string, unknown]>>();
      for (const [task, channel, value] of stopped.pendingWrites ?? []) byTask.set(task, [...(byTask.get(task) ?? []), [channel, value]]);
      const writes = [...byTask].map(([task, some]) => saver.putWrites(stopped.config, some, task));
      const putAgain = Promise.resolve().then(() => saver.put(stopped.config, stopped.checkpoint, metadata, {}));
      await Promise.all([...writes, putAgain]);

      // Act
      const third = await run(null);
      return { first, second, third, written: (stopped.pendingWrites ?? []).length };
    };
    const { memory, ours } = await onBoth(scenario);

    // Assess
    expect(memory.written).toBe(2);
    expect(memory.third).toEqual([
      { myKey: '' },
      { myKey: 'got here and there and parallel' },
      { myKey: 'got here and there and parallel and back again' },
    ]);
    expect(ours).toEqual(memory);
  });

  it('reads, right after an aborted invoke, the checkpoints that run had put, and resumes the run from them', async () => {
    // Prepare: an aborted invoke rejects at once (LangChain races the run with its signal), while
    // the checkpoints LangGraph's loop put before the abort (it chains its puts and does not wait
    // for them) are still being sent; ours answer 150 ms late, so they are on their way when
    // the next read comes (LangGraph's cancellation tests, "should resume from last successful
    // invocation when AbortSignal is aborted due to external abort").
    const scenario = async (saver: BaseCheckpointSaver) => {
      let started: (() => void) | undefined;
      const graph = new StateGraph(
        Annotation.Root({ input: Annotation<string>, log: Annotation<string[]>({ reducer: (a, b) => [...a, ...b], default: () => [] }) }),
      )
        .addNode(
          'one',
          (state, config) =>
            new Promise<{ log: string[] }>((resolve, reject) => {
              const timer = setTimeout(() => resolve({ log: [`one:${state.input}`] }), 50);
              const abort = () => {
                clearTimeout(timer);
                reject(new Error('Aborted'));
              };
              config.signal?.addEventListener('abort', abort, { once: true });
              started?.();
            }),
        )
        .addNode('two', () => ({ log: ['two'] }))
        .addEdge(START, 'one')
        .addEdge('one', 'two')
        .addEdge('two', END)
        .compile({ checkpointer: saver });
      const config = { configurable: { thread_id: 'aborted' } };
      await graph.invoke({ input: 'first' }, config);
      const controller = new AbortController();
      started = () => controller.abort();
      const aborted = await graph.invoke({ input: 'second' }, { ...config, signal: controller.signal }).then(
        () => 'finished',
        (error: Error) => error.message,
      );
      started = undefined;

      // Act
      const stopped = await graph.getState(config);
      const resumed = await graph.invoke(null, config);
      return { aborted, values: stopped.values, next: stopped.next, resumed };
    };
    const memory = await scenario(new MemorySaver());
    const ours = await scenario(slowPutSaver(150));

    // Assess
    expect(memory.aborted).toMatch(/abort/i);
    expect(memory).toEqual({
      aborted: memory.aborted,
      values: { input: 'second', log: ['one:first', 'two'] },
      next: ['one'],
      resumed: { input: 'second', log: ['one:first', 'two', 'one:second', 'two'] },
    });
    expect(ours).toEqual(memory);
  });

  it('answers getTuple in 1 request, list(limit 10) in at most 2 and put in 1, over a thread of 20 steps', async () => {
    // Prepare
    const counter = { requests: 0 };
    const saver = agentStateSaver(counter);
    const graph = new StateGraph(Counter)
      .addNode('step', (state) => ({ x: state.x + 1, log: [`${state.x}`] }))
      .addEdge(START, 'step')
      .addConditionalEdges('step', (state) => (state.x < 20 ? 'step' : END))
      .compile({ checkpointer: saver });
    const config = { configurable: { thread_id: 'counted', checkpoint_ns: '' } };
    await graph.invoke({ x: 0 }, config);

    // Act
    counter.requests = 0;
    const latest = await saver.getTuple(config);
    const forTuple = counter.requests;
    counter.requests = 0;
    const listed = [];
    for await (const tuple of saver.list(config, { limit: 10 })) listed.push(tuple);
    const forList = counter.requests;
    const next = { ...(latest?.checkpoint as Checkpoint), id: uuid6(-1), channel_values: { x: 21, log: ['20'] } };
    counter.requests = 0;
    const put = await saver.put(latest?.config as RunnableConfig, next, { source: 'update', step: 21, parents: {} }, { x: 22 });
    const forPut = counter.requests;
    const afterPut = await saver.getTuple(put);

    // Assess
    expect(latest?.checkpoint.channel_values.x).toBe(20);
    expect(forTuple).toBe(1);
    expect(listed.map((tuple) => tuple.metadata?.step)).toEqual([20, 19, 18, 17, 16, 15, 14, 13, 12, 11]);
    expect(listed[1]?.pendingWrites?.length).toBeGreaterThan(0);
    expect(forList).toBeLessThanOrEqual(2);
    expect(forPut).toBe(1);
    expect(afterPut?.checkpoint.channel_values).toEqual({ x: 21, log: ['20'] });
    expect(afterPut?.parentConfig?.configurable?.checkpoint_id).toBe(latest?.config.configurable?.checkpoint_id);
  });

  it('lists a thread of 120 steps in 2 requests whatever the limit: the tree and one page of its history', async () => {
    // Prepare: 122 checkpoints, each step's with its writes (a version each): over 240 versions.
    const counter = { requests: 0 };
    const saver = agentStateSaver(counter);
    const graph = new StateGraph(Counter)
      .addNode('step', (state) => ({ x: state.x + 1 }))
      .addEdge(START, 'step')
      .addConditionalEdges('step', (state) => (state.x < 120 ? 'step' : END))
      .compile({ checkpointer: saver });
    const config = { configurable: { thread_id: 'long', checkpoint_ns: '' } };
    await graph.invoke({ x: 0 }, { ...config, recursionLimit: 200 });

    // Act
    const listed = async (options: { limit?: number }) => {
      counter.requests = 0;
      const steps: unknown[] = [];
      for await (const tuple of saver.list(config, options)) steps.push(tuple.metadata?.step);
      return { steps, requests: counter.requests };
    };
    const ten = await listed({ limit: 10 });
    const hundred = await listed({ limit: 100 });
    const all = await listed({});

    // Assess: newest first, each with its state; two requests each (a limit over 50 took a page
    // of history per 50 checkpoints, or a request per checkpoint further back than 200 versions).
    expect(ten.steps).toEqual(Array.from({ length: 10 }, (_, index) => 120 - index));
    expect(hundred.steps).toEqual(Array.from({ length: 100 }, (_, index) => 120 - index));
    expect(all.steps).toEqual(Array.from({ length: 122 }, (_, index) => 120 - index));
    expect([ten.requests, hundred.requests, all.requests]).toEqual([2, 2, 2]);
  });
});

/** A saver counting its reads of subgraph namespaces' sessions (`GET …/state` of a `~~` session id) beside all its requests. */
function namespaceReadCountingSaver(prefix?: string): { saver: AgentStateSaver; counts: { requests: number; namespaceReads: number } } {
  const counts = { requests: 0, namespaceReads: 0 };
  const counting: typeof fetch = (input, init) => {
    counts.requests += 1;
    const path = new URL(String(input)).pathname;
    if ((init?.method ?? 'GET') === 'GET' && /^\/v1\/sessions\/[^/]*~~[^/]*\/state$/.test(path)) counts.namespaceReads += 1;
    return fetch(input, init);
  };
  savers += 1;
  const saver = new AgentStateSaver({
    client: createClient({ baseUrl: api.url, apiKey: 'dev-key', fetch: counting }),
    prefix: prefix ?? `parity-${savers}`,
  });
  return { saver, counts };
}

const Steps = Annotation.Root({ log: Annotation<string[]>({ reducer: (a, b) => [...a, ...b], default: () => [] }) });

describe("a subgraph's first read (docs/langgraph.md)", () => {
  it('answers the first read of each subgraph of a new run without a request: as a node, called in a node, nested, at a later step, sent five times', async () => {
    // Prepare: every subgraph's namespace is named after a task of a checkpoint LangGraph made in
    // this run, so it holds nothing. Before, each made a request that found nothing (one per
    // subgraph invocation: 1, 1, 2, 1, 5 here, and as many more on the second run).
    const inner = (saver: BaseCheckpointSaver) =>
      new StateGraph(Steps)
        .addNode('a', () => ({ log: ['a'] }))
        .addNode('b', () => ({ log: ['b'] }))
        .addEdge(START, 'a')
        .addEdge('a', 'b')
        .compile({ checkpointer: saver });
    const shapes = {
      asNode: (saver: BaseCheckpointSaver) =>
        new StateGraph(Steps).addNode('graph', inner(saver)).addEdge(START, 'graph').compile({ checkpointer: saver }),
      inNode: (saver: BaseCheckpointSaver) => {
        const child = inner(saver);
        return new StateGraph(Steps)
          .addNode('graph', async (_, config) => child.invoke({ log: ['in'] }, config))
          .addEdge(START, 'graph')
          .compile({ checkpointer: saver });
      },
      nested: (saver: BaseCheckpointSaver) => {
        const middle = new StateGraph(Steps).addNode('inner', inner(saver)).addEdge(START, 'inner').compile();
        return new StateGraph(Steps).addNode('middle', middle).addEdge(START, 'middle').compile({ checkpointer: saver });
      },
      laterStep: (saver: BaseCheckpointSaver) =>
        new StateGraph(Steps)
          .addNode('first', () => ({ log: ['first'] }))
          .addNode('graph', inner(saver))
          .addEdge(START, 'first')
          .addEdge('first', 'graph')
          .compile({ checkpointer: saver }),
      sent: (saver: BaseCheckpointSaver) =>
        new StateGraph(Steps)
          .addNode('graph', inner(saver))
          .addConditionalEdges(START, () => [1, 2, 3, 4, 5].map((n) => new Send('graph', { log: [`${n}`] })), ['graph'])
          .compile({ checkpointer: saver }),
    };
    const scenario = async (saver: BaseCheckpointSaver, reads: () => number) => {
      const result: Record<string, { runs: unknown[]; namespaceReads: number }> = {};
      for (const [name, shape] of Object.entries(shapes)) {
        const graph = shape(saver);
        const config = { configurable: { thread_id: `first-read-${name}` } };
        const before = reads();
        // Act: a new thread, then a second run of it (whose checkpoints are new as well).
        const runs = [await graph.invoke({ log: ['start'] }, config), await graph.invoke({ log: ['again'] }, config)];
        result[name] = { runs: runs.map((run) => [...run.log].sort()), namespaceReads: reads() - before };
      }
      return result;
    };
    const memory = await scenario(new MemorySaver(), () => 0);
    const { saver, counts } = namespaceReadCountingSaver();
    const ours = await scenario(saver, () => counts.namespaceReads);

    // Assess
    expect(memory.sent?.runs[0]).toEqual(['1', '2', '3', '4', '5', 'a', 'a', 'a', 'a', 'a', 'b', 'b', 'b', 'b', 'b', 'start']);
    expect(ours).toEqual(memory);
  });

  it('reads the namespace of a subgraph compiled with checkpointer: true, which keeps its state from run to run', async () => {
    // Prepare: such a subgraph's namespace is its node's name alone (LangGraph drops the task
    // id), so it is the same in every run and holds the state the runs before left; a new run's
    // checkpoint does not make it empty. (Failed on the first version of this change, which
    // answered its read with nothing: the second run's subgraph started from an empty state, as
    // four of LangGraph's time-travel tests and two of pregel.test.ts showed.)
    const scenario = async (saver: BaseCheckpointSaver) => {
      const child = new StateGraph(Steps)
        .addNode('remember', () => ({ log: ['child'] }))
        .addEdge(START, 'remember')
        .compile({ checkpointer: true });
      const graph = new StateGraph(Annotation.Root({ seen: Annotation<number> }))
        .addNode('child', async () => ({ seen: (await child.invoke({ log: [] })).log.length }))
        .addEdge(START, 'child')
        .compile({ checkpointer: saver });
      const config = { configurable: { thread_id: 'stateful-subgraph' } };

      // Act
      const runs = [];
      for (let run = 0; run < 3; run++) runs.push((await graph.invoke({ seen: 0 }, config)).seen);
      return runs;
    };
    const { memory, ours } = await onBoth(scenario);

    // Assess
    expect(memory).toEqual([1, 2, 3]);
    expect(ours).toEqual(memory);
  });

  it('reads the namespace of a checkpoint made here once another process has run its subgraph', async () => {
    // Prepare: the run here stops before its subgraph, at a checkpoint it made; another process
    // (a saver of its own, the same prefix) resumes it, and its subgraph stops at an interrupt in
    // the namespace named after that checkpoint. Back here, the run resumes that checkpoint: the
    // read that returned it says it is one of storage, so its subgraph's namespace is read, and
    // the subgraph goes on after `a` instead of starting again. (Passes before the change, which
    // read every namespace; fails on a saver that trusts what it made without that revocation.)
    const child = new StateGraph(Steps)
      .addNode('a', () => ({ log: ['a'] }))
      .addNode('ask', () => ({ log: [`answer:${interrupt('go on?')}`] }))
      .addEdge(START, 'a')
      .addEdge('a', 'ask')
      .compile();
    const graph = (saver: BaseCheckpointSaver) =>
      new StateGraph(Steps)
        .addNode('graph', child)
        .addEdge(START, 'graph')
        .compile({ checkpointer: saver, interruptBefore: ['graph'] });
    const scenario = async (here: BaseCheckpointSaver, there: BaseCheckpointSaver) => {
      const config = { configurable: { thread_id: 'two-processes' } };
      await graph(here).invoke({ log: ['start'] }, config);
      const stopped = await graph(there).invoke(null, config);

      // Act
      const done = await graph(here).invoke(new Command({ resume: 'yes' }), config);
      const interrupts = (stopped as { __interrupt__?: Array<{ value: unknown }> }).__interrupt__;
      return { asked: interrupts?.map((one) => one.value), done: done.log };
    };
    const memorySaver = new MemorySaver();
    const memory = await scenario(memorySaver, memorySaver);
    const prefix = `parity-two-${savers}`;
    const ours = await scenario(namespaceReadCountingSaver(prefix).saver, namespaceReadCountingSaver(prefix).saver);

    // Assess
    expect(memory).toEqual({ asked: ['go on?'], done: ['start', 'start', 'a', 'answer:yes'] });
    expect(ours).toEqual(memory);
  });

  it('reads the namespace of a checkpoint made here once a read asked for it by id, once its thread was deleted or copied into here, and once it put there itself', async () => {
    // Prepare: here puts a thread's checkpoint; another process (a saver of its own, the same
    // prefix) puts the first checkpoint of a subgraph of it, as a run of it there would. (Each
    // passes before the change, which read every namespace; each fails on a saver that still
    // trusts what it made after that read, that delete or that copy, or after its own put in
    // the namespace: checked by taking each of those out.)
    const prefix = `parity-stale-${savers}`;
    const here = namespaceReadCountingSaver(prefix).saver;
    const there = namespaceReadCountingSaver(prefix).saver;
    const root = (thread: string) => ({ configurable: { thread_id: thread, checkpoint_ns: '' } });
    const made: Checkpoint[] = [];
    const madeHere = async (thread: string) => {
      const checkpoint: Checkpoint = {
        ...emptyCheckpoint(),
        id: uuid6(0),
        channel_values: { log: ['here'] },
        channel_versions: { log: 1 },
      };
      await here.put(root(thread), checkpoint, { source: 'loop', step: 0, parents: {} }, { log: 1 });
      made.push(checkpoint);
      return checkpoint.id;
    };
    const putChild = async (saver: AgentStateSaver, thread: string, namespace: string, parent: string) => {
      const checkpoint: Checkpoint = {
        ...emptyCheckpoint(),
        id: uuid6(-1),
        channel_values: { log: ['child'] },
        channel_versions: { log: 1 },
      };
      const metadata = { source: 'input' as const, step: -1, parents: { '': parent } };
      await saver.put({ configurable: { thread_id: thread, checkpoint_ns: namespace } }, checkpoint, metadata, { log: 1 });
      return checkpoint.id;
    };
    const putThere = (thread: string, namespace: string, parent: string) => putChild(there, thread, namespace, parent);
    const subgraphRead = (thread: string, namespace: string, parent: string) =>
      here.getTuple({ configurable: { thread_id: thread, checkpoint_ns: namespace, checkpoint_map: { '': parent } } });

    // Act: asked for by id (a run resuming it, `getState` of its config).
    const askedParent = await madeHere('asked');
    const askedChild = await putThere('asked', 'graph:1', askedParent);
    await here.getTuple({ configurable: { ...root('asked').configurable, checkpoint_id: askedParent } });
    const asked = await subgraphRead('asked', 'graph:1', askedParent);
    // Act: a thread copied elsewhere and run on there; there deletes the thread, and here copies
    // it back over the thread.
    const copiedParent = await madeHere('copied');
    await here.copyThread('copied', 'copied-away');
    const copiedChild = await putThere('copied-away', 'graph:2', copiedParent);
    await there.deleteThread('copied');
    await here.copyThread('copied-away', 'copied');
    const copied = await subgraphRead('copied', 'graph:2', copiedParent);
    // Act: a thread deleted here, and written again there with the same checkpoints (a restore).
    const deletedParent = await madeHere('deleted');
    await here.deleteThread('deleted');
    await there.put(root('deleted'), made.at(-1) as Checkpoint, { source: 'loop', step: 0, parents: {} }, { log: 1 });
    const deletedChild = await putThere('deleted', 'graph:3', deletedParent);
    const deleted = await subgraphRead('deleted', 'graph:3', deletedParent);

    // Act: a namespace of it that this saver put a checkpoint in (a subgraph run through here).
    const ownParent = await madeHere('own');
    const ownChild = await putChild(here, 'own', 'graph:4', ownParent);
    const own = await subgraphRead('own', 'graph:4', ownParent);

    // Assess
    expect(asked?.config.configurable?.checkpoint_id).toBe(askedChild);
    expect(copied?.config.configurable?.checkpoint_id).toBe(copiedChild);
    expect(deleted?.config.configurable?.checkpoint_id).toBe(deletedChild);
    expect(own?.config.configurable?.checkpoint_id).toBe(ownChild);
  });
});
