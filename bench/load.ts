/**
 * `npm run load`: the local server under a bounded, mixed load over loopback, then a check
 * that nothing acknowledged was lost.
 *
 * The server runs in its own process (bench/load-server.ts: `startLocalServer({ port: 0,
 * dataDir: 'memory' })`); autocannon drives it from this one for LOAD_SECONDS (default 20).
 * Traffic: PATCHes that each set a unique key (over many sessions and one hot session), appends,
 * and reads of state, versions and sessions. Afterwards, for every session, every PATCH that was
 * acknowledged with `200` and `changed: true` must be in the final state, and the versions must
 * be exactly 1..n with no gap. Results are printed and written into docs/benchmarks.md (the
 * section between the `load:` markers).
 *
 * Env: LOAD_SECONDS (20), LOAD_WARMUP_SECONDS (5, not measured but checked), LOAD_CONNECTIONS
 * (32), LOAD_SESSIONS (100), LOAD_HOT_SHARE (0.2: the share of requests on the hot session).
 */
import { existsSync, readFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { writeDoc } from './config.js';
import { startServerProcess } from './server-process.js';

const SECONDS = Number(process.env.LOAD_SECONDS ?? 20);
/** Unmeasured load first: DynamoDB Local is a JVM and runs slowly until its JIT has warmed up. */
const WARMUP_SECONDS = Number(process.env.LOAD_WARMUP_SECONDS ?? 5);
const CONNECTIONS = Number(process.env.LOAD_CONNECTIONS ?? 32);
const SESSIONS = Number(process.env.LOAD_SESSIONS ?? 100);
/** Share of requests that go to the one hot session (0 turns it off). */
const HOT_SHARE = Number(process.env.LOAD_HOT_SHARE ?? 0.2);
const API_KEY = 'load-key';
const HOT = 'hot';

const repoRoot = fileURLToPath(new URL('../', import.meta.url));
const DOC = join(repoRoot, 'docs', 'benchmarks.md');
const log = (line = '') => process.stdout.write(`${line}\n`);

// ---- the server -------------------------------------------------------------------------------

const server = await startServerProcess(`load:${API_KEY}`);
const baseUrl = server.url;
log(`server at ${baseUrl}; ${CONNECTIONS} connections for ${SECONDS} s over ${SESSIONS} sessions + 1 hot session`);

// ---- the load -------------------------------------------------------------------------------

type Operation = 'patch' | 'patch-hot' | 'append' | 'get-state' | 'get-versions' | 'get-session';
const mix: Array<[Operation, number]> = [
  ['patch', 30],
  ['patch-hot', HOT_SHARE > 0 ? 10 : 0],
  ['append', 5],
  ['get-state', 35],
  ['get-versions', 10],
  ['get-session', 10],
];
const totalWeight = mix.reduce((sum, [, weight]) => sum + weight, 0);
const pick = (): Operation => {
  let roll = Math.random() * totalWeight;
  for (const [operation, weight] of mix) {
    roll -= weight;
    if (roll < 0) return operation;
  }
  return 'get-state';
};
const sessionIds = Array.from({ length: SESSIONS }, (_, index) => `load-${index}`);
const randomSession = () => (Math.random() < HOT_SHARE ? HOT : (sessionIds[Math.floor(Math.random() * SESSIONS)] as string));

interface Pending {
  operation: Operation;
  sessionId: string;
  key?: string;
}
const acknowledged = new Map<string, Set<string>>();
const byOperation = new Map<Operation, Record<string, number>>();
const unexpected: string[] = [];
let measuring = false;
/** PATCHes built and PATCHes answered, warm-up included: the difference never got an answer. */
let patchesBuilt = 0;
let patchesAnswered = 0;
let keyCounter = 0;

const headers = { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' };
const request: autocannon.Request = {
  setupRequest: (base, context) => {
    const state = context as { pending?: Pending };
    const operation = pick();
    switch (operation) {
      case 'patch':
      case 'patch-hot': {
        const sessionId = operation === 'patch-hot' ? HOT : (sessionIds[Math.floor(Math.random() * SESSIONS)] as string);
        const key = `k${++keyCounter}`;
        state.pending = { operation, sessionId, key };
        patchesBuilt++;
        return { ...base, method: 'PATCH', path: `/v1/sessions/${sessionId}/state`, headers, body: JSON.stringify({ [key]: keyCounter }) };
      }
      case 'append': {
        const sessionId = randomSession();
        state.pending = { operation, sessionId };
        return {
          ...base,
          method: 'POST',
          path: `/v1/sessions/${sessionId}/messages`,
          headers,
          body: JSON.stringify({ messages: [{ role: 'user', content: `turn ${++keyCounter}` }] }),
        };
      }
      case 'get-state':
      case 'get-versions':
      case 'get-session': {
        const sessionId = randomSession();
        state.pending = { operation, sessionId };
        const path =
          operation === 'get-state'
            ? `/v1/sessions/${sessionId}/state`
            : operation === 'get-versions'
              ? `/v1/sessions/${sessionId}/versions?limit=10`
              : `/v1/sessions/${sessionId}`;
        return { ...base, method: 'GET', path, headers: { authorization: headers.authorization }, body: undefined };
      }
    }
  },
  onResponse: (status, body, context) => {
    const pending = (context as { pending?: Pending }).pending;
    if (!pending) return;
    if (pending.operation === 'patch' || pending.operation === 'patch-hot') patchesAnswered++;
    if (measuring) {
      const tally = byOperation.get(pending.operation) ?? {};
      tally[status] = (tally[status] ?? 0) + 1;
      byOperation.set(pending.operation, tally);
    }
    // A session read before its first write is 404 (GET session): expected, not an error.
    const expected =
      status === 200 || status === 201 || (status === 404 && (pending.operation === 'get-session' || pending.operation === 'get-versions'));
    if (!expected && unexpected.length < 10) unexpected.push(`${pending.operation} ${pending.sessionId} → ${status} ${body.slice(0, 200)}`);
    if ((pending.operation === 'patch' || pending.operation === 'patch-hot') && status === 200) {
      const parsed = JSON.parse(body) as { changed?: boolean };
      if (parsed.changed === true && pending.key) {
        const keys = acknowledged.get(pending.sessionId) ?? new Set<string>();
        keys.add(pending.key);
        acknowledged.set(pending.sessionId, keys);
      }
    }
  },
};

const loadBefore = os.loadavg()[0] as number;
if (WARMUP_SECONDS > 0) {
  log(`warming up for ${WARMUP_SECONDS} s (not measured; its writes are checked too)`);
  await autocannon({
    url: baseUrl,
    connections: CONNECTIONS,
    duration: WARMUP_SECONDS,
    timeout: 30,
    requests: [request],
    initialContext: {},
  });
}
measuring = true;
const result = await autocannon({
  url: baseUrl,
  connections: CONNECTIONS,
  duration: SECONDS,
  timeout: 30,
  requests: [request],
  initialContext: {},
});

// ---- nothing lost -----------------------------------------------------------------------------

/** A GET of `path`, whose body the caller names: these are the server's own answers, read back. */
async function getJson<Body>(path: string): Promise<{ status: number; body: Body }> {
  const response = await fetch(`${baseUrl}${path}`, { headers: { authorization: `Bearer ${API_KEY}` } });
  return { status: response.status, body: (await response.json()) as Body };
}

let checkedKeys = 0;
let lostKeys = 0;
let gapSessions = 0;
let versionsTotal = 0;
let extraVersions = 0;
const lostExamples: string[] = [];
for (const [sessionId, keys] of acknowledged) {
  const { state } = (await getJson<{ state: Record<string, unknown> }>(`/v1/sessions/${sessionId}/state`)).body;
  for (const key of keys) {
    checkedKeys++;
    if (!(key in state)) {
      lostKeys++;
      if (lostExamples.length < 5) lostExamples.push(`${sessionId}:${key}`);
    }
  }
  const numbers: number[] = [];
  let cursor: string | undefined;
  do {
    const query = `limit=500${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
    const page = await getJson<{ versions: Array<{ version: number }>; next?: string }>(`/v1/sessions/${sessionId}/versions?${query}`);
    numbers.push(...page.body.versions.map((version) => version.version));
    cursor = page.body.next;
  } while (cursor);
  const contiguous = numbers.every((number, index) => number === numbers.length - index);
  if (!contiguous) gapSessions++;
  versionsTotal += numbers.length;
  // Every version is a changed PATCH; a version no one was told about is a write whose answer was lost.
  extraVersions += numbers.length - keys.size;
}
const serverStopped = server.stop();

// ---- report ---------------------------------------------------------------------------------

const statusTotals: Record<string, number> = {};
for (const tally of byOperation.values()) {
  for (const [status, count] of Object.entries(tally)) statusTotals[status] = (statusTotals[status] ?? 0) + count;
}
const answered = Object.values(statusTotals).reduce((sum, count) => sum + count, 0);
const errors = Object.entries(statusTotals)
  .filter(([status]) => Number(status) >= 500 || Number(status) === 409 || Number(status) === 429)
  .reduce((sum, [, count]) => sum + count, 0);
const { latency } = result;
const lines = [
  `- ${new Date().toISOString()}, ${os.cpus()[0]?.model ?? 'unknown CPU'} × ${os.cpus().length}, ${(os.totalmem() / 1024 ** 3).toFixed(1)} GiB, Node ${process.version}; ` +
    `load average ${loadBefore.toFixed(2)} before the run (other work on the machine shares its cores).`,
  `- The local server (\`startLocalServer({ port: 0, dataDir: 'memory' })\`, its own process, DynamoDB Local in memory) driven over loopback by autocannon from another process, on the same ${os.cpus().length} cores: ${CONNECTIONS} connections for ${SECONDS} s after ${WARMUP_SECONDS} s of unmeasured warm-up.`,
  `- Mix: ${mix.map(([operation, weight]) => `${weight} % ${operation}`).join(', ')}; ${SESSIONS} sessions plus one hot session (all \`patch-hot\` and a fifth of the other requests).`,
  '',
  '| requests | req/s | p50 ms | p90 ms | p99 ms | max ms | socket errors | timeouts |',
  '|---:|---:|---:|---:|---:|---:|---:|---:|',
  `| ${result.requests.total} | ${result.requests.average.toFixed(0)} | ${latency.p50} | ${latency.p90} | ${latency.p99} | ${latency.max} | ${result.errors} | ${result.timeouts} |`,
  '',
  '| operation | answers by status |',
  '|---|---|',
  ...mix.map(([operation]) => {
    const tally = byOperation.get(operation) ?? {};
    const statuses = Object.entries(tally).map(([status, count]) => `${count} × ${status}`);
    return `| ${operation} | ${statuses.join(', ') || '–'} |`;
  }),
  '',
  `Error rate (5xx, 409 and 429 over all answers): ${((errors / Math.max(1, answered)) * 100).toFixed(2)} % (${errors} of ${answered}).` +
    ' A `404` to `get-session` or `get-versions` is a read of a session before its first write.' +
    (statusTotals['409']
      ? ' A `409` is a write on the hot session that kept losing the race for the next version for the 15 s a write retries' +
        ' (API.md: `409 conflict` under sustained contention); it wrote nothing.'
      : ''),
  '',
  `**Nothing lost:** ${checkedKeys} acknowledged PATCHes (\`200\`, \`changed: true\`) over ${acknowledged.size} sessions; ` +
    `${lostKeys} missing from the final state${lostExamples.length ? ` (e.g. ${lostExamples.join(', ')})` : ''}; ` +
    `${gapSessions} sessions with a gap in their versions; ${versionsTotal} versions in all, ${extraVersions} more than acknowledged writes, ` +
    `${extraVersions <= patchesBuilt - patchesAnswered ? 'within' : '**more than**'} the ${patchesBuilt - patchesAnswered} PATCHes that never got an answer (in flight when autocannon stopped).`,
];
log('');
for (const line of lines) log(line);
if (unexpected.length > 0) {
  log('\nunexpected answers (first 10):');
  for (const line of unexpected) log(`  ${line}`);
}

const LOAD_START = '<!-- load:start -->';
const LOAD_END = '<!-- load:end -->';
const section = `${LOAD_START}\n${lines.join('\n')}\n${LOAD_END}`;
if (!process.argv.includes('--no-doc')) {
  let text = existsSync(DOC) ? readFileSync(DOC, 'utf8') : '# Benchmarks\n\n## Load test (`npm run load`)\n\n';
  const from = text.indexOf(LOAD_START);
  const to = text.indexOf(LOAD_END);
  text = from >= 0 && to > from ? text.slice(0, from) + section + text.slice(to + LOAD_END.length) : `${text.trimEnd()}\n\n${section}\n`;
  writeDoc(text, DOC);
  log(`\nwrote the load section of ${DOC}`);
}
const failed = lostKeys > 0 || gapSessions > 0 || extraVersions < 0 || extraVersions > patchesBuilt - patchesAnswered;
if (failed) log('\nFAILED: a write was lost, versions have a gap, or there are versions no PATCH accounts for');
process.exitCode = failed ? 1 : 0;
await serverStopped;
