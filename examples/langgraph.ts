/**
 * A LangGraph.js graph on agentstate: a trip planner with deterministic nodes (no model), a
 * human approval as an `interrupt`, and time travel. Every checkpoint is a node of the thread's
 * session, so the inspector shows the run as a path and the fork as a branch.
 *
 * With `npm start` running in another terminal:
 *
 *   npx tsx examples/langgraph.ts
 *
 * (`AGENTSTATE_URL` and `AGENTSTATE_API_KEY` point it elsewhere; docs/langgraph.md has the rest.)
 */
import { AgentStateSaver } from '@agentstate/langgraph';
import { Annotation, Command, END, INTERRUPT, interrupt, isInterrupted, START, StateGraph } from '@langchain/langgraph';
import type { BaseCheckpointSaver } from '@langchain/langgraph-checkpoint';

/** The graph's state: what the traveller asked for, the plan, the decision, and a log of steps. */
const TripState = Annotation.Root({
  destination: Annotation<string>(),
  nights: Annotation<number>(),
  plan: Annotation<string[]>(),
  approved: Annotation<boolean | null>(),
  booking: Annotation<string | null>(),
  /** Each node adds its line; the reducer keeps them all. */
  log: Annotation<string[]>({ reducer: (left, right) => [...left, ...right], default: () => [] }),
});

export type TripValues = typeof TripState.State;

/**
 * The planner: `draft` writes a plan, `review` stops for a person's yes or no (`interrupt`),
 * `book` books an approved plan and `revise` gives up on a refused one.
 */
export function tripPlanner(checkpointer: BaseCheckpointSaver) {
  return new StateGraph(TripState)
    .addNode('draft', (state) => ({
      plan: Array.from({ length: state.nights }, (_, night) => `night ${night + 1} in ${state.destination}`),
      log: [`drafted ${state.nights} nights in ${state.destination}`],
    }))
    .addNode('review', (state) => {
      // The run stops here until it is resumed with `new Command({ resume: 'yes' | 'no' })`.
      const answer = interrupt({ question: `Book ${state.plan.length} nights in ${state.destination}?` }) as string;
      return { approved: answer === 'yes', log: [`reviewed: ${answer}`] };
    })
    .addNode('book', (state) => ({ booking: `${state.destination}/${state.plan.length}`, log: ['booked'] }))
    .addNode('revise', () => ({ booking: null, log: ['not booked'] }))
    .addEdge(START, 'draft')
    .addEdge('draft', 'review')
    .addConditionalEdges('review', (state) => (state.approved ? 'book' : 'revise'), ['book', 'revise'])
    .addEdge('book', END)
    .addEdge('revise', END)
    .compile({ checkpointer });
}

/** What a run that stopped at an `interrupt` asks (undefined for a run that finished). */
export function questionOf(result: unknown): unknown {
  return isInterrupted(result) ? result[INTERRUPT][0]?.value : undefined;
}

async function main(): Promise<void> {
  const saver = new AgentStateSaver({
    baseUrl: process.env.AGENTSTATE_URL ?? 'http://localhost:4000',
    apiKey: process.env.AGENTSTATE_API_KEY ?? 'dev-key',
    prefix: 'example',
  });
  const graph = tripPlanner(saver);
  const config = { configurable: { thread_id: `trip-${Date.now()}` } };

  // Runs until the review asks its question.
  const paused = await graph.invoke({ destination: 'Lisbon', nights: 3 }, config);
  console.log('asks:', questionOf(paused));
  // A person says yes; the run goes on from the checkpoint it stopped at.
  console.log('booked:', (await graph.invoke(new Command({ resume: 'yes' }), config)).booking);

  // Time travel: back to the checkpoint that waited for the review, with two nights instead.
  let waiting: Awaited<ReturnType<typeof graph.getState>> | undefined;
  for await (const snapshot of graph.getStateHistory(config)) {
    if (snapshot.next.includes('review')) waiting = snapshot;
  }
  if (!waiting) throw new Error('no checkpoint waited for the review');
  const fork = await graph.updateState(waiting.config, { plan: ['night 1 in Lisbon', 'night 2 in Lisbon'] });
  await graph.invoke(null, fork);
  console.log('fork booked:', (await graph.invoke(new Command({ resume: 'yes' }), config)).booking);
  console.log(`session ${await saver.sessionIdOf(config.configurable.thread_id)}: the inspector shows the fork as a branch`);
}

if (import.meta.url === `file://${process.argv[1]}`) await main();
