/**
 * Section 1: every operation through the Lambda handlers (and SessionService alone), beside
 * the raw-SDK baselines, with its latency, its ratio to the raw minimum, and its DynamoDB
 * requests and capacity units per operation.
 */

import { performance } from 'node:perf_hooks';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { handlers } from '../functions/http/index.js';
import { auth, ITERATIONS, jsonHeaders, log, QUICK, WARMUP } from './config.js';
import { kilobyteState, sessionIds as s, scope, turnBody, type Wired } from './fixture.js';
import { invoke } from './invoke.js';
import {
  handlerRun,
  type Measured,
  measureAll,
  median,
  ms,
  type Operation,
  pad,
  padLeft,
  per,
  percentile,
  requestsText,
  tableRow,
} from './measure.js';
import { type Meter, totalRequests } from './meter.js';
import { RAW_GET, RAW_PUT, RAW_QUERY, RAW_QUERY_PUT, RAW_READ_MODIFY_WRITE, rawGet, rawOperations, rawPut } from './raw-sdk.js';

export interface Row {
  name: string;
  layer: string;
  median: number;
  p99: number;
  ratio: number;
  baseline: string;
  requests: string;
  requestCount: string;
  rcu: string;
  wcu: string;
  estimated: boolean;
}

/** The two handler operations held to the 1.25× target, also timed on the stub (bench/own-code.ts). */
export const getHeadState = () => handlerRun({ method: 'GET', url: `/v1/sessions/${s.read}/state`, headers: auth }, 200);
export const patchHeadState = (i: number) =>
  handlerRun(
    { method: 'PATCH', url: `/v1/sessions/${s.patch}/state`, headers: jsonHeaders, body: JSON.stringify({ counter: i + 1 }) },
    200,
  );

export const messages = (count: number, iteration: number) =>
  JSON.stringify({
    messages: Array.from({ length: count }, (_, index) => ({
      role: index % 2 === 0 ? 'user' : 'assistant',
      content: `message ${iteration}.${index}: ${'some words of a conversation '.repeat(3)}`,
    })),
  });

function handlerOperations(main: Wired): Operation[] {
  return [
    { name: 'GET state (head)', layer: 'handler', kind: 'read', make: getHeadState },
    {
      name: 'GET state (head moved by an append since the last write)',
      layer: 'handler',
      kind: 'read',
      make: () => handlerRun({ method: 'GET', url: `/v1/sessions/${s.moved}/state`, headers: auth }, 200),
    },
    {
      name: 'GET state?node= (a node other than the head)',
      layer: 'handler',
      kind: 'read',
      make: () => handlerRun({ method: 'GET', url: `/v1/sessions/${s.node}/state?node=n1`, headers: auth }, 200),
    },
    {
      name: 'GET state?version= (time travel)',
      layer: 'handler',
      kind: 'read',
      make: (i) => handlerRun({ method: 'GET', url: `/v1/sessions/${s.versions}/state?version=${1 + (i % 60)}`, headers: auth }, 200),
    },
    {
      name: 'GET versions/{v}',
      layer: 'handler',
      kind: 'read',
      make: (i) => handlerRun({ method: 'GET', url: `/v1/sessions/${s.versions}/versions/${1 + (i % 60)}`, headers: auth }, 200),
    },
    {
      name: 'GET versions (first page, 50 × 1 KB)',
      layer: 'handler',
      kind: 'read',
      make: () => handlerRun({ method: 'GET', url: `/v1/sessions/${s.versions}/versions`, headers: auth }, 200),
    },
    { name: 'PATCH state (merge patch at the head)', layer: 'handler', kind: 'write', make: patchHeadState },
    {
      name: 'PUT state (replace, 1 KB)',
      layer: 'handler',
      kind: 'write',
      make: (i) =>
        handlerRun(
          { method: 'PUT', url: `/v1/sessions/${s.put}/state`, headers: jsonHeaders, body: JSON.stringify(kilobyteState(i + 1)) },
          200,
        ),
    },
    {
      name: 'POST messages (append 1)',
      layer: 'handler',
      kind: 'write',
      make: (i) =>
        handlerRun({ method: 'POST', url: `/v1/sessions/${s.append1}/messages`, headers: jsonHeaders, body: messages(1, i) }, 201),
    },
    {
      name: 'POST messages (append 25)',
      layer: 'handler',
      kind: 'write',
      make: (i) =>
        handlerRun({ method: 'POST', url: `/v1/sessions/${s.append25}/messages`, headers: jsonHeaders, body: messages(25, i) }, 201),
    },
    {
      // Budget: ≤ 6 requests + the worker call (DESIGN.md section 4). The worker is in-process.
      name: 'POST decide (in-process worker, state changes)',
      layer: 'handler',
      kind: 'write',
      make: () =>
        handlerRun(
          { method: 'POST', url: `/v1/sessions/${s.decide}/decide`, headers: jsonHeaders, body: '{"trigger":{"type":"tick"}}' },
          200,
        ),
    },
    {
      // Routing (issue 37) costs no request: the same decision, handed by a route to the agent below.
      name: 'POST decide (routed by the state to the agent below)',
      layer: 'handler',
      kind: 'write',
      make: () =>
        handlerRun(
          { method: 'POST', url: `/v1/sessions/${s.routed}/decide`, headers: jsonHeaders, body: '{"trigger":{"type":"tick"}}' },
          200,
        ),
    },
    {
      // A conversation turn (issue 20): the client's message, the worker's reply, a state change.
      name: 'POST decide (a turn: client.messages, one reply, state changes)',
      layer: 'handler',
      kind: 'write',
      make: (i) => handlerRun({ method: 'POST', url: `/v1/sessions/${s.turn}/decide`, headers: jsonHeaders, body: turnBody(i) }, 200),
    },
    {
      name: 'POST commits (one commutative thread key)',
      layer: 'handler',
      kind: 'write',
      make: (i) =>
        handlerRun(
          {
            method: 'POST',
            url: `/v1/sessions/${s.commit}/commits`,
            headers: jsonHeaders,
            body: JSON.stringify({ commands: [{ key: 'tally', scope: 'thread', merge: 'commutative', set: { [`k${i % 20}`]: i } }] }),
          },
          200,
        ),
    },
    {
      name: 'SessionService.readState (no HTTP layer)',
      layer: 'service',
      kind: 'read',
      make: () => () => main.service.readState(scope(s.read), {}),
    },
    {
      name: 'SessionService.patchState (no HTTP layer)',
      layer: 'service',
      kind: 'write',
      make: (i) => () => main.service.patchState(scope(s.servicePatch), { counter: i + 1 }),
    },
  ];
}

export interface OperationsResult {
  rows: Row[];
  rawGetMedian: number;
  rmwMedian: number;
  getRow: Row;
  patchRow: Row;
  putRow: Row;
  serviceRead: Row;
  serviceWrite: Row;
  queryRow: Row;
  queryPutRow: Row;
  append25Row: Row;
  /**
   * Handler over the raw SDK making the very requests the handler makes, what agentstate adds:
   * the median of the rounds' ratios (`pairedRatio`).
   */
  getOverRequests: number;
  patchOverRequests: number;
  /** The same, as the ratio of the two medians. */
  mediansOverRequests: { get: number; patch: number };
}

const isBaseline = (row: Row) => row.layer === 'raw' && (row.name === RAW_GET || row.name === RAW_PUT);
/** The × raw column: the two baselines are 1 by definition. */
const ratioText = (row: Row) => (isBaseline(row) ? '1.00' : row.ratio.toFixed(2));

export async function measureOperations(
  meter: Meter,
  client: DynamoDBClient,
  main: Wired,
  endpoint: string,
  stateBytes: number,
): Promise<OperationsResult> {
  // DynamoDB Local is a JVM: its first few thousand requests run slower while the JIT compiles.
  const warmUntil = performance.now() + (QUICK ? 2_000 : 8_000);
  while (performance.now() < warmUntil) {
    await Promise.all([
      rawGet(client),
      rawPut(client),
      invoke(handlers, { method: 'GET', url: `/v1/sessions/${s.read}/state`, headers: auth }),
    ]);
  }
  meter.reset();

  log(`\n1. Operations (DynamoDB Local ${endpoint}, state ≈ ${stateBytes} bytes)`);
  const measured: Measured[] = await measureAll(meter, [...rawOperations(client), ...handlerOperations(main)], ITERATIONS, WARMUP);
  const byName = new Map(measured.map((entry) => [entry.operation.name, entry]));
  const rawGetMedian = median(byName.get(RAW_GET)?.samples ?? []);
  const rawPutMedian = median(byName.get(RAW_PUT)?.samples ?? []);
  const rmwMedian = median(byName.get(RAW_READ_MODIFY_WRITE)?.samples ?? []);

  const rows: Row[] = measured.map(({ operation, samples, cost }) => {
    const n = samples.length;
    const base = operation.kind === 'read' ? rawGetMedian : rawPutMedian;
    return {
      name: operation.name,
      layer: operation.layer,
      median: median(samples),
      p99: percentile(samples, 99),
      ratio: median(samples) / base,
      baseline: operation.kind === 'read' ? 'GetItem' : 'PutItem',
      requests: requestsText(cost, n),
      requestCount: per(totalRequests(cost), n),
      rcu: per(cost.readUnits, n),
      wcu: per(cost.writeUnits, n),
      estimated: cost.estimatedTransactUnits > 0,
    };
  });

  log(
    `${pad('operation', 62)} ${padLeft('median', 8)} ${padLeft('p99', 8)} ${padLeft('× raw', 7)}  ${pad('requests / op', 34)} ` +
      `${padLeft('RCU', 5)} ${padLeft('WCU', 6)}`,
  );
  for (const row of rows) {
    log(
      `${pad(`[${row.layer}] ${row.name}`, 62)} ${padLeft(ms(row.median), 8)} ${padLeft(ms(row.p99), 8)} ${padLeft(ratioText(row), 7)}  ` +
        `${pad(row.requests, 34)} ${padLeft(row.rcu, 5)} ${padLeft(row.wcu + (row.estimated ? '*' : ''), 6)}`,
    );
  }
  log(
    '  (ms; × raw: reads over the GetItem median, writes over the PutItem median; * units estimated by the rules (transactions, failed conditions), see the doc)',
  );

  const find = (test: (row: Row) => boolean) => rows.find(test) as Row;
  const getRow = find((row) => row.name === 'GET state (head)');
  const patchRow = find((row) => row.name === 'PATCH state (merge patch at the head)');
  const putRow = find((row) => row.name === 'PUT state (replace, 1 KB)');
  const serviceRead = find((row) => row.name.startsWith('SessionService.readState'));
  const serviceWrite = find((row) => row.name.startsWith('SessionService.patchState'));
  const queryRow = find((row) => row.name === RAW_QUERY);
  const queryPutRow = find((row) => row.name === RAW_QUERY_PUT);
  const append25Row = find((row) => row.name === 'POST messages (append 25)');
  const samplesOf = (name: string) => byName.get(name)?.samples ?? [];
  const getOverRequests = pairedRatio(samplesOf('GET state (head)'), samplesOf(RAW_QUERY));
  const patchOverRequests = pairedRatio(samplesOf('PATCH state (merge patch at the head)'), samplesOf(RAW_QUERY_PUT));
  const mediansOverRequests = { get: getRow.median / queryRow.median, patch: patchRow.median / queryPutRow.median };
  log(
    `  handler over the raw SDK making the same requests, round by round: GET state ${getOverRequests.toFixed(2)}× (over its Query), ` +
      `PATCH state ${patchOverRequests.toFixed(2)}× (over its Query and PutItem); target ≤ 1.25× ` +
      `(medians over medians: ${mediansOverRequests.get.toFixed(2)}× and ${mediansOverRequests.patch.toFixed(2)}×)`,
  );
  return {
    rows,
    rawGetMedian,
    rmwMedian,
    getRow,
    patchRow,
    putRow,
    serviceRead,
    serviceWrite,
    queryRow,
    queryPutRow,
    append25Row,
    getOverRequests,
    patchOverRequests,
    mediansOverRequests,
  };
}

/**
 * The median, over the rounds, of one round's `handler` time over the same round's `raw` time.
 * measureAll runs every operation once a round, in a shuffled order, so the two samples of a
 * round ran moments apart, under the same load: a machine whose load drifts during the run
 * moves both, and their ratio holds. The ratio of the two medians mixes rounds of different
 * load, and moved by ±0.06 between runs of the same code on this machine.
 */
function pairedRatio(handler: readonly number[], raw: readonly number[]): number {
  const rounds = Math.min(handler.length, raw.length);
  return median(Array.from({ length: rounds }, (_, round) => (handler[round] as number) / (raw[round] as number)));
}

export function operationsTable(rows: Row[]): string {
  const lines = [
    '| layer | operation | median ms | p99 ms | × raw | DynamoDB requests / op | RCU / op | WCU / op |',
    '|---|---|---:|---:|---:|---|---:|---:|',
  ];
  for (const row of rows) {
    const ratio = isBaseline(row) ? '1.00' : `${row.ratio.toFixed(2)} (${row.baseline})`;
    const wcu = `${row.wcu}${row.estimated ? '\\*' : ''}`;
    lines.push(tableRow([row.layer, row.name, ms(row.median), ms(row.p99), ratio, row.requests, row.rcu, wcu]));
  }
  return lines.join('\n');
}
