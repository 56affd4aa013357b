/**
 * Expiry (issue 34, API.md section 12): what a session with a TTL costs against one without.
 * Expiry rides on what every read and write touches anyway (the tip carries the session's
 * lifetime), so a state write and a state read should cost the same requests and units with
 * and without it. The whole bench writes it into docs/benchmarks.md; `npm run bench --
 * --only=expiry` prints it, `--expiry-only` writes it into the page alone.
 */
import { handlers } from '../functions/http/index.js';
import { jsonHeaders, log } from './config.js';
import { invoke } from './invoke.js';
import { tableRow } from './measure.js';
import type { Cost, Meter } from './meter.js';

const ROUNDS = 50;

/** Heading of the section on the page (`--expiry-only` replaces the section under it). */
export const EXPIRY_HEADING = '## Expiry: what a TTL costs';

export interface ExpiryRow {
  label: string;
  requests: number;
  readUnits: number;
  writeUnits: number;
}

/** Requests and units per operation, averaged over `ROUNDS`, on a session with `ttlSeconds` or none. */
async function measure(meter: Meter, ttlSeconds: number | null): Promise<ExpiryRow[]> {
  const sessionId = `expiry-bench-${ttlSeconds ?? 'none'}-${Date.now()}`;
  const write = (round: number) =>
    invoke(handlers, {
      method: 'PATCH',
      url: `/v1/sessions/${sessionId}/state`,
      headers: jsonHeaders,
      body: JSON.stringify({ round, note: 'x'.repeat(900) }),
    });
  await write(0);
  if (ttlSeconds !== null) {
    const set = await invoke(handlers, {
      method: 'PATCH',
      url: `/v1/sessions/${sessionId}`,
      headers: jsonHeaders,
      body: JSON.stringify({ ttlSeconds }),
    });
    if (set.status !== 200) throw new Error(`PATCH of the session answered ${set.status}`);
    // The first write after the PATCH reads the version its change stands above (one Query, once): not
    // measured. It must change the state (an equal one records nothing, and leaves that read to round 1).
    await write(-1);
  }
  const operations: Array<[string, (round: number) => Promise<{ status: number }>]> = [
    ['state write (PATCH …/state)', write],
    ['state read (GET …/state)', () => invoke(handlers, { method: 'GET', url: `/v1/sessions/${sessionId}/state`, headers: jsonHeaders })],
    [
      'session read (GET /v1/sessions/{sid})',
      () => invoke(handlers, { method: 'GET', url: `/v1/sessions/${sessionId}`, headers: jsonHeaders }),
    ],
  ];
  const rows: ExpiryRow[] = [];
  for (const [label, operation] of operations) {
    const total: Cost[] = [];
    for (let round = 1; round <= ROUNDS; round++) {
      const { result, cost } = await meter.measure(() => operation(round));
      if (result.status !== 200) throw new Error(`${label} answered ${result.status}`);
      total.push(cost);
    }
    const requests = total.reduce((sum, cost) => sum + Object.values(cost.requests).reduce((a, b) => a + b, 0), 0);
    rows.push({
      label,
      requests: requests / ROUNDS,
      readUnits: total.reduce((sum, cost) => sum + cost.readUnits, 0) / ROUNDS,
      writeUnits: total.reduce((sum, cost) => sum + cost.writeUnits, 0) / ROUNDS,
    });
  }
  return rows;
}

export interface ExpiryResult {
  without: ExpiryRow[];
  withTtl: ExpiryRow[];
}

export async function measureExpiry(meter: Meter): Promise<ExpiryResult> {
  const without = await measure(meter, null);
  const withTtl = await measure(meter, TTL_SECONDS);
  const result = { without, withTtl };
  log(`\n${expirySection(result)}`);
  return result;
}

const TTL_SECONDS = 86_400;

export function expirySection({ without, withTtl }: ExpiryResult): string {
  const cell = (row: ExpiryRow) => `${row.requests.toFixed(2)} / ${row.readUnits.toFixed(2)} / ${row.writeUnits.toFixed(2)}`;
  const lines = [
    tableRow(['operation (1 KB state)', 'without a TTL: requests / RCU / WCU', `ttlSeconds ${TTL_SECONDS}: requests / RCU / WCU`]),
    tableRow(['---', '---:', '---:']),
    ...without.map((row, index) => tableRow([row.label, cell(row), cell(withTtl[index] as ExpiryRow)])),
  ];
  return `${EXPIRY_HEADING}

The same operations through the handlers on two sessions, one without a lifetime and one with
\`ttlSeconds: ${TTL_SECONDS}\` (set by \`PATCH /v1/sessions/{sid}\` before the rounds), ${ROUNDS} rounds each,
averaged (\`npm run bench -- --only=expiry\`). The contract: expiry adds no request to any read or
write (API.md section 12): the expiry moment rides on the session's newest change, which every
read and write of the state reads anyway (docs/api.md, "Expiry").

${lines.join('\n')}
`;
}
