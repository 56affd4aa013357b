/**
 * Expiry (issue 34, API.md section 12): what a session with a TTL costs against one without.
 * Expiry rides on what every read and write touches anyway (the tip carries the session's
 * lifetime), so a state write and a state read should cost the same requests and units with
 * and without it. `npm run bench -- --only=expiry` prints it.
 */
import { handlers } from '../functions/http/index.js';
import { jsonHeaders, log } from './config.js';
import { invoke } from './invoke.js';
import { tableRow } from './measure.js';
import type { Cost, Meter } from './meter.js';

const ROUNDS = 50;

interface Row {
  label: string;
  requests: number;
  readUnits: number;
  writeUnits: number;
}

/** Requests and units per operation, averaged over `ROUNDS`, on a session with `ttlSeconds` or none. */
async function measure(meter: Meter, ttlSeconds: number | null): Promise<Row[]> {
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
  const rows: Row[] = [];
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

export async function measureExpiry(meter: Meter): Promise<string> {
  const without = await measure(meter, null);
  const withTtl = await measure(meter, 86_400);
  const cell = (row: Row) => `${row.requests.toFixed(2)} / ${row.readUnits.toFixed(2)} / ${row.writeUnits.toFixed(2)}`;
  const lines = [
    tableRow(['operation (1 KB state)', 'without a TTL: requests / RCU / WCU', 'ttlSeconds 86400: requests / RCU / WCU']),
    tableRow(['---', '---:', '---:']),
    ...without.map((row, index) => tableRow([row.label, cell(row), cell(withTtl[index] as Row)])),
  ];
  const section = `Expiry: the same operations on a session without and with an idle TTL (${ROUNDS} rounds each, averaged)\n${lines.join('\n')}`;
  log(`\n${section}`);
  return section;
}
