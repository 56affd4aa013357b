/**
 * Section 2: scale. The same request against a small and a large case (tree depth, history
 * length, sessions in the table): the requests per operation must not grow with any of them.
 */

import { performance } from 'node:perf_hooks';
import { useDependencies } from '../functions/http/dependencies.js';
import { auth, jsonHeaders, log, SCALE } from './config.js';
import { turnBody, type Wired } from './fixture.js';
import { handlerRun, type Measured, measureAll, median, ms, type Operation, pad, padLeft, requestsText, tableRow } from './measure.js';
import type { Meter } from './meter.js';
import { messages } from './operations.js';
import { type ScaleFixture, startScaleFixture } from './scale-fixture.js';

/**
 * Ticks run on each side before the tick row is measured: past the ~24 whose changes still
 * hold a new session's path among the tip read's 48 newest.
 */
export const TICK_WARMUP = 30;

interface Pair {
  what: string;
  /** What it writes or reads; writes run on sessions of their own at each depth. */
  small: string;
  large: string;
  a: (i: number) => () => Promise<unknown>;
  b: (i: number) => () => Promise<unknown>;
  /** Set for reads whose cost is expected to grow (documented), to show it honestly. */
  grows?: string;
  /** Switch dependencies before each side (the sessions pair uses two tables). */
  beforeA?: () => void;
  beforeB?: () => void;
}
export interface PairResult {
  pair: Pair;
  small: Measured;
  large: Measured;
}

export interface ScaleResult {
  /** How long the fixture took to write (bench/scale-fixture.ts). */
  setupSeconds: number;
  depthResults: PairResult[];
  historyResults: PairResult[];
  sessionResults: PairResult[];
}

async function measurePairs(
  meter: Meter,
  main: Wired,
  group: string,
  pairs: Pair[],
  iterations: number = SCALE.iterations,
  warmup: number = Math.min(10, iterations),
): Promise<PairResult[]> {
  const ops: Operation[] = [];
  const sides = new Map<Operation, () => void>();
  for (const pair of pairs) {
    const a: Operation = { name: `${pair.what} — ${pair.small}`, layer: 'handler', kind: 'read', make: pair.a };
    const b: Operation = { name: `${pair.what} — ${pair.large}`, layer: 'handler', kind: 'read', make: pair.b };
    ops.push(a, b);
    if (pair.beforeA) sides.set(a, pair.beforeA);
    if (pair.beforeB) sides.set(b, pair.beforeB);
  }
  // Dependencies are switched inside the timed function's set-up, before the clock starts.
  const wrapped = ops.map((operation) => ({
    ...operation,
    make: (i: number) => {
      sides.get(operation)?.();
      return operation.make(i);
    },
  }));
  const results = await measureAll(meter, wrapped, iterations, warmup);
  useDependencies(main.deps);
  const out: PairResult[] = [];
  for (let index = 0; index < pairs.length; index++) {
    out.push({ pair: pairs[index] as Pair, small: results[2 * index] as Measured, large: results[2 * index + 1] as Measured });
  }
  log(`  ${group}`);
  for (const { pair, small, large } of out) {
    log(
      `    ${pad(pair.what, 46)} ${pad(pair.small, 16)} ${padLeft(ms(median(small.samples)), 7)} ms ` +
        `${pad(requestsText(small.cost, small.samples.length), 30)}` +
        ` | ${pad(pair.large, 18)} ${padLeft(ms(median(large.samples)), 7)} ms ${requestsText(large.cost, large.samples.length)}`,
    );
  }
  return out;
}

/** Section 2, on a DynamoDB Local of its own (bench/scale-fixture.ts); `runMain`'s dependencies are in use again after it. */
export async function measureScale(meter: Meter, runMain: Wired): Promise<ScaleResult> {
  log('\n2. Scale: cost per read must not grow with depth, history or the number of sessions');

  const sectionStart = performance.now();
  const fixture = await startScaleFixture(meter);
  try {
    const result = await measureOn(meter, fixture);
    log(`  (section 2 in ${((performance.now() - sectionStart) / 1000).toFixed(1)} s, its set-up included)`);
    return result;
  } finally {
    useDependencies(runMain.deps);
    await fixture.stop();
  }
}

async function measureOn(meter: Meter, { main, one, many, setupSeconds }: ScaleFixture): Promise<ScaleResult> {
  useDependencies(main.deps);
  meter.reset();

  const get = (url: string) => (_i: number) => handlerRun({ method: 'GET', url, headers: auth }, 200);
  const patch = (sessionId: string) => (i: number) =>
    handlerRun(
      { method: 'PATCH', url: `/v1/sessions/${sessionId}/state`, headers: jsonHeaders, body: JSON.stringify({ counter: i }) },
      200,
    );
  const post = (sessionId: string, what: 'messages' | 'decide', body: (i: number) => string, status: number) => (i: number) =>
    handlerRun({ method: 'POST', url: `/v1/sessions/${sessionId}/${what}`, headers: jsonHeaders, body: body(i) }, status);
  const depths = { small: 'depth 10', large: `depth ${SCALE.depth}` };
  const tick = () => '{"trigger":{"type":"tick"}}';

  const depthResults = await measurePairs(meter, main, `tree depth (10 vs ${SCALE.depth})`, [
    {
      what: 'GET state (head)',
      small: 'depth 10',
      large: `depth ${SCALE.depth}`,
      a: get('/v1/sessions/depth-small/state'),
      b: get('/v1/sessions/depth-large/state'),
    },
    {
      what: 'GET state?node= (parent of the head)',
      small: 'depth 9',
      large: `depth ${SCALE.depth - 1}`,
      a: get('/v1/sessions/depth-small/state?node=d9'),
      b: get(`/v1/sessions/depth-large/state?node=d${SCALE.depth - 1}`),
    },
    {
      what: 'GET state?node= (near the root)',
      small: 'depth 10, d2',
      large: `depth ${SCALE.depth}, d2`,
      a: get('/v1/sessions/depth-small/state?node=d2'),
      b: get('/v1/sessions/depth-large/state?node=d2'),
    },
    { what: 'PATCH state (head)', small: 'depth 10', large: `depth ${SCALE.depth}`, a: patch('depth-small'), b: patch('depth-large') },
    {
      what: 'POST messages (append 1)',
      ...depths,
      a: post('append-1-small', 'messages', (i) => messages(1, i), 201),
      b: post('append-1-large', 'messages', (i) => messages(1, i), 201),
    },
    {
      what: 'POST messages (append 25)',
      ...depths,
      a: post('append-25-small', 'messages', (i) => messages(25, i), 201),
      b: post('append-25-large', 'messages', (i) => messages(25, i), 201),
    },
  ]);
  // Reads of the whole path: a path read returns it, and a decision shows it to the worker
  // (the agent's default, worker.messages "all"). Fewer rounds: each reads the whole path.
  const pathResults = await measurePairs(
    meter,
    main,
    `the whole path (depth 10 vs ${SCALE.depth})`,
    [
      {
        what: 'GET messages (the path root→head)',
        ...depths,
        a: get('/v1/sessions/depth-small/messages'),
        b: get('/v1/sessions/depth-large/messages'),
        grows: 'returns the whole path: requests grow with its bytes (one Query page per MB)',
      },
      {
        what: 'POST decide (a turn: client.messages, one reply, state changes)',
        ...depths,
        a: post('turn-small', 'decide', turnBody, 200),
        b: post('turn-large', 'decide', turnBody, 200),
        // Flat while the log that holds the path fits one page (1 MB): the tip read brings it.
        grows: 'the worker is shown the whole path (worker.messages "all"): past one page of the log, its older part is a range read more',
      },
    ],
    Math.max(5, Math.round(SCALE.iterations / 5)),
  );
  // A loop of decisions without messages, measured once each session runs it steadily. Their
  // tip read keeps the 48 newest changes (docs/architecture.md says why), and a tick adds two
  // (its lease and its version): a new session's short path is among them for its first ~24
  // ticks, which then cost a request less; past them, the path's range is read after the tip
  // at depth 10 as at 10,000. Measured from the same start, the two depths would differ by the
  // session's age, not by its depth.
  const tickResults = await measurePairs(
    meter,
    main,
    `a loop of ticks (depth 10 vs ${SCALE.depth}, after ${TICK_WARMUP} ticks each)`,
    [
      {
        what: `POST decide (tick, state changes; after ${TICK_WARMUP} ticks)`,
        ...depths,
        a: post('decide-small', 'decide', tick, 200),
        b: post('decide-large', 'decide', tick, 200),
      },
    ],
    Math.max(5, Math.round(SCALE.iterations / 5)),
    TICK_WARMUP,
  );
  depthResults.push(...pathResults, ...tickResults);
  const versions = { small: '10 versions', large: `${SCALE.versions} versions` };
  const historyResults = await measurePairs(meter, main, `history length (10 vs ${SCALE.versions} versions)`, [
    { what: 'GET state (head)', ...versions, a: get('/v1/sessions/history-small/state'), b: get('/v1/sessions/history-large/state') },
    {
      what: 'GET state?version=1 (oldest)',
      ...versions,
      a: get('/v1/sessions/history-small/state?version=1'),
      b: get('/v1/sessions/history-large/state?version=1'),
    },
    {
      what: 'GET versions (first page, limit 10)',
      ...versions,
      a: get('/v1/sessions/history-small/versions?limit=10'),
      b: get('/v1/sessions/history-large/versions?limit=10'),
    },
    {
      what: 'GET versions?node=root (lineage, limit 10)',
      ...versions,
      a: get('/v1/sessions/history-small/versions?node=root&limit=10'),
      b: get('/v1/sessions/history-large/versions?node=root&limit=10'),
    },
    { what: 'PATCH state (head)', ...versions, a: patch('history-small'), b: patch('history-large') },
  ]);
  // Each side of a sessions pair runs on its own table.
  const tables = {
    small: '1 session',
    large: `${SCALE.sessions} sessions`,
    beforeA: () => useDependencies(one.deps),
    beforeB: () => useDependencies(many.deps),
  };
  const sessionResults = await measurePairs(meter, main, `number of sessions (1 vs ${SCALE.sessions} in the table)`, [
    { what: 'GET state (head)', ...tables, a: get('/v1/sessions/target/state'), b: get('/v1/sessions/target/state') },
    { what: 'PATCH state (head)', ...tables, a: patch('target'), b: patch('target') },
    { what: 'GET session', ...tables, a: get('/v1/sessions/target'), b: get('/v1/sessions/target') },
    { what: 'GET sessions (first page, limit 10)', ...tables, a: get('/v1/sessions?limit=10'), b: get('/v1/sessions?limit=10') },
  ]);
  return { setupSeconds, depthResults, historyResults, sessionResults };
}

/** Rounded per request, so that a fraction of a request cannot make a pair look different. */
const shape = (measured: Measured) =>
  JSON.stringify(
    Object.entries(measured.cost.requests)
      .map(([name, count]) => [name, Math.round(count / measured.samples.length)])
      .filter(([, count]) => count !== 0)
      .sort(),
  );

export function pairTable(results: PairResult[]): string {
  const lines = ['| read | small | median ms | requests | large | median ms | requests | flat? |', '|---|---|---:|---|---|---:|---|---|'];
  for (const { pair, small, large } of results) {
    const a = requestsText(small.cost, small.samples.length);
    const b = requestsText(large.cost, large.samples.length);
    const flat = shape(small) === shape(large) ? 'yes' : pair.grows ? `grows: ${pair.grows}` : '**no**';
    lines.push(tableRow([pair.what, pair.small, ms(median(small.samples)), a, pair.large, ms(median(large.samples)), b, flat]));
  }
  return lines.join('\n');
}
