import { BatchGetItemCommand, BatchWriteItemCommand, type DynamoDBClient, QueryCommand } from '@aws-sdk/client-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import type { Json } from '../functions/core/json/json.js';
import { parseJsonPatch } from '../functions/core/json/json-patch.js';
import * as keys from '../functions/store/table/keys.js';
import { auth, QUICK, TENANT } from './config.js';
import { scope, type Wired } from './fixture.js';
import { handlerRun, median, tableRow } from './measure.js';
import { type Cost, type Meter, totalRequests } from './meter.js';
import { TABLE } from './raw-sdk.js';

/**
 * Section 1c: state at scale (issue 19). A 4 MiB state, measured on the metered client with
 * nothing cached: what a 1 KB change to it costs in requests and write units, what a thousand
 * of them leave stored, and what reading it costs against the raw SDK reading the same bytes.
 */

const MiB = 1024 * 1024;
const PATCHES = QUICK ? 100 : 1000;
const ROUNDS = QUICK ? 5 : 20;

/** Words of the prose in the generated states (a vocabulary large enough that text compresses as prose does, about 3×). */
const WORDS = (
  'the agent read page noted what user asked before answered with care plan step tool call result error retry ' +
  'search found three sources flight hotel budget date city museum train ticket price euro weather rain sun ' +
  'morning evening lunch dinner booked cancelled confirmed waiting list option cheaper faster later earlier ' +
  'because however then next finally first second summary detail question reply draft review approve reject ' +
  'customer order invoice refund shipping address phone email account password reset login session token ' +
  'memory fact preference likes dislikes allergic vegetarian window seat aisle quiet room view garden pool'
).split(' ');

/** A deterministic pseudo-random source (the same state every run). */
function random(seed: number): () => number {
  let n = seed;
  return () => {
    n = (n * 1103515245 + 12345) % 2 ** 31;
    return n / 2 ** 31;
  };
}

function prose(next: () => number, bytes: number): string {
  const words: string[] = [];
  for (let length = 0; length < bytes; ) {
    const word = WORDS[Math.floor(next() * WORDS.length)] as string;
    words.push(next() < 0.04 ? `${Math.floor(next() * 100000)}` : word);
    length += word.length + 1;
  }
  return words.join(' ').slice(0, bytes);
}

type Entry = {
  id: string;
  role: string;
  text: string;
};

/** About `bytes` of JSON text shaped like an agent's state: a log of messages with ids and prose. */
function largeState(bytes: number): { log: Entry[]; turns: number } {
  const next = random(7);
  const log: Entry[] = [];
  for (let n = 0, size = 0; size < bytes - 2048; n++) {
    const entry = { id: `m${n}-${Math.floor(next() * 2 ** 31).toString(36)}`, role: n % 2 ? 'assistant' : 'user', text: prose(next, 900) };
    log.push(entry);
    size += Buffer.byteLength(JSON.stringify(entry)) + 1;
  }
  return { log, turns: 0 };
}

/** A change of about 1 KB: an entry appended to the log, or a key set. */
const entry = (n: number): Entry => ({ id: `new${n}`, role: 'user', text: prose(random(1000 + n), 950) });

export interface LargeStateRow {
  what: string;
  requests: number;
  /** Write units, or read units for a read. */
  units: number;
  unitName: 'WCU' | 'RCU';
  target: string;
  met: boolean;
}

export interface LargeStateResult {
  rows: LargeStateRow[];
  storage: { patches: number; storedBytes: number; budgetBytes: number; baseBytes: number; items: number };
  reads: { ours: number; raw: number; ratio: number };
}

/** DynamoDB's item size: attribute names plus values (strings and binaries by their bytes, numbers about one byte per two digits). */
function itemBytes(item: Record<string, unknown>): number {
  let bytes = 0;
  for (const [name, value] of Object.entries(item)) {
    bytes += Buffer.byteLength(name);
    if (typeof value === 'string') bytes += Buffer.byteLength(value);
    else if (value instanceof Uint8Array) bytes += value.length;
    else if (typeof value === 'number') bytes += Math.ceil(String(value).length / 2) + 1;
    else if (typeof value === 'boolean' || value === null) bytes += 1;
    else bytes += Buffer.byteLength(JSON.stringify(value));
  }
  return bytes;
}

/** Every item of a session's partition, and their bytes as DynamoDB counts them. */
async function partitionBytes(client: DynamoDBClient, sessionId: string): Promise<{ bytes: number; items: number }> {
  let bytes = 0;
  let items = 0;
  let start: Record<string, never> | undefined;
  do {
    const page = await client.send(
      new QueryCommand({
        TableName: TABLE,
        KeyConditionExpression: 'pk = :pk',
        ExpressionAttributeValues: { ':pk': { S: keys.session(scope(sessionId)) } },
        ExclusiveStartKey: start,
      }),
    );
    for (const item of page.Items ?? []) {
      bytes += itemBytes(unmarshall(item));
      items++;
    }
    start = page.LastEvaluatedKey as Record<string, never> | undefined;
  } while (start);
  return { bytes, items };
}

async function perOperation(meter: Meter, rounds: number, run: (round: number) => Promise<unknown>): Promise<Cost[]> {
  const costs: Cost[] = [];
  for (let round = 0; round < rounds; round++) {
    meter.reset();
    await run(round);
    costs.push(meter.reset());
  }
  return costs;
}

const average = (costs: Cost[], of: (cost: Cost) => number) => costs.reduce((sum, cost) => sum + of(cost), 0) / costs.length;

export async function measureLargeState(meter: Meter, client: DynamoDBClient, main: Wired): Promise<LargeStateResult> {
  const { service } = main;
  const rows: LargeStateRow[] = [];
  /** A row: the median of single writes (their typical cost), or the mean of a run (checkpoints included). */
  const row = (
    what: string,
    costs: Cost[],
    target: { requests?: number; writeUnits?: number; readUnits?: number },
    statistic: 'median' | 'mean' = 'median',
  ) => {
    const of = (value: (cost: Cost) => number) => (statistic === 'mean' ? average(costs, value) : median(costs.map(value)));
    const requests = of(totalRequests);
    const unitName = target.readUnits === undefined ? 'WCU' : 'RCU';
    const units = of((cost) => (unitName === 'WCU' ? cost.writeUnits : cost.readUnits));
    const limit = (target.writeUnits ?? target.readUnits) as number;
    const met = units <= limit && (target.requests === undefined || requests <= target.requests);
    const text = `≤ ${limit} ${unitName}${target.requests === undefined ? '' : `, ≤ ${target.requests} request${target.requests === 1 ? '' : 's'}`}`;
    rows.push({ what: `${what} (${statistic})`, requests, units, unitName, target: text, met });
  };

  // A ~1 KB state version: the version item and its state together under 1 KB.
  const small = scope('large-small');
  await service.replaceState(small, { notes: entry(0).text, turns: 0 });
  row('PATCH a ~1 KB state (one version)', await perOperation(meter, ROUNDS, (n) => service.patchState(small, { turns: n + 1 })), {
    writeUnits: 1,
  });
  // What a GET of a small state cost before large states: one Query of one item under 4 KB.
  row('GET a ~1 KB state', await perOperation(meter, ROUNDS, () => service.readState(small, {})), { requests: 1, readUnits: 1 });

  // A 1 KB change to a 4 MiB state, three ways, each on a session of its own.
  const state = largeState(4 * MiB - 128 * 1024);
  const onLarge = async (id: string) => {
    const session = scope(id);
    await service.replaceState(session, state);
    return session;
  };
  const appended = await onLarge('large-append');
  row(
    'JSON Patch: append 1 KB to a 4 MiB state',
    await perOperation(meter, ROUNDS, (n) =>
      service.jsonPatchState(appended, parseJsonPatch([{ op: 'add', path: '/log/-', value: entry(n) }])),
    ),
    { requests: 3, writeUnits: 4 },
  );
  const merged = await onLarge('large-merge');
  row(
    'merge patch: set a 1 KB key of a 4 MiB state',
    await perOperation(meter, ROUNDS, (n) => service.patchState(merged, { note: entry(n) as unknown as Json })),
    { requests: 3, writeUnits: 4 },
  );
  const replaced = await onLarge('large-4mib');
  row(
    'JSON Patch: replace a 1 KB entry in the middle',
    await perOperation(meter, ROUNDS, (n) =>
      service.jsonPatchState(replaced, parseJsonPatch([{ op: 'replace', path: `/log/${1000 + n}`, value: entry(n) }])),
    ),
    { requests: 3, writeUnits: 4 },
  );

  // A thousand 1 KB appends in a row, every version kept: what they cost, and what stays stored.
  const history = scope('large-history');
  const start = largeState(4 * MiB - (PATCHES + 100) * 1024);
  await service.replaceState(history, start);
  const base = await partitionBytes(client, 'large-history');
  const appends = await perOperation(meter, PATCHES, (n) =>
    service.jsonPatchState(history, parseJsonPatch([{ op: 'add', path: '/log/-', value: entry(n) }])),
  );
  // Every CHAIN_LIMIT + 1st write is a checkpoint (one BatchWriteItem more): the mean is held to the write units only.
  row(`${PATCHES} × 1 KB appends in a row, checkpoints included`, appends, { writeUnits: 4 }, 'mean');
  const stored = await partitionBytes(client, 'large-history');
  const stateBytes = Buffer.byteLength(JSON.stringify(start));
  const budgetBytes = 1.2 * (stateBytes + PATCHES * 1000);

  // The case splices do not help: 1 KB replaced at places far apart, so that each checkpoint
  // puts again every piece the writes since the last one touched.
  const scattered = await onLarge('large-scattered');
  const place = random(99);
  const replaces = await perOperation(meter, QUICK ? 50 : 100, (n) =>
    service.jsonPatchState(
      scattered,
      parseJsonPatch([{ op: 'replace', path: `/log/${Math.floor(place() * state.log.length)}`, value: entry(n) }]),
    ),
  );
  row('1 KB replaced at random places in a row, checkpoints included', replaces, { writeUnits: 4 }, 'mean');

  // A copy (API.md section 12) of a 1,000-message path under a 4 MiB state, against writing the
  // same state and messages once: the copy writes the messages again and the state's pieces once.
  const source = scope('large-copy-source');
  meter.reset();
  await service.replaceState(source, state);
  const stateWrite = meter.reset();
  for (let turn = 0; turn < 20; turn++) {
    await service.appendMessages(source, {
      messages: Array.from({ length: 50 }, (_, n) => ({
        id: `c${turn * 50 + n}`,
        role: n % 2 ? 'assistant' : 'user',
        text: prose(random(turn * 50 + n), 200),
      })),
    });
  }
  const messagesWrite = meter.reset();
  // A copy also creates its session first (its 409 check), which the source's first write did within itself.
  await service.createSession(TENANT, { sessionId: 'large-copy-created' });
  const creation = meter.reset();
  const copied = await perOperation(meter, 1, () => main.deps.copier.copy(source, { sessionId: 'large-copy' }));
  row('copy a 1,000-message path under a 4 MiB state (POST …/copy)', copied, {
    writeUnits: Math.ceil(stateWrite.writeUnits + messagesWrite.writeUnits + creation.writeUnits),
  });

  // GET of the 4 MiB state, against BatchGetItem of the same JSON text in 11 raw items.
  const text = JSON.stringify(state);
  const rawKeys: Array<{ pk: { S: string }; sk: { S: string } }> = [];
  const chunk = 380 * 1024;
  for (let offset = 0, n = 0; offset < text.length; offset += chunk, n++) {
    const key = { pk: { S: `RAW#${TENANT}#large` }, sk: { S: `P#${String(n).padStart(3, '0')}` } };
    rawKeys.push(key);
    await client.send(
      new BatchWriteItemCommand({
        RequestItems: { [TABLE]: [{ PutRequest: { Item: { ...key, t: { S: text.slice(offset, offset + chunk) } } } }] },
      }),
    );
  }
  const rawRead = async () => {
    const { Responses } = await client.send(
      new BatchGetItemCommand({ RequestItems: { [TABLE]: { Keys: rawKeys, ConsistentRead: true } } }),
    );
    const parts = (Responses?.[TABLE] ?? []).sort((a, b) => String(a.sk?.S).localeCompare(String(b.sk?.S)));
    return parts.map((part) => part.t?.S ?? '').join('').length;
  };
  const ourRead = handlerRun({ method: 'GET', url: '/v1/sessions/large-4mib/state', headers: auth }, 200);
  const oursMs: number[] = [];
  const rawMs: number[] = [];
  for (let round = 0; round < ROUNDS + 3; round++) {
    for (const [samples, read] of [
      [oursMs, ourRead],
      [rawMs, rawRead],
    ] as const) {
      const start = performance.now();
      await read();
      if (round >= 3) samples.push(performance.now() - start);
    }
  }
  const ours = median(oursMs);
  const raw = median(rawMs);
  return {
    rows,
    storage: { patches: PATCHES, storedBytes: stored.bytes, budgetBytes, baseBytes: base.bytes, items: stored.items },
    reads: { ours, raw, ratio: ours / raw },
  };
}

/** The section's table rows, for the page and the console. */
export function largeStateTable(result: LargeStateResult): string[] {
  const { storage, reads } = result;
  const storedRatio = storage.storedBytes / (storage.budgetBytes / 1.2);
  return [
    tableRow(['what', 'requests', 'capacity units', 'target', '']),
    tableRow(['---', '---:', '---:', '---', '---']),
    ...result.rows.map((row) =>
      tableRow([row.what, row.requests.toFixed(2), `${row.units.toFixed(2)} ${row.unitName}`, row.target, row.met ? 'met' : 'missed']),
    ),
    tableRow([
      `${storage.patches} × 1 KB appends to a ${((storage.budgetBytes / 1.2 - storage.patches * 1000) / MiB).toFixed(2)} MiB state, every version kept: stored`,
      `${storage.items} items`,
      `${(storage.storedBytes / MiB).toFixed(2)} MiB`,
      `≤ 1.2 × (state + patches) = ${(storage.budgetBytes / MiB).toFixed(2)} MiB`,
      `${storage.storedBytes <= storage.budgetBytes ? 'met' : 'missed'}: ${storedRatio.toFixed(2)}×`,
    ]),
    tableRow([
      'GET the 4 MiB state (handler), median ms, against BatchGetItem of the same JSON text raw',
      '',
      '',
      `≤ 1.5 × raw (${reads.raw.toFixed(1)} ms)`,
      `${reads.ratio <= 1.5 ? 'met' : 'missed'}: ${reads.ours.toFixed(1)} ms, ${reads.ratio.toFixed(2)}×`,
    ]),
  ];
}

/** The section of docs/benchmarks.md (bench/page.ts), prose and table. */
export function largeStateSection(result: LargeStateResult): string {
  const appends = result.rows.find((row) => row.what.includes('appends in a row'));
  return `## State at scale: a 4 MiB state

A state of about 4 MiB (a log of ~1 KB messages of generated prose with ids, which compresses
about as prose does), written once, then changed by about 1 KB at a time through the service (no
HTTP), every DynamoDB request metered and nothing cached between requests. Targets from issue 19.
Single changes are the median of ${ROUNDS} in a row on a session of their own (their typical cost);
runs are the mean, checkpoints included. Capacity units are what AWS would bill, counted as the
Method says (DynamoDB Local's own report, and a transaction priced by DynamoDB's rules); stored
bytes are every item of the session's partition, counted as DynamoDB counts item size.

${largeStateTable(result).join('\n')}

The copy row's target is what writing the same 4 MiB state and the same 1,000 messages (20
appends of 50) cost the source in write units, plus creating an empty session (the copy creates
its session first, so that a taken id is a \`409\` before anything is written): a copy writes the
messages again, as appends, and the state once, as a version whose pieces are new to the copy's
partition. Since the copy became all or nothing (docs/architecture.md, *Copying a session*) its
last change opens it. Here that is its last append, in a transaction with the session item's
update: the append's node index stays owed to the copy's next write, as the source's last
append's does, and the opening costs the session item's update (billed twice per started KB in
the transaction: 4 write units for a session item of 1–2 KB, more with more metadata) and the
append's change billed twice (4 more): the units over the target, which no opening that keeps the
copy all or nothing avoids (docs/architecture.md says why). An opening of its own after
the last append (1,787 units and 106 requests) paid that append's index too (50) and its own
transaction (4).

A 1 KB change is three requests: the tip (\`Query\`), one \`BatchGetItem\` of the checkpoint's
pieces and the versions whose splices come after it, and the \`PutItem\` of a version item that
keeps the change as a splice (docs/architecture.md, *Changes are splices*). Every 25th write in a
row is a checkpoint, which also puts the pieces the changes since the last one touched (one
\`BatchWriteItem\`): so a run of appends is ${appends ? appends.requests.toFixed(2) : '?'} requests a write on average, and its
checkpoints put one or two pieces. Writes that land far apart are the case splices do not help:
each checkpoint puts again every piece the 24 writes before it touched, so a run of them costs
about a piece (tens of KB) a write, which the row of random replaces shows. The state the
thousand appends start from leaves them room under the 4 MiB limit; the budget is computed
from it. The GET row compares the handler (the tip, the pieces, the splices applied, the
response) with the raw SDK reading the same JSON text from 11 items in one \`BatchGetItem\` and
joining it: medians of ${ROUNDS} reads each, interleaved.
`;
}
