/**
 * Erasure of a user (issue 34, API.md section 12): a user with 100 sessions (each with a few
 * versions) and 1,000 memory items, erased. Two steps, measured apart: the `DELETE` (through
 * the sessions route group's handler: what makes it all unreadable before its `202`) and the
 * change hook's second step (erasure-finish.ts, called as the hook calls it: what makes it all
 * unstored). `npm run bench -- --only=erasure` prints it.
 */
import { handlers } from '../functions/http/index.js';
import { ErasureFinisher } from '../functions/store/erasure/erasure-finish.js';
import { jsonHeaders, log, TENANT } from './config.js';
import type { Wired } from './fixture.js';
import { invoke } from './invoke.js';
import { tableRow } from './measure.js';
import type { Cost, Meter } from './meter.js';

const ERASURE = { sessions: 100, versionsEach: 3, memoryItems: 1_000 };

export interface ErasureStep {
  label: string;
  ms: number;
  requests: number;
  readUnits: number;
  writeUnits: number;
}

const requestsOf = (cost: Cost) => Object.values(cost.requests).reduce((sum, count) => sum + count, 0);

/** Runs `calls` side by side, `width` at a time. */
async function inBatches(calls: Array<() => Promise<unknown>>, width = 20): Promise<void> {
  for (let start = 0; start < calls.length; start += width) await Promise.all(calls.slice(start, start + width).map((call) => call()));
}

export async function measureErasure(meter: Meter, main: Wired): Promise<ErasureStep[]> {
  const user = `erased-${Date.now().toString(36)}`;
  const request = (method: string, url: string, body?: unknown) =>
    invoke(handlers, { method, url, headers: jsonHeaders, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  await inBatches(
    Array.from({ length: ERASURE.sessions }, (_, index) => async () => {
      const sid = `${user}-s${index}`;
      if ((await request('POST', '/v1/sessions', { sessionId: sid, userId: user })).status !== 201) throw new Error('no session');
      for (let version = 1; version <= ERASURE.versionsEach; version++)
        await request('PATCH', `/v1/sessions/${sid}/state`, { version, note: 'x'.repeat(900) });
    }),
  );
  await inBatches(
    Array.from({ length: ERASURE.memoryItems }, (_, index) => async () => {
      const put = await request('PUT', `/v1/memory/users/${user}/notes${index % 10}/n${index}`, {
        value: { index, text: 'y'.repeat(200) },
      });
      if (put.status !== 201) throw new Error(`a memory put answered ${put.status}`);
    }),
  );

  const steps: ErasureStep[] = [];
  const timed = async (label: string, work: () => Promise<unknown>) => {
    const started = performance.now();
    const { cost } = await meter.measure(work);
    steps.push({
      label,
      ms: performance.now() - started,
      requests: requestsOf(cost),
      readUnits: cost.readUnits,
      writeUnits: cost.writeUnits,
    });
  };
  let erasureId = '';
  await timed('the DELETE: everything closed, unreadable (until the 202)', async () => {
    const answer = await request('DELETE', `/v1/users/${user}`);
    if (answer.status !== 202) throw new Error(`DELETE /v1/users answered ${answer.status}`);
    erasureId = answer.json.erasureId;
  });
  await timed('the change hook: everything erased, unstored (until done)', () =>
    new ErasureFinisher(main.table, main.store).finish(TENANT, erasureId),
  );
  const record = await request('GET', `/v1/erasures/${erasureId}`);
  if (record.json.status !== 'done' || record.json.sessions !== ERASURE.sessions || record.json.memoryItems !== ERASURE.memoryItems)
    throw new Error(`the erasure is not what was there: ${record.text}`);
  log(`\n${erasureSection(steps)}`);
  return steps;
}

export function erasureSection(steps: readonly ErasureStep[]): string {
  const total = steps.reduce(
    (sum, step) => ({
      ms: sum.ms + step.ms,
      requests: sum.requests + step.requests,
      readUnits: sum.readUnits + step.readUnits,
      writeUnits: sum.writeUnits + step.writeUnits,
    }),
    { ms: 0, requests: 0, readUnits: 0, writeUnits: 0 },
  );
  const row = (label: string, step: Omit<ErasureStep, 'label'>) =>
    tableRow([label, `${(step.ms / 1000).toFixed(2)} s`, String(step.requests), step.readUnits.toFixed(1), step.writeUnits.toFixed(1)]);
  return `## Erasure of a user

A user with ${ERASURE.sessions} sessions (${ERASURE.versionsEach} versions of a 1 KB state each) and ${ERASURE.memoryItems.toLocaleString('en-US')} memory items under \`users/<userId>\` (in 10
namespaces) erased (docs/api.md §2b): the \`DELETE\` through the sessions route group's handler,
then the change hook's second step as the hook runs it, one after the other on one machine and one
DynamoDB Local (\`npm run bench -- --only=erasure\`).

${tableRow(['step', 'time', 'requests', 'RCU', 'WCU'])}
${tableRow(['---', '---:', '---:', '---:', '---:'])}
${steps.map((step) => row(step.label, step)).join('\n')}
${row('erasure of a user with 100 sessions and 1,000 memory items', total)}
`;
}
