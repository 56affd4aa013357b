/**
 * Section 7: what each operation costs in AWS, in USD per million, computed from the requests
 * and capacity units sections 1 and 2 measured, at on-demand prices, beside the physical floor:
 * the fewest requests and units the operation could need on DynamoDB at all.
 */
import { FUNCTION_DEFAULTS } from '../lib/agent-state.js';
import { median, tableRow } from './measure.js';
import { totalRequests } from './meter.js';
import type { Row } from './operations.js';
import { messages } from './operations.js';
import type { PairResult } from './scale.js';

/**
 * us-east-1 list prices (docs/deploy.md section 8 shows the same; test/unit/cost-prices.test.ts
 * holds the two together). HTTP API requests are billed per 512 KB, so every request here is one.
 */
export const PRICES = {
  httpApiPerMillionRequests: 1.0,
  lambdaPerMillionRequests: 0.2,
  lambdaPerGbSecond: 0.0000133334,
  dynamoDbPerMillionWriteUnits: 0.625,
  dynamoDbPerMillionReadUnits: 0.125,
} as const;

/**
 * A DynamoDB round trip in AWS takes a few milliseconds (DESIGN.md section 4: 2–5 ms) where
 * DynamoDB Local here takes about one, so a function's billed time in AWS is estimated as its
 * median here plus this much per DynamoDB request. Requests made in parallel are counted as if
 * sequential: the estimate errs on the dear side.
 */
const EXTRA_MS_PER_DYNAMODB_REQUEST = 3;
/** The floor's own billed time: its requests one after another, no code at all. */
const AWS_MS_PER_DYNAMODB_REQUEST = 4;

const memoryGb = FUNCTION_DEFAULTS.memorySize / 1024;

/** What one operation takes, measured or at its floor. */
interface Usage {
  requests: number;
  readUnits: number;
  writeUnits: number;
  /** Estimated billed Lambda duration in AWS. */
  lambdaMs: number;
}

interface Floor {
  requests: number;
  readUnits: number;
  writeUnits: number;
  why: string;
}

const appended25Kb = Math.ceil(Buffer.byteLength(messages(25, 0)) / 1024);

/**
 * The floor of each operation the table prices: what it must read and write whatever the layout.
 * Items are the bench's (a state of about 1 KB, short messages), reads consistent.
 */
const FLOORS: Record<string, Floor> = {
  'GET state (head)': { requests: 1, readUnits: 1, writeUnits: 0, why: 'one read of one item of at most 4 KB' },
  'PATCH state (merge patch at the head)': {
    requests: 2,
    readUnits: 1,
    writeUnits: 1,
    why: 'the state to merge into, then one conditional write of at most 1 KB',
  },
  'PUT state (replace, 1 KB)': {
    requests: 2,
    readUnits: 1,
    writeUnits: 1,
    why: 'the current version (to number the next and to answer `changed`), then one conditional write',
  },
  'POST messages (append 1)': {
    requests: 2,
    readUnits: 1,
    writeUnits: 1,
    why: 'where the conversation ends, then one conditional write of the message',
  },
  'POST messages (append 25)': {
    requests: 2,
    readUnits: 1,
    writeUnits: appended25Kb,
    why: `where the conversation ends, then one conditional write of the ${appended25Kb} KB of messages as sent`,
  },
  'POST decide (a turn: client.messages, one reply, state changes)': {
    requests: 3,
    readUnits: 2,
    writeUnits: 2,
    why: 'the agent and the session (state and path in one read), then one write of both messages, the state and the answer',
  },
  'POST commits (one commutative thread key)': {
    requests: 2,
    readUnits: 1,
    writeUnits: 1,
    why: 'the state the command applies to, then one conditional write',
  },
};

const dollars = (usage: Usage) => {
  const api = PRICES.httpApiPerMillionRequests;
  const lambda = PRICES.lambdaPerMillionRequests + Math.ceil(usage.lambdaMs) * 1e-3 * memoryGb * PRICES.lambdaPerGbSecond * 1e6;
  const dynamoDb = usage.readUnits * PRICES.dynamoDbPerMillionReadUnits + usage.writeUnits * PRICES.dynamoDbPerMillionWriteUnits;
  return { api, lambda, dynamoDb, total: api + lambda + dynamoDb };
};

const floorUsage = (floor: Floor): Usage => ({ ...floor, lambdaMs: floor.requests * AWS_MS_PER_DYNAMODB_REQUEST });

export interface CostRow {
  operation: string;
  measured: Usage;
  floor: Floor;
}

/** Cost rows from section 1's handler rows, and the turn at both depths of section 2. */
export function costRows(operations: Row[], depthResults: PairResult[]): CostRow[] {
  const rows: CostRow[] = [];
  for (const row of operations) {
    const floor = FLOORS[row.name];
    if (row.layer !== 'handler' || !floor) continue;
    const requests = Number(row.requestCount);
    const measured = {
      requests,
      readUnits: Number(row.rcu),
      writeUnits: Number(row.wcu),
      lambdaMs: row.median + requests * EXTRA_MS_PER_DYNAMODB_REQUEST,
    };
    rows.push({ operation: row.name, measured, floor });
  }
  const turn = depthResults.find((result) => result.pair.what.startsWith('POST decide (a turn'));
  const turnFloor = FLOORS['POST decide (a turn: client.messages, one reply, state changes)'] as Floor;
  if (turn) {
    for (const [side, label] of [
      [turn.small, turn.pair.small],
      [turn.large, turn.pair.large],
    ] as const) {
      const count = side.samples.length;
      const requests = totalRequests(side.cost) / count;
      rows.push({
        operation: `a conversation turn at ${label} (section 2)`,
        measured: {
          requests,
          readUnits: side.cost.readUnits / count,
          writeUnits: side.cost.writeUnits / count,
          lambdaMs: median(side.samples) + requests * EXTRA_MS_PER_DYNAMODB_REQUEST,
        },
        floor: turnFloor,
      });
    }
  }
  return rows;
}

const usd = (value: number) => value.toFixed(2);
const units = (value: number) => (Number.isInteger(value) ? String(value) : value.toFixed(2));

export function costTable(rows: CostRow[]): string {
  const lines = [
    '| operation | requests | RCU | WCU | Lambda ms (est.) | HTTP API | Lambda | DynamoDB | **USD per million** | floor: requests / RCU / WCU | floor USD per million | × floor |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const { operation, measured, floor } of rows) {
    const cost = dollars(measured);
    const floorCost = dollars(floorUsage(floor));
    lines.push(
      tableRow([
        operation,
        units(measured.requests),
        units(measured.readUnits),
        units(measured.writeUnits),
        Math.ceil(measured.lambdaMs),
        usd(cost.api),
        usd(cost.lambda),
        usd(cost.dynamoDb),
        `**${usd(cost.total)}**`,
        `${floor.requests} / ${floor.readUnits} / ${floor.writeUnits}`,
        usd(floorCost.total),
        `${(cost.total / floorCost.total).toFixed(2)}×`,
      ]),
    );
  }
  return lines.join('\n');
}

/** Each priced operation's floor and why it cannot be less, once per operation. */
function floorList(rows: CostRow[]): string {
  const seen = new Map<Floor, string>();
  for (const { operation, floor } of rows) if (!seen.has(floor)) seen.set(floor, operation);
  return [...seen].map(([floor, operation]) => `- ${operation}: ${floor.why}.`).join('\n');
}

export function costSection(rows: CostRow[]): string {
  return `## What it costs in AWS

Each operation's price per million, from the DynamoDB requests and capacity units measured above
(section 1${rows.some((row) => row.operation.startsWith('a conversation turn at')) ? '; the turns at both depths from section 2' : ''}), at on-demand us-east-1 prices: HTTP API
USD ${PRICES.httpApiPerMillionRequests.toFixed(2)} per million requests, Lambda arm64 USD ${PRICES.lambdaPerMillionRequests.toFixed(2)} per million invocations and
USD ${PRICES.lambdaPerGbSecond} per GB-second at the stack's ${FUNCTION_DEFAULTS.memorySize} MB, DynamoDB USD ${PRICES.dynamoDbPerMillionReadUnits} per million
read units and USD ${PRICES.dynamoDbPerMillionWriteUnits} per million write units. Logs, X-Ray and change events
come on top (docs/deploy.md section 8 prices them); the worker a decision calls is the agent's own.

Lambda time is estimated, not measured in AWS: the handler's median here plus
${EXTRA_MS_PER_DYNAMODB_REQUEST} ms for each DynamoDB request (a round trip to DynamoDB takes 2–5 ms, to DynamoDB Local about one), counted as
if every request ran in sequence, billed by the millisecond. The floor is the fewest requests and units the
operation could need on DynamoDB whatever the layout, priced the same way (one HTTP request,
one invocation, ${AWS_MS_PER_DYNAMODB_REQUEST} ms per request and no code).

${costTable(rows)}

The floors:

${floorList(rows)}

HTTP API and the Lambda invocation are a fixed USD ${usd(PRICES.httpApiPerMillionRequests + PRICES.lambdaPerMillionRequests)} per million whatever an operation does, so
the floor itself is mostly that; what agentstate adds over the floor is capacity units (the
log's index items and version metadata) and milliseconds.
`;
}
