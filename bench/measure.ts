/**
 * How every section times an operation: interleaved rounds, the meter's cost per run, and the
 * statistics and text the tables print.
 */
import { performance } from 'node:perf_hooks';
import { handlers } from '../functions/http/index.js';
import { type InProcessRequest, prepare, run } from './invoke.js';
import type { Cost, Meter } from './meter.js';

type Kind = 'read' | 'write';
export interface Operation {
  name: string;
  layer: 'raw' | 'handler' | 'service';
  kind: Kind;
  /** Builds one run (untimed), returning the timed part. */
  make: (iteration: number) => () => Promise<unknown>;
}

export interface Measured {
  operation: Operation;
  samples: number[];
  cost: Cost;
}

/** A handler call whose event is built before the clock starts. */
export function handlerRun(request: InProcessRequest, expected: number): () => Promise<unknown> {
  const prepared = prepare(request);
  return async () => {
    const response = await run(handlers, prepared);
    if (response.status !== expected) {
      throw new Error(`${request.method} ${request.url} answered ${response.status}: ${response.text.slice(0, 300)}`);
    }
  };
}

const shuffle = <T>(items: T[]): T[] => {
  const copy = [...items];
  for (let index = copy.length - 1; index > 0; index--) {
    const other = Math.floor(Math.random() * (index + 1));
    [copy[index], copy[other]] = [copy[other] as T, copy[index] as T];
  }
  return copy;
};

function addCost(into: Cost, cost: Cost): void {
  for (const [name, count] of Object.entries(cost.requests)) into.requests[name] = (into.requests[name] ?? 0) + count;
  for (const [name, count] of Object.entries(cost.errors)) into.errors[name] = (into.errors[name] ?? 0) + count;
  into.readUnits += cost.readUnits;
  into.writeUnits += cost.writeUnits;
  into.estimatedTransactUnits += cost.estimatedTransactUnits;
  into.estimationMs += cost.estimationMs;
}

/**
 * Rounds in which every operation runs once, in a new random order each round: DynamoDB
 * Local's JIT warms up and drifts over a run, and interleaving spreads that over everything.
 */
export async function measureAll(meter: Meter, list: Operation[], rounds: number, warmup: number): Promise<Measured[]> {
  const results = new Map<Operation, Measured>(
    list.map((operation) => [
      operation,
      {
        operation,
        samples: [],
        cost: { requests: {}, errors: {}, readUnits: 0, writeUnits: 0, estimatedTransactUnits: 0, estimationMs: 0 },
      },
    ]),
  );
  for (let round = 0; round < warmup + rounds; round++) {
    for (const operation of shuffle(list)) {
      const timed = operation.make(round);
      meter.reset();
      const start = performance.now();
      await timed();
      const cost = meter.reset();
      // Less the meter's own reads of the items a transaction or a failed write names (meter.ts).
      const elapsed = performance.now() - start - cost.estimationMs;
      if (round < warmup) continue;
      const measured = results.get(operation) as Measured;
      measured.samples.push(elapsed);
      addCost(measured.cost, cost);
    }
  }
  return [...results.values()];
}

export function percentile(samples: number[], p: number): number {
  const sorted = [...samples].sort((a, b) => a - b);
  if (sorted.length === 0) return Number.NaN;
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[index] as number;
}
export const median = (samples: number[]) => percentile(samples, 50);
export const ms = (value: number) => (Number.isFinite(value) ? value.toFixed(2) : '–');
export const per = (value: number, count: number) => {
  const result = value / count;
  return Number.isInteger(result) ? String(result) : result.toFixed(2);
};
export const requestsText = (cost: Cost, count: number) =>
  Object.entries(cost.requests)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([name, value]) => `${per(value, count)} ${name}`)
    .join(' + ') || '0';

export const pad = (text: string, width: number) => (text.length >= width ? text : text + ' '.repeat(width - text.length));
export const padLeft = (text: string, width: number) => (text.length >= width ? text : ' '.repeat(width - text.length) + text);
/** One row of a markdown table. */
export const tableRow = (cells: Array<string | number>) => `| ${cells.join(' | ')} |`;
export const kib = (bytes: number) => `${(bytes / 1024).toFixed(0)} KiB`;
