import { type AgentStateApi, createClient } from '@agentstate/client';
import { AgentStateSaver } from '@agentstate/langgraph';
import { Command } from '@langchain/langgraph';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { questionOf, tripPlanner } from '../../examples/langgraph.js';
import { type RunningApi, startApi } from '../helpers/e2e.js';

/**
 * A real LangGraph `StateGraph` (examples/langgraph.ts) on AgentStateSaver, on a real server and
 * DynamoDB Local: it stops at an `interrupt`, resumes, and travels back in time to a past
 * checkpoint, and the fork is a branch of the thread's session that the API shows.
 */
let api: RunningApi;
let saver: AgentStateSaver;
/** agentstate's own client, to see what the saver wrote as any API user would. */
let agentstate: AgentStateApi;

beforeAll(async () => {
  api = await startApi();
  saver = new AgentStateSaver({ baseUrl: api.url, apiKey: 'dev-key', prefix: 'graph' });
  agentstate = createClient({ baseUrl: api.url, apiKey: 'dev-key' });
});
afterAll(async () => {
  await api?.stop();
});

describe('a StateGraph on AgentStateSaver', () => {
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
