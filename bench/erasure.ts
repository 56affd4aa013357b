/**
 * Erasure of a user (issue 34, API.md section 12): a user with 100 sessions (each with a few
 * versions) and 1,000 memory items, and a user ten times that (1,000 sessions, 10,000 items),
 * erased. Measured apart: the `DELETE`'s own work (through the sessions route group's handler,
 * with no change hook running yet: it starts the erasure and answers `409` once its wait runs
 * out, which the bench sets to nothing), then the change hook's closing (what makes it all
 * unreadable: the `DELETE` sent then answers `202`) and its erasing (what makes it all
 * unstored), each run as the hook runs them. `npm run bench -- --only=erasure` prints it.
 */
import { handlers } from '../functions/http/index.js';
import { ErasureFinisher } from '../functions/store/erasure/erasure-finish.js';
import { jsonHeaders, log, TENANT } from './config.js';
import type { Wired } from './fixture.js';
import { invoke } from './invoke.js';
import { tableRow } from './measure.js';
import type { Cost, Meter } from './meter.js';

const SIZES = [
  { sessions: 100, versionsEach: 3, memoryItems: 1_000 },
  { sessions: 1_000, versionsEach: 1, memoryItems: 10_000 },
] as const;

type Size = (typeof SIZES)[number];

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

const request = (method: string, url: string, body?: unknown) =>
  invoke(handlers, { method, url, headers: jsonHeaders, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });

/** A user with `size`'s sessions and memory items, through the routes. */
async function userOf(size: Size): Promise<string> {
  const user = `erased-${size.sessions}-${Date.now().toString(36)}`;
  await inBatches(
    Array.from({ length: size.sessions }, (_, index) => async () => {
      const sid = `${user}-s${index}`;
      if ((await request('POST', '/v1/sessions', { sessionId: sid, userId: user })).status !== 201) throw new Error('no session');
      for (let version = 1; version <= size.versionsEach; version++)
        await request('PATCH', `/v1/sessions/${sid}/state`, { version, note: 'x'.repeat(900) });
    }),
  );
  await inBatches(
    Array.from({ length: size.memoryItems }, (_, index) => async () => {
      const put = await request('PUT', `/v1/memory/users/${user}/notes${index % 10}/n${index}`, {
        value: { index, text: 'y'.repeat(200) },
      });
      if (put.status !== 201) throw new Error(`a memory put answered ${put.status}`);
    }),
  );
  return user;
}

export async function measureErasure(meter: Meter, main: Wired): Promise<ErasureStep[]> {
  // The DELETE answers at once, with the change hook not running here: its own work alone is measured.
  process.env.AGENTSTATE_ERASURE_WAIT_MS = '0';
  const steps: ErasureStep[] = [];
  for (const size of SIZES) {
    const user = await userOf(size);
    const name = `${size.sessions.toLocaleString('en-US')} sessions, ${size.memoryItems.toLocaleString('en-US')} items`;
    const timed = async (label: string, work: () => Promise<unknown>) => {
      const started = performance.now();
      const { cost } = await meter.measure(work);
      steps.push({
        label: `${name}: ${label}`,
        ms: performance.now() - started,
        requests: requestsOf(cost),
        readUnits: cost.readUnits,
        writeUnits: cost.writeUnits,
      });
    };
    let erasureId = '';
    await timed('the `DELETE` (starts it; `409` with no hook running)', async () => {
      const answer = await request('DELETE', `/v1/users/${user}`);
      if (answer.status !== 409) throw new Error(`DELETE /v1/users answered ${answer.status}`);
      erasureId = answer.json.erasureId;
    });
    const finisher = new ErasureFinisher(main.table, main.store);
    await timed('the change hook closes: all unreadable (the `DELETE` answers `202`)', () =>
      finisher.finish(TENANT, erasureId, Number.POSITIVE_INFINITY, 'closed'),
    );
    if ((await request('DELETE', `/v1/users/${user}`)).status !== 202) throw new Error('the DELETE sent again did not answer 202');
    await timed('the change hook erases: all unstored (`done`)', () => finisher.finish(TENANT, erasureId, Number.POSITIVE_INFINITY));
    const record = await request('GET', `/v1/erasures/${erasureId}`);
    if (record.json.status !== 'done' || record.json.sessions !== size.sessions || record.json.memoryItems !== size.memoryItems)
      throw new Error(`the erasure is not what was there: ${record.text}`);
  }
  log(`\n${erasureSection(steps)}`);
  return steps;
}

export function erasureSection(steps: readonly ErasureStep[]): string {
  const row = (step: ErasureStep) =>
    tableRow([
      step.label,
      `${(step.ms / 1000).toFixed(2)} s`,
      String(step.requests),
      step.readUnits.toFixed(1),
      step.writeUnits.toFixed(1),
    ]);
  return `## Erasure of a user

A user with ${SIZES[0].sessions} sessions (${SIZES[0].versionsEach} versions of a 1 KB state each) and ${SIZES[0].memoryItems.toLocaleString('en-US')} memory items under \`users/<userId>\` (in 10
namespaces), and one with ${SIZES[1].sessions.toLocaleString('en-US')} sessions (${SIZES[1].versionsEach} version each) and ${SIZES[1].memoryItems.toLocaleString('en-US')} items, erased (docs/api.md §2b): the
\`DELETE\` through the sessions route group's handler (its work is the same at any size: the
user's erasure item, the erasure's item, one look at it), then the change hook's two steps as the
hook runs them, in runs of bounded length, one after the other on one machine and one DynamoDB
Local (\`npm run bench -- --only=erasure\`). A \`DELETE\` waits up to 12 s for the closing and
answers \`202\` when it is done; past that, \`409\` with the erasure's id while the hook goes on.

${tableRow(['user: step', 'time', 'requests', 'RCU', 'WCU'])}
${tableRow(['---', '---:', '---:', '---:', '---:'])}
${steps.map(row).join('\n')}
`;
}
