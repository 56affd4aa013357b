import { type Browser, chromium } from 'playwright-core';
import type { ApiClient } from '../helpers/api-client.js';
import { installedBrowser } from './find-browser.js';

/** Headless, with everything that would reach out to the internet turned off (no network here). */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: installedBrowser(),
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}

const check = <T extends { status: number; text: string }>(what: string, response: T, expected: number): T => {
  if (response.status !== expected) throw new Error(`${what}: expected ${expected}, got ${response.status} ${response.text}`);
  return response;
};

export interface TripSession {
  sessionId: string;
  /** The fork point: two branches grow under it. */
  forkNode: string;
  /** The head: the end of the second branch. */
  head: string;
  /** The end of the first branch. */
  firstBranchEnd: string;
}

/**
 * A small planning conversation with one fork, through the public API:
 *
 *   root ─ u1 ─ a1 (v1: Lisbon, 3 days) ┬ u2 ─ a2 (v2: May, budget, plan)
 *                                       └ u2b ─ a2b (v3: Porto)   ← head
 */
export async function seedTripSession(client: ApiClient, sessionId: string): Promise<TripSession> {
  const base = `/v1/sessions/${sessionId}`;
  check('create', await client.post('/v1/sessions', { sessionId, agentId: 'planner', userId: 'u-42', metadata: { channel: 'web' } }), 201);
  check(
    'append',
    await client.post(`${base}/messages`, {
      messages: [
        { id: 'u1', role: 'user', content: 'Plan a three-day trip to Lisbon for me, please.' },
        { id: 'a1', role: 'assistant', content: 'Happy to. When are you travelling, and what kind of budget do you have in mind?' },
      ],
    }),
    201,
  );
  check('v1', await client.patch(`${base}/state`, { destination: 'Lisbon', days: 3, plan: [], preferences: { pace: 'relaxed' } }), 200);
  check(
    'append',
    await client.post(`${base}/messages`, {
      messages: [
        { id: 'u2', role: 'user', content: 'In May, on a tight budget. I love food markets and old neighbourhoods.' },
        {
          id: 'a2',
          role: 'assistant',
          content: [{ type: 'text', text: 'Day 1: Alfama and the castle. Day 2: Belém and LX Factory. Day 3: Time Out Market.' }],
        },
      ],
    }),
    201,
  );
  check('v2', await client.patch(`${base}/state`, { month: 'May', budget: 'low', plan: ['Alfama', 'Belém', 'Time Out Market'] }), 200);
  check(
    'branch',
    await client.post(`${base}/messages`, {
      parentId: 'a1',
      messages: [
        { id: 'u2b', role: 'user', content: 'Actually, could we do Porto instead? Same dates.' },
        { id: 'a2b', role: 'assistant', content: 'Porto it is: Ribeira on day one, the Douro valley on day two, Matosinhos on day three.' },
      ],
    }),
    201,
  );
  check('v3', await client.patch(`${base}/state`, { destination: 'Porto', plan: ['Ribeira', 'Douro valley', 'Matosinhos'] }), 200);
  return { sessionId, forkNode: 'a1', head: 'a2b', firstBranchEnd: 'a2' };
}

/**
 * A long conversation: `turns` user/assistant pairs on the main line, with a regenerated reply
 * (a branch) every `branchEvery` turns, and a state write every few turns.
 */
export async function seedLargeSession(client: ApiClient, sessionId: string, turns: number, branchEvery = 10): Promise<number> {
  const base = `/v1/sessions/${sessionId}`;
  let nodes = 1;
  const chain: Array<{ id: string; role: string; content: string }> = [];
  const flush = async () => {
    if (chain.length === 0) return;
    check('append', await client.post(`${base}/messages`, { messages: chain.splice(0) }), 201);
  };
  for (let turn = 1; turn <= turns; turn += 1) {
    chain.push({ id: `q${turn}`, role: 'user', content: `Question ${turn}: what about step ${turn}?` });
    chain.push({ id: `r${turn}`, role: 'assistant', content: `Answer ${turn}: step ${turn} is done.` });
    nodes += 2;
    if (chain.length >= 40) await flush();
    if (turn % branchEvery === 0) {
      await flush();
      // A regenerated reply: a sibling of r<turn>, then back to the main line.
      check(
        'branch',
        await client.post(`${base}/messages`, {
          parentId: `q${turn}`,
          messages: [{ id: `r${turn}-alt`, role: 'assistant', content: `Another answer to ${turn}.` }],
        }),
        201,
      );
      check('head', await client.put(`${base}/head`, { nodeId: `r${turn}` }), 200);
      check('state', await client.patch(`${base}/state`, { turn, progress: turn / turns }), 200);
      nodes += 1;
    }
  }
  await flush();
  return nodes;
}
