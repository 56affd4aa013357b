/**
 * Section 3: concurrency. Writers PATCH one session at once (and then one session each):
 * throughput, latency, races lost and retried, and a check that nothing acknowledged was lost.
 */
import { performance } from 'node:perf_hooks';
import { handlers } from '../functions/http/index.js';
import { CONTENTION, jsonHeaders, log, SCALE } from './config.js';
import { scope, type Wired } from './fixture.js';
import { invoke } from './invoke.js';
import { median, ms, pad, padLeft, percentile, tableRow } from './measure.js';
import type { Cost, Meter } from './meter.js';
import { chain } from './scale-fixture.js';

export interface ContentionResult {
  label: string;
  writes: number;
  seconds: number;
  statuses: Record<string, number>;
  acknowledged: number;
  samples: number[];
  cost: Cost;
  lost: number;
  gaps: number;
}

/** What each writer sends: a PATCH setting a key of its own, or an append of one message of its own at the head. */
type Write = 'patch' | 'append';

function request(write: Write, sessionId: string, key: string, index: number) {
  return write === 'patch'
    ? { method: 'PATCH', url: `/v1/sessions/${sessionId}/state`, headers: jsonHeaders, body: JSON.stringify({ [key]: index }) }
    : {
        method: 'POST',
        url: `/v1/sessions/${sessionId}/messages`,
        headers: jsonHeaders,
        body: JSON.stringify({ messages: [{ id: key, role: 'user', content: 'x' }] }),
      };
}

async function contention(
  meter: Meter,
  main: Wired,
  label: string,
  sessionFor: (writer: number) => string,
  write: Write = 'patch',
): Promise<ContentionResult> {
  const acknowledged = new Map<string, Set<string>>();
  const statuses: Record<string, number> = {};
  const samples: number[] = [];
  meter.reset();
  const start = performance.now();
  await Promise.all(
    Array.from({ length: CONTENTION.writers }, async (_, writer) => {
      for (let index = 0; index < CONTENTION.writesEach; index++) {
        const sessionId = sessionFor(writer);
        const key = `w${writer}-k${index}`;
        const begin = performance.now();
        const response = await invoke(handlers, request(write, sessionId, key, index));
        samples.push(performance.now() - begin);
        statuses[response.status] = (statuses[response.status] ?? 0) + 1;
        const done = write === 'patch' ? response.status === 200 && response.json?.changed === true : response.status === 201;
        if (done) {
          const keys = acknowledged.get(sessionId) ?? new Set<string>();
          keys.add(key);
          acknowledged.set(sessionId, keys);
        }
      }
    }),
  );
  const seconds = (performance.now() - start) / 1000;
  const cost = meter.reset();
  // Nothing lost: every acknowledged key is in the final state (every acknowledged message on
  // the path to the head); versions are 1..n, no gaps.
  let lost = 0;
  let gaps = 0;
  for (const [sessionId, keys] of acknowledged) {
    const kept =
      write === 'patch'
        ? new Set(Object.keys((await main.service.readState(scope(sessionId), {})).state as Record<string, unknown>))
        : new Set((await main.service.getPath(scope(sessionId))).messages.map((message) => message.id));
    for (const key of keys) if (!kept.has(key)) lost++;
    const numbers: number[] = [];
    let cursor: string | undefined;
    do {
      const page = await main.service.listVersions(scope(sessionId), { limit: 500, ...(cursor ? { cursor } : {}) });
      numbers.push(...page.items.map((item) => item.version));
      cursor = page.next;
    } while (cursor);
    numbers.forEach((number, index) => {
      if (number !== numbers.length - index) gaps++;
    });
  }
  meter.reset();
  const writes = CONTENTION.writers * CONTENTION.writesEach;
  const ok = [...acknowledged.values()].reduce((sum, keys) => sum + keys.size, 0);
  const retries = lostRaces(cost);
  log(
    `  ${pad(label, 34)} ${padLeft((writes / seconds).toFixed(0), 5)} writes/s  p50 ${ms(median(samples))} ms  ` +
      `p99 ${ms(percentile(samples, 99))} ms  statuses ${JSON.stringify(statuses)}  lost races (retries) ${retries}  ` +
      `lost writes ${lost}  version gaps ${gaps}`,
  );
  return { label, writes, seconds, statuses, acknowledged: ok, samples, cost, lost, gaps };
}

/** Writes that lost the race for the next version slot, each retried. */
const lostRaces = (cost: Cost) => (cost.errors.ConditionalCheckFailedException ?? 0) + (cost.errors.TransactionCanceledException ?? 0);

export async function measureConcurrency(meter: Meter, main: Wired): Promise<ContentionResult[]> {
  log(
    `\n3. Concurrency: ${CONTENTION.writers} writers × ${CONTENTION.writesEach} PATCHes, each setting its own key; then ${CONTENTION.writers} appenders × ${CONTENTION.writesEach}`,
  );
  // The same contention on a short conversation and on a long one: a write reads the tip alone,
  // so the depth must not show.
  await Promise.all([chain(main, 'contended', 10), chain(main, 'contended-deep', SCALE.depth), chain(main, 'contended-appends', 10)]);
  const hot = await contention(meter, main, 'one session (contended), depth 10', () => 'contended');
  const deep = await contention(meter, main, `one session (contended), depth ${SCALE.depth}`, () => 'contended-deep');
  const spread = await contention(meter, main, `${CONTENTION.writers} sessions (one each)`, (writer) => `uncontended-${writer}`);
  // Appends are blind writes to the same log and wait in the same queue (functions/core/write/write-retry.ts).
  const appends = await contention(meter, main, 'one session, appends (contended), depth 10', () => 'contended-appends', 'append');
  return [hot, deep, spread, appends];
}

export function contentionTable(results: ContentionResult[]): string {
  const lines = [
    '| writers on | writes | writes/s | p50 ms | p99 ms | statuses | lost races retried | acknowledged | lost | version gaps |',
    '|---|---:|---:|---:|---:|---|---:|---:|---:|---:|',
  ];
  for (const result of results) {
    const statuses = Object.entries(result.statuses)
      .map(([status, count]) => `${count} × ${status}`)
      .join(', ');
    lines.push(
      tableRow([
        result.label,
        result.writes,
        (result.writes / result.seconds).toFixed(0),
        ms(median(result.samples)),
        ms(percentile(result.samples, 99)),
        statuses,
        lostRaces(result.cost),
        result.acknowledged,
        result.lost,
        result.gaps,
      ]),
    );
  }
  return lines.join('\n');
}
