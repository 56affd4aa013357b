import { type AgentStateApi, createClient } from '@agentstate/client';
import { AgentStateSaver } from '@agentstate/langgraph';
import { Annotation, Command, END, Send, START, StateGraph } from '@langchain/langgraph';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { questionOf, tripPlanner } from '../../examples/langgraph.js';
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

  it('keeps a checkpoint put again: its writes and unchanged values stay, and 50 writes another process sends meanwhile land', async () => {
    // Prepare: a checkpoint with one write, and a second saver on the same threads (another process).
    const saver = saverWith('again');
    const other = saverWith('again');
    const thread = { configurable: { thread_id: 'put-again', checkpoint_ns: '' } };
    const first = checkpoint(1, { count: 1, label: 'a' });
    const config = await saver.put(thread, first, metadata, { count: 1, label: 1 });
    await saver.putWrites(config, [['count', 10]], 'task-a');

    // Act: the checkpoint put again under itself with no new versions (LangGraph 1.4 does so with
    // durability "exit"), while the other process writes to it 50 times.
    const others = Array.from({ length: 50 }, (_, n) => other.putWrites(config, [['count', n]], `task-${n}`));
    const answers = await Promise.allSettled([saver.put(config, first, { ...metadata, step: 1 }, {}), ...others]);

    // Assess
    expect(answers.filter((answer) => answer.status === 'rejected')).toEqual([]);
    const tuple = await saver.getTuple(config);
    expect(tuple?.checkpoint.channel_values).toEqual({ count: 1, label: 'a' });
    expect(tuple?.metadata?.step).toBe(1);
    expect(tuple?.pendingWrites).toHaveLength(51);
    expect(tuple?.pendingWrites).toContainEqual(['task-a', 'count', 10]);
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

  it('over a 20-step graph: puts one at a time, each step’s writes a note beside its checkpoint, sent once, never before its checkpoint is there', async () => {
    // Prepare: a client that records when each write to agentstate was in flight, and how it ended.
    const { writes, saver } = recordingSaver('turns');
    const State = Annotation.Root({ n: Annotation<number> });
    let builder = new StateGraph(State) as unknown as StateGraph<typeof State.spec>;
    for (let step = 1; step <= 20; step++) builder = builder.addNode(`s${step}`, (state) => ({ n: state.n + 1 })) as typeof builder;
    builder = builder.addEdge(START, 's1' as never) as typeof builder;
    for (let step = 1; step < 20; step++) builder = builder.addEdge(`s${step}` as never, `s${step + 1}` as never) as typeof builder;
    const graph = builder.addEdge('s20' as never, END).compile({ checkpointer: saver });

    // Act: LangGraph chains a run's puts but sends each step's writes at once, before the put
    // of their checkpoint has even started.
    const out = await graph.invoke({ n: 0 }, { configurable: { thread_id: 'twenty' } });

    // Assess: 22 puts, one change of the session's log each, none beside another (two changes
    // of one log race for its next place); 21 steps' writes (the input's included), each one
    // note, every request answered 2xx the first time (a note sent before its checkpoint
    // exists answers 404 and costs a request), each sent once its checkpoint's put had ended.
    expect(out.n).toBe(20);
    expect(writes.filter((write) => write.status >= 300)).toEqual([]);
    const puts = writes.filter((write) => write.method === 'POST');
    const notes = writes.filter((write) => write.method === 'PUT');
    expect(puts).toHaveLength(22);
    expect(notes).toHaveLength(21);
    expect(writes).toHaveLength(43);
    expect(overlapsIn(puts)).toEqual([]);
    for (const note of notes) {
      const put = puts.find((write) => write.node === note.node);
      expect(put).toBeDefined();
      expect(note.start).toBeGreaterThanOrEqual((put as RecordedWrite).end);
    }
    // Each note goes out after the next checkpoint's put has: the server takes that append's
    // claim for the note's tip read (docs/architecture.md, "Notes beside nodes").
    const sentBeforeTheNextPut = notes.filter((note) => {
      const next = puts[puts.findIndex((write) => write.node === note.node) + 1];
      return next !== undefined && note.start < next.start;
    });
    expect(sentBeforeTheNextPut).toEqual([]);
  });

  it('runs a graph under a test’s fake timers: the saver waits on no timer of its own', async () => {
    // Prepare: the timers a test's vi.useFakeTimers() fakes by default, setImmediate among them
    // (LangGraph's own node_error_handler.test.ts runs graphs so; a saver that waited for one
    // hung there for good).
    const saver = saverWith('fake-timers');
    const State = Annotation.Root({ n: Annotation<number> });
    const graph = new StateGraph(State)
      .addNode('one', (state) => ({ n: state.n + 1 }))
      .addNode('two', (state) => ({ n: state.n + 1 }))
      .addEdge(START, 'one')
      .addEdge('one', 'two')
      .addEdge('two', END)
      .compile({ checkpointer: saver });
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setImmediate', 'clearImmediate', 'setInterval', 'clearInterval'] });
    try {
      // Act
      const out = await graph.invoke({ n: 0 }, { configurable: { thread_id: 'fake-timers' } });

      // Assess
      expect(out.n).toBe(2);
      expect((await graph.getState({ configurable: { thread_id: 'fake-timers' } })).values).toEqual({ n: 2 });
    } finally {
      vi.useRealTimers();
    }
  });

  it('sends the writes of a step’s 100 tasks as 100 notes at once, each call answered', async () => {
    // Prepare: a graph whose step fans out to 100 tasks, each writing one result.
    const { writes, saver } = recordingSaver('fan');
    const State = Annotation.Root({
      results: Annotation<number[]>({ reducer: (a, b) => [...a, ...b], default: () => [] }),
    });
    const graph = new StateGraph(State)
      .addNode('fan', () => ({}))
      .addNode('task', (input: { n: number }) => ({ results: [input.n] }))
      .addEdge(START, 'fan')
      .addConditionalEdges('fan', () => Array.from({ length: 100 }, (_, n) => new Send('task', { n })))
      .addEdge('task', END)
      .compile({ checkpointer: saver });
    const config = { configurable: { thread_id: 'fan-out' } };

    // Act
    const out = await graph.invoke({}, config);

    // Assess: every task's write is the checkpoint's, one note each (a blind write: none waits
    // for another), none refused, no change of the session's log beside another.
    expect([...out.results].sort((a, b) => a - b)).toEqual(Array.from({ length: 100 }, (_, n) => n));
    expect(writes.filter((write) => write.path.includes('/state?'))).toEqual([]);
    expect(writes.filter((write) => write.method === 'PUT').length).toBeGreaterThanOrEqual(100);
    expect(writes.filter((write) => write.status >= 300)).toEqual([]);
    expect(overlapsIn(writes.filter((write) => write.method !== 'PUT'))).toEqual([]);
    const history = [];
    for await (const tuple of saver.list(config)) history.push(tuple);
    const fanned = history.find((tuple) => tuple.metadata?.step === 1);
    expect(new Set(fanned?.pendingWrites?.map(([task]) => task)).size).toBe(100);
  });

  it('keeps writes too large for a note in the checkpoint’s state, each call answered for itself (past the state limit: 413), and notes whatever the state’s size', async () => {
    // Prepare: a checkpoint whose state is 3.5 MB of the 4 MiB limit.
    const saver = saverWith('full');
    const thread = { configurable: { thread_id: 'nearly-full', checkpoint_ns: '' } };
    const big = checkpoint(1, { notes: 'x'.repeat(3_500_000) });
    const config = await saver.put(thread, big, metadata, { notes: 1 });

    // Act: five writes of 300 KB (past a note's 256 KiB) and two of 100 KB at once, as
    // LangGraph's loop would send them for seven tasks.
    const settled = await Promise.allSettled([
      ...Array.from({ length: 5 }, (_, task) => saver.putWrites(config, [['out', 'y'.repeat(300_000)]], `task-${task}`)),
      ...[5, 6].map((task) => saver.putWrites(config, [['out', 'z'.repeat(100_000)]], `task-${task}`)),
    ]);

    // Assess: the large ones as if sent one by one into the state (two fit, three answer 413; a
    // merge patch of them all would have failed for every call), the notes all land.
    expect(settled.map((outcome) => outcome.status)).toEqual([
      'fulfilled',
      'fulfilled',
      'rejected',
      'rejected',
      'rejected',
      'fulfilled',
      'fulfilled',
    ]);
    expect(settled.filter((outcome) => outcome.status === 'rejected').map((outcome) => (outcome.reason as { code?: string }).code)).toEqual(
      ['state_too_large', 'state_too_large', 'state_too_large'],
    );
    const tuple = await saver.getTuple(config);
    expect(tuple?.pendingWrites?.map(([task]) => task)).toEqual(['task-0', 'task-1', 'task-5', 'task-6']);
  });

  it('lists a subgraph’s namespace in its turn on the thread’s session, beside the parent graph’s writes there', async () => {
    // Prepare: a parent of 5 steps whose third is a 3-step subgraph (a namespace of its own, so
    // its first put lists it in the thread session's registry).
    const { writes, saver } = recordingSaver('nested');
    const State = Annotation.Root({ n: Annotation<number> });
    const inner = new StateGraph(State)
      .addNode('i1', (state) => ({ n: state.n + 1 }))
      .addNode('i2', (state) => ({ n: state.n + 1 }))
      .addNode('i3', (state) => ({ n: state.n + 1 }))
      .addEdge(START, 'i1')
      .addEdge('i1', 'i2')
      .addEdge('i2', 'i3')
      .addEdge('i3', END)
      .compile();
    const graph = new StateGraph(State)
      .addNode('p1', (state) => ({ n: state.n + 1 }))
      .addNode('p2', (state) => ({ n: state.n + 1 }))
      .addNode('sub', inner)
      .addNode('p4', (state) => ({ n: state.n + 1 }))
      .addNode('p5', (state) => ({ n: state.n + 1 }))
      .addEdge(START, 'p1')
      .addEdge('p1', 'p2')
      .addEdge('p2', 'sub')
      .addEdge('sub', 'p4')
      .addEdge('p4', 'p5')
      .addEdge('p5', END)
      .compile({ checkpointer: saver });

    // Act
    const out = await graph.invoke({ n: 0 }, { configurable: { thread_id: 'with-sub' } });

    // Assess: the thread session's writes (the parent's puts and writes, and the registration)
    // never overlap, and the subgraph's namespace is listed, so `list` finds its checkpoints.
    expect(out.n).toBe(7);
    const threadSession = encodeURIComponent(await saver.sessionIdOf('with-sub'));
    const onThread = writes.filter((write) => write.path.startsWith(`/v1/sessions/${threadSession}/`));
    expect(onThread.filter((write) => write.path.includes('node=root'))).toHaveLength(1);
    expect(writes.filter((write) => write.status >= 300)).toEqual([]);
    expect(overlapsIn(onThread.filter((write) => write.method !== 'PUT'))).toEqual([]);
    const namespaces = new Set<string>();
    for await (const tuple of saver.list({ configurable: { thread_id: 'with-sub' } }))
      namespaces.add(String(tuple.config.configurable?.checkpoint_ns));
    expect([...namespaces].some((ns) => ns.startsWith('sub:'))).toBe(true);
  });
});

interface RecordedWrite {
  method: string;
  path: string;
  /** The node an append made (its first message's id) or a note is beside. */
  node: string | undefined;
  start: number;
  end: number;
  status: number;
}

/** A saver whose client records when each write (POST, PATCH, PUT) was in flight, where to, and how it ended. */
function recordingSaver(prefix: string): { writes: RecordedWrite[]; saver: AgentStateSaver } {
  const writes: RecordedWrite[] = [];
  const recording: typeof fetch = async (input, init) => {
    const start = performance.now();
    const response = await fetch(input, init);
    const method = init?.method ?? 'GET';
    if (method === 'POST' || method === 'PATCH' || method === 'PUT') {
      const url = new URL(String(input));
      const noted = /\/nodes\/([^/]+)\/notes\//.exec(url.pathname)?.[1];
      const appended =
        method === 'POST' && typeof init?.body === 'string'
          ? (JSON.parse(init.body) as { messages?: Array<{ id?: string }> }).messages?.[0]?.id
          : undefined;
      writes.push({
        method,
        path: url.pathname + url.search,
        node: noted === undefined ? appended : decodeURIComponent(noted),
        start,
        end: performance.now(),
        status: response.status,
      });
    }
    return response;
  };
  return {
    writes,
    saver: new AgentStateSaver({ client: createClient({ baseUrl: api.url, apiKey: 'dev-key', fetch: recording }), prefix }),
  };
}

/** The writes that started before the one started just before them had ended. */
function overlapsIn(writes: readonly RecordedWrite[]): RecordedWrite[] {
  const ordered = [...writes].sort((a, b) => a.start - b.start);
  return ordered.filter((write, index) => index > 0 && write.start < (ordered[index - 1] as RecordedWrite).end);
}

// From graph.test.ts, a file of its own before, which started a server as this one does: its
// saver (prefix 'graph') and client are made once for its describe, after this file's server.
/**
 * A real LangGraph `StateGraph` (examples/langgraph.ts) on AgentStateSaver, on a real server and
 * DynamoDB Local: it stops at an `interrupt`, resumes, and travels back in time to a past
 * checkpoint, and the fork is a branch of the thread's session that the API shows.
 */
let saver: AgentStateSaver;
/** agentstate's own client, to see what the saver wrote as any API user would. */
let agentstate: AgentStateApi;

describe('a StateGraph on AgentStateSaver', () => {
  beforeAll(() => {
    saver = new AgentStateSaver({ baseUrl: api.url, apiKey: 'dev-key', prefix: 'graph' });
    agentstate = createClient({ baseUrl: api.url, apiKey: 'dev-key' });
  });

  it('stops at the interrupt and resumes from the checkpoint it stopped at, even with a new saver', async () => {
    // Prepare
    const config = { configurable: { thread_id: 'trip-interrupt' } };

    // Act: the first run stops at the review; a second process (a new saver) resumes it.
    const paused = await tripPlanner(saver).invoke({ destination: 'Lisbon', nights: 3 }, config);
    const resumer = tripPlanner(new AgentStateSaver({ baseUrl: api.url, apiKey: 'dev-key', prefix: 'graph' }));
    const waiting = await resumer.getState(config);
    const done = await resumer.invoke(new Command({ resume: 'yes' }), config);

    // Assess
    expect(questionOf(paused)).toEqual({ question: 'Book 3 nights in Lisbon?' });
    expect(paused.booking).toBeUndefined();
    expect(waiting.next).toEqual(['review']);
    expect(waiting.tasks[0]?.interrupts[0]?.value).toEqual({ question: 'Book 3 nights in Lisbon?' });
    expect(done).toMatchObject({ approved: true, booking: 'Lisbon/3', log: ['drafted 3 nights in Lisbon', 'reviewed: yes', 'booked'] });
    expect((await resumer.getState(config)).next).toEqual([]);
  });

  it('keeps every checkpoint as a node of the thread session, each under its parent checkpoint', async () => {
    // Prepare
    const graph = tripPlanner(saver);
    const config = { configurable: { thread_id: 'trip-tree' } };
    await graph.invoke({ destination: 'Porto', nights: 2 }, config);
    await graph.invoke(new Command({ resume: 'no' }), config);

    // Act
    const history = [];
    for await (const snapshot of graph.getStateHistory(config)) history.push(snapshot);
    const sessionId = await saver.sessionIdOf('trip-tree');
    const tree = await agentstate.tree.get(sessionId);
    const path = await agentstate.messages.path(sessionId);

    // Assess: one node per checkpoint, a chain from the input to the end, the head at the last.
    expect(sessionId).toBe('graph@trip-tree');
    const ids = history.map((snapshot) => snapshot.config.configurable?.checkpoint_id as string);
    const nodes = new Map(tree.nodes.map((node) => [node.id, node]));
    expect(history.map((snapshot) => snapshot.next)).toEqual([[], ['revise'], ['review'], ['draft'], ['__start__']]);
    for (const snapshot of history) {
      const id = snapshot.config.configurable?.checkpoint_id as string;
      expect(nodes.get(id)?.role).toBe('checkpoint');
      expect(nodes.get(id)?.parentId).toBe((snapshot.parentConfig?.configurable?.checkpoint_id as string | undefined) ?? 'root');
    }
    expect(tree.head).toBe(ids[0]);
    expect(path.messages.map((message) => message.id)).toEqual([...ids].reverse());
    // The state at a node is that checkpoint's channel values, readable without LangGraph.
    const atEnd = await agentstate.state.get(sessionId, { node: ids[0] as string });
    expect(atEnd.state).toMatchObject({ thread_id: 'trip-tree', channels: { destination: 'Porto', booking: null, approved: false } });
  });

  it('travels back to a past checkpoint, runs on from it, and shows the fork as a branch of the tree', async () => {
    // Prepare: a whole run, approved.
    const graph = tripPlanner(saver);
    const config = { configurable: { thread_id: 'trip-fork' } };
    await graph.invoke({ destination: 'Lisbon', nights: 3 }, config);
    const original = await graph.invoke(new Command({ resume: 'yes' }), config);
    let waiting: Awaited<ReturnType<typeof graph.getState>> | undefined;
    for await (const snapshot of graph.getStateHistory(config)) if (snapshot.next.includes('review')) waiting = snapshot;
    const pastId = waiting?.config.configurable?.checkpoint_id as string;
    const originalEnd = (await graph.getState(config)).config;

    // Act: update the state at the checkpoint that waited for the review, run on, refuse this time.
    const forkConfig = await graph.updateState(waiting?.config ?? {}, { plan: ['night 1 in Lisbon'] });
    const paused = await graph.invoke(null, forkConfig);
    const forked = await graph.invoke(new Command({ resume: 'no' }), config);

    // Assess: LangGraph sees the fork as the thread's present, the original run is still there.
    expect(questionOf(paused)).toEqual({ question: 'Book 1 nights in Lisbon?' });
    expect(original).toMatchObject({ booking: 'Lisbon/3', plan: ['night 1 in Lisbon', 'night 2 in Lisbon', 'night 3 in Lisbon'] });
    expect(forked).toMatchObject({ booking: null, approved: false, plan: ['night 1 in Lisbon'] });
    expect((await graph.getState(originalEnd)).values).toMatchObject({ booking: 'Lisbon/3' });

    // Assess, through the API: the past checkpoint's node has two children, the original
    // continuation and the update, and the head is on the fork's branch.
    const sessionId = await saver.sessionIdOf('trip-fork');
    const tree = await agentstate.tree.get(sessionId);
    const forkId = forkConfig.configurable?.checkpoint_id as string;
    const children = tree.nodes.filter((node) => node.parentId === pastId).map((node) => node.id);
    expect(children).toHaveLength(2);
    expect(children).toContain(forkId);
    const path = await agentstate.messages.path(sessionId);
    const onPath = path.messages.map((message) => message.id);
    expect(onPath).toContain(pastId);
    expect(onPath).toContain(forkId);
    expect(onPath).not.toContain(originalEnd.configurable?.checkpoint_id);
    expect(tree.nodes.find((node) => node.id === originalEnd.configurable?.checkpoint_id)?.role).toBe('checkpoint');
    const atFork = await agentstate.state.get(sessionId, { node: forkId });
    expect(atFork.state).toMatchObject({ parent: pastId, channels: { plan: ['night 1 in Lisbon'], nights: 3 } });
  });

  it('deletes a thread with every checkpoint of it', async () => {
    // Prepare
    const graph = tripPlanner(saver);
    const config = { configurable: { thread_id: 'trip-delete' } };
    await graph.invoke({ destination: 'Faro', nights: 1 }, config);

    // Act
    await saver.deleteThread('trip-delete');

    // Assess
    expect(await saver.getTuple(config)).toBeUndefined();
    await expect(agentstate.sessions.get('graph@trip-delete')).rejects.toMatchObject({ status: 404 });
  });
});

// From large-writes.test.ts, a file of its own before, which started a server as this one does;
// its saver has a prefix of its own. Last here, so that its 10 MB of notes come after the other
// tests' writes on this file's DynamoDB Local.
/**
 * A step whose writes pass one answer's bytes (Lambda's 6 MB): 100 tasks of 100 KB each are 10 MB
 * of pending writes, notes beside one checkpoint's node. Before notes came in parts (docs/api.md),
 * `getTuple` and `list` of that checkpoint answered `413` (in AWS, API Gateway's bare `500`); now
 * the client reads the rest with `GET …/notes` and the saver returns every write.
 */
const TASKS = 100;
const BLOB = 100_000;

describe('a fan-out whose writes pass one answer', () => {
  it(`runs a step of ${TASKS} tasks writing ${BLOB / 1000} KB each, and getTuple and list return every write`, async () => {
    // Prepare: each task writes a distinct 100 KB string; the channel keeps only their lengths, so the state stays small.
    const saver = new AgentStateSaver({ baseUrl: api.url, apiKey: 'dev-key', prefix: 'large-writes' });
    const State = Annotation.Root({
      total: Annotation<number, string>({ reducer: (sum, blob) => sum + blob.length, default: () => 0 }),
    });
    const graph = new StateGraph(State)
      .addNode('fan', () => ({}))
      .addNode('task', (input: { n: number }) => ({ total: `${String(input.n).padStart(3, '0')}${'x'.repeat(BLOB - 3)}` }))
      .addEdge(START, 'fan')
      .addConditionalEdges('fan', () => Array.from({ length: TASKS }, (_, n) => new Send('task', { n })))
      .addEdge('task', END)
      .compile({ checkpointer: saver });
    const config = { configurable: { thread_id: 'large-writes' } };

    // Act
    const out = await graph.invoke({}, config);
    const history = [];
    for await (const tuple of saver.list(config)) history.push(tuple);
    const fanned = history.find((tuple) => tuple.metadata?.step === 1);
    const tuple = await saver.getTuple(fanned?.config ?? config);

    // Assess: the run's state, and every task's write of the fanned-out checkpoint, whole, both ways.
    expect(out.total).toBe(TASKS * BLOB);
    for (const writes of [fanned?.pendingWrites, tuple?.pendingWrites]) {
      const blobs = (writes ?? []).filter(([, channel]) => channel === 'total').map(([, , value]) => value as string);
      expect(blobs).toHaveLength(TASKS);
      expect(blobs.reduce((sum, blob) => sum + blob.length, 0)).toBe(TASKS * BLOB);
      expect(new Set(blobs.map((blob) => blob.slice(0, 3))).size).toBe(TASKS);
    }
  }, 240_000);
});
