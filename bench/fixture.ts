/**
 * What every section measures on: the services wired as the Lambdas wire them, a 1 KB state,
 * and one session per operation, written before anything is timed.
 */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { Json } from '../functions/core/json/json.js';
import type { SessionScope } from '../functions/core/model/model.js';
import type { SessionService } from '../functions/core/sessions/session-service.js';
import { type Dependencies, dependenciesFor } from '../functions/http/dependencies.js';
import { keysFromEnv } from '../functions/http/edge/auth.js';
import { createStores } from '../functions/store/index.js';
import * as sessionItem from '../functions/store/sessions/session-item.js';
import type { DynamoDbSessionStore } from '../functions/store/sessions/session-store.js';
import { ensureTable } from '../functions/store/table/table.js';
import { batchPut, type TableClient } from '../functions/store/table/table-client.js';
import { API_KEY, TENANT } from './config.js';

export interface Wired {
  deps: Dependencies;
  store: DynamoDbSessionStore;
  service: SessionService;
  table: TableClient;
}

/** A table and the services on it, as the handlers get them in AWS (functions/http/dependencies.ts). */
export async function wire(client: DynamoDBClient, tableName: string): Promise<Wired> {
  await ensureTable(client, tableName);
  const stores = createStores(client, tableName);
  const deps = dependenciesFor(stores, {
    resolveKey: keysFromEnv(`${TENANT}:${API_KEY}`),
    // An in-process worker, so that decide is measured without a network hop: it counts turns,
    // and answers a client's message with one reply (a conversation turn).
    invokeWorker: async (_worker, body) => {
      const request = JSON.parse(body) as { state: { counter?: number } | null; trigger: { type: string } };
      const state = { ...(request.state ?? {}), counter: (request.state?.counter ?? 0) + 1 };
      if (request.trigger.type !== 'client.messages') return { state };
      return {
        state,
        messages: [{ role: 'assistant', content: `reply ${state.counter}: ${'a short answer of an assistant '.repeat(3)}` }],
      };
    },
  });
  return { deps, store: stores.sessions, service: deps.sessions, table: stores.table };
}

/** A state of about 1 KB, like a small agent memory. */
export function kilobyteState(counter: number): Json {
  return {
    profile: { name: 'Ada', locale: 'en-GB', plan: 'pro', tz: 'Europe/London' },
    preferences: { model: 'fast', temperature: 0.2, tools: ['search', 'calendar', 'mail'] },
    facts: Array.from({ length: 8 }, (_, index) => `fact ${index}: ${'lorem ipsum dolor sit amet '.repeat(3)}`),
    counter,
  };
}
export const STATE_BYTES = Buffer.byteLength(JSON.stringify(kilobyteState(0)));

export const scope = (sessionId: string): SessionScope => ({ tenant: TENANT, sessionId });

/** Sessions, one per operation, so that each operation always has the same shape. */
export const sessionIds = {
  read: 'read',
  moved: 'moved',
  node: 'node',
  patch: 'patch',
  put: 'put',
  append1: 'append-1',
  append25: 'append-25',
  versions: 'versions',
  servicePatch: 'service-patch',
  decide: 'decide',
  routed: 'routed',
  turn: 'turn',
  commit: 'commit',
};

/** The agent whose in-process worker the decide rows call. */
export const BENCH_AGENT = 'bench-agent';

/** Puts the agent of the decide rows (its worker is `wire`'s in-process one). */
export const putBenchAgent = (wired: Wired) =>
  wired.deps.agents.putAgent(TENANT, BENCH_AGENT, { worker: { url: 'module:examples/worker.ts' }, config: { model: 'fast' } });

/** The routed decide row's agents: a router whose one route (the state has a counter) hands every decision to the agent below it. */
const ROUTER_AGENT = 'bench-router';
async function putRouterAgents(wired: Wired): Promise<void> {
  const worker = { url: 'module:examples/worker.ts' };
  await wired.deps.agents.putAgent(TENANT, ROUTER_AGENT, { worker, config: { model: 'fast' } });
  await wired.deps.agents.putAgent(TENANT, `${ROUTER_AGENT}-below`, { parentId: ROUTER_AGENT, worker });
  await wired.deps.agents.putAgent(TENANT, ROUTER_AGENT, {
    worker,
    config: { model: 'fast' },
    routes: [{ when: { counter: { $exists: true } }, to: `${ROUTER_AGENT}-below` }],
  });
}

/** A client's message of a conversation turn: the trigger of the turn rows. */
export const turnBody = (iteration: number) =>
  JSON.stringify({
    trigger: {
      type: 'client.messages',
      messages: [{ role: 'user', content: `question ${iteration}: ${'some words of a question '.repeat(3)}` }],
    },
  });

/** Writes each operation's session: a state, a head moved by an append, a branch, 60 versions. */
export async function writeSessions(main: Wired): Promise<void> {
  const s = sessionIds;
  await main.service.replaceState(scope(s.read), kilobyteState(0));
  await main.service.replaceState(scope(s.moved), kilobyteState(0));
  await main.service.appendMessages(scope(s.moved), { messages: [{ id: 'm1', role: 'user', content: 'hello' }] });
  await main.service.appendMessages(scope(s.node), {
    messages: [
      { id: 'n1', role: 'user', content: 'one' },
      { id: 'n2', role: 'assistant', content: 'two' },
    ],
  });
  await main.service.replaceState(scope(s.node), kilobyteState(1), { node: 'n1' });
  await main.service.appendMessages(scope(s.node), { messages: [{ id: 'n3', role: 'user', content: 'three' }] });
  await main.service.replaceState(scope(s.node), kilobyteState(3));
  await putBenchAgent(main);
  await main.deps.sessions.createSession(TENANT, { sessionId: s.decide, agentId: BENCH_AGENT });
  await putRouterAgents(main);
  await main.deps.sessions.createSession(TENANT, { sessionId: s.routed, agentId: ROUTER_AGENT });
  await main.deps.sessions.createSession(TENANT, { sessionId: s.turn, agentId: BENCH_AGENT });
  for (const sessionId of [s.patch, s.put, s.append1, s.append25, s.servicePatch, s.decide, s.routed, s.turn, s.commit]) {
    await main.service.replaceState(scope(sessionId), kilobyteState(0));
  }
  for (let version = 1; version <= 60; version++) await main.service.replaceState(scope(s.versions), kilobyteState(version));
}

/** Failures a fixture's write may meet on a busy DynamoDB Local, and that a repeat of the same write cures. */
const passing = new Set(['unavailable', 'throttled']);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Runs one idempotent set-up write until it lands: a DynamoDB Local that shares two cores with
 * the writers can answer later than a request's 3 s timeout, and a set-up that gives up there
 * takes the whole run down with it. Full-jitter backoff, up to a minute.
 */
export async function untilWritten<T>(write: () => Promise<T>, attempts = 12): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await write();
    } catch (error) {
      if (attempt >= attempts || !passing.has(String((error as { code?: unknown }).code))) throw error;
      await sleep(Math.random() * Math.min(8_000, 250 * 2 ** attempt));
    }
  }
}

/**
 * `count` filler sessions (`filler-0` …), each the session and metadata items `createSession` puts, written
 * in batches of 25 with a few batches in flight, unprocessed items and timeouts retried: a
 * table that holds that many sessions for the scale rows, built without 10,000 racing requests.
 */
export async function writeFillerSessions(wired: Wired, count: number, inFlight = 4): Promise<void> {
  const at = new Date().toISOString();
  // Each with its metadata's item beside it, as `createSession` puts them (session-item.ts).
  const items = Array.from({ length: count }, (_, index) => {
    const scope = { tenant: TENANT, sessionId: `filler-${index}` };
    const stamp = sessionItem.newMetadataStamp();
    const metadata = { n: index };
    return [
      sessionItem.encode(
        scope,
        { sessionId: scope.sessionId, agentId: 'planner', userId: null, metadata, createdAt: at, updatedAt: at },
        stamp,
      ),
      sessionItem.encodeMetadata(scope, metadata, stamp),
    ];
  }).flat();
  let next = 0;
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      for (let offset = next; offset < items.length; offset = next) {
        next += 25;
        await untilWritten(() => batchPut(wired.table, items.slice(offset, offset + 25)));
      }
    }),
  );
}
