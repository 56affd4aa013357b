/**
 * Retention (issue 34, API.md section 12): what a session stores after many writes with
 * `retention: {keepVersions: 100}` against the same session without it, and what pruning cost
 * in write units per pruned version. The writes go through the service (as a state write does),
 * both sessions side by side; the pruning runs as the change hook runs it, catching up a long
 * history over runs of 4,000 changes; and one pass over the node index of a large tree, run by
 * run. `npm run bench -- --only=retention` prints it.
 */
import { type AttributeValue, type DynamoDBClient, QueryCommand } from '@aws-sdk/client-dynamodb';
import type { SessionScope } from '../functions/core/model/model.js';
import * as keys from '../functions/store/table/keys.js';
import { log, QUICK, TENANT } from './config.js';
import { kilobyteState, type Wired } from './fixture.js';
import { tableRow } from './measure.js';
import { type Meter, totalRequests } from './meter.js';

const RETENTION = { writes: QUICK ? 1_000 : 10_000, keepVersions: 100 };
/** The tree whose pass over its node index is measured: nodes (appended 50 a time), then writes at the head. */
const TREE = { nodes: QUICK ? 1_000 : 10_000, writes: 10 };

/** Items and bytes (as DynamoDB sizes them: names and values) of a session's partition. */
interface Stored {
  items: number;
  bytes: number;
  /** Of those, stripped items that DynamoDB's TTL removes within a day. */
  expiringItems: number;
  expiringBytes: number;
}

export interface RetentionResult {
  writes: number;
  keepVersions: number;
  without: Stored;
  with: Stored;
  runs: number;
  pruned: number;
  expiring: number;
  writeUnits: number;
  readUnits: number;
  requests: number;
  seconds: number;
  tree: TreeRuns;
}

/** The runs of one pass over a large tree's node index (store/log/prune-pointers.ts). */
interface TreeRuns {
  nodes: number;
  runs: number;
  /** Read units of the run that read the most, and of all of them. */
  maxReadUnits: number;
  readUnits: number;
  pruned: number;
}

/** A session of TREE.nodes nodes with writes at its head past a window of 2, pruned run after run until the pass decides. */
async function measureTreeRuns(meter: Meter, main: Wired, started: number): Promise<TreeRuns> {
  const scope = { tenant: TENANT, sessionId: `retention-tree-${started}` };
  await main.service.replaceState(scope, kilobyteState(0));
  await main.service.updateSession(scope, { retention: { keepVersions: 2 } });
  for (let first = 0; first < TREE.nodes; first += 50) {
    const messages = Array.from({ length: 50 }, (_, index) => ({
      id: `n${first + index}`,
      role: 'user',
      content: 'a message of a long tree',
    }));
    await main.service.appendMessages(scope, { messages });
  }
  for (let n = 1; n <= TREE.writes; n++) await main.service.replaceState(scope, kilobyteState(n));
  const tree: TreeRuns = { nodes: TREE.nodes, runs: 0, maxReadUnits: 0, readUnits: 0, pruned: 0 };
  for (;;) {
    const { result, cost } = await meter.measure(() => main.store.pruneHistory(scope, { everyMs: 0 }));
    tree.runs++;
    tree.readUnits += cost.readUnits;
    tree.maxReadUnits = Math.max(tree.maxReadUnits, cost.readUnits);
    tree.pruned += result?.pruned ?? 0;
    if (!result?.behind || tree.runs >= 100) return tree;
  }
}

/** DynamoDB's size of an attribute value (names count separately), close enough for a table of bytes. */
function sizeOf(value: AttributeValue): number {
  if (value.S !== undefined) return Buffer.byteLength(value.S);
  if (value.N !== undefined) return Math.ceil(value.N.replace(/^-|\.|^0+/g, '').length / 2) + 1;
  if (value.B !== undefined) return value.B.byteLength;
  if (value.BOOL !== undefined || value.NULL !== undefined) return 1;
  if (value.L !== undefined) return 3 + value.L.reduce((sum, item) => sum + 1 + sizeOf(item), 0);
  if (value.M !== undefined) return 3 + Object.entries(value.M).reduce((sum, [name, item]) => sum + 1 + name.length + sizeOf(item), 0);
  return 0;
}

async function storedOf(client: DynamoDBClient, table: string, scope: SessionScope): Promise<Stored> {
  const stored: Stored = { items: 0, bytes: 0, expiringItems: 0, expiringBytes: 0 };
  let start: Record<string, AttributeValue> | undefined;
  do {
    const page = await client.send(
      new QueryCommand({
        TableName: table,
        KeyConditionExpression: 'pk = :pk',
        ExpressionAttributeValues: { ':pk': { S: keys.session(scope) } },
        ExclusiveStartKey: start,
      }),
    );
    for (const item of page.Items ?? []) {
      const bytes = Object.entries(item).reduce((sum, [name, value]) => sum + name.length + sizeOf(value), 0);
      stored.items++;
      stored.bytes += bytes;
      if (item.expiresAt !== undefined) {
        stored.expiringItems++;
        stored.expiringBytes += bytes;
      }
    }
    start = page.LastEvaluatedKey;
  } while (start);
  return stored;
}

export async function measureRetention(meter: Meter, client: DynamoDBClient, main: Wired, table = 'bench'): Promise<RetentionResult> {
  const started = Date.now();
  const { writes, keepVersions } = RETENTION;
  const plain = { tenant: TENANT, sessionId: `retention-none-${started}` };
  const kept = { tenant: TENANT, sessionId: `retention-kept-${started}` };
  await main.service.replaceState(kept, kilobyteState(0));
  await main.service.updateSession(kept, { retention: { keepVersions } });
  await Promise.all(
    [plain, kept].map(async (scope) => {
      for (let n = scope === kept ? 1 : 0; n < writes; n++) await main.service.replaceState(scope, kilobyteState(n));
    }),
  );
  // Pruning as the change hook runs it, run after run until it caught up (no interval: at once).
  let runs = 0;
  let pruned = 0;
  let expiring = 0;
  let writeUnits = 0;
  let readUnits = 0;
  let requests = 0;
  for (;;) {
    const { result, cost } = await meter.measure(() => main.store.pruneHistory(kept, { everyMs: 0 }));
    runs++;
    writeUnits += cost.writeUnits;
    readUnits += cost.readUnits;
    requests += totalRequests(cost);
    pruned += result?.pruned ?? 0;
    expiring += result?.expiring ?? 0;
    if (!result?.behind || runs >= 20) break;
  }
  const [without, withRetention] = await Promise.all([storedOf(client, table, plain), storedOf(client, table, kept)]);
  const tree = await measureTreeRuns(meter, main, started);
  meter.reset();
  return {
    writes,
    keepVersions,
    without,
    with: withRetention,
    runs,
    pruned,
    expiring,
    writeUnits,
    readUnits,
    requests,
    seconds: (Date.now() - started) / 1000,
    tree,
  };
}

const mb = (bytes: number) => (bytes >= 1024 * 1024 ? `${(bytes / 1024 / 1024).toFixed(2)} MiB` : `${(bytes / 1024).toFixed(1)} KiB`);

function retentionTable(result: RetentionResult): string[] {
  const live = (stored: Stored) => ({ items: stored.items - stored.expiringItems, bytes: stored.bytes - stored.expiringBytes });
  const kept = live(result.with);
  const perVersion = (units: number) => (result.pruned > 0 ? (units / result.pruned).toFixed(2) : '–');
  return [
    tableRow([`a session after ${result.writes.toLocaleString('en-US')} writes of a 1 KB state`, 'items', 'bytes']),
    tableRow(['---', '---:', '---:']),
    tableRow(['without retention', result.without.items.toLocaleString('en-US'), mb(result.without.bytes)]),
    tableRow([`\`keepVersions: ${result.keepVersions}\`, after pruning`, kept.items.toLocaleString('en-US'), mb(kept.bytes)]),
    tableRow([
      '… and its stripped changes, until DynamoDB’s TTL removes them (within a day)',
      result.with.expiringItems.toLocaleString('en-US'),
      mb(result.with.expiringBytes),
    ]),
    '',
    tableRow([
      'pruning',
      'runs',
      'versions pruned',
      'other changes expiring',
      'requests',
      'WCU',
      'RCU',
      'WCU per pruned version',
      'RCU per pruned version',
    ]),
    tableRow(['---', '---:', '---:', '---:', '---:', '---:', '---:', '---:', '---:']),
    tableRow([
      'catching up the whole history',
      String(result.runs),
      result.pruned.toLocaleString('en-US'),
      result.expiring.toLocaleString('en-US'),
      result.requests.toLocaleString('en-US'),
      result.writeUnits.toFixed(0),
      result.readUnits.toFixed(0),
      perVersion(result.writeUnits),
      perVersion(result.readUnits),
    ]),
    '',
    tableRow([
      `a tree of ${result.tree.nodes.toLocaleString('en-US')} nodes, ${TREE.writes} writes at its head past \`keepVersions: 2\``,
      'runs of the pass',
      'RCU of its largest run',
      'RCU of the pass',
      'versions pruned',
    ]),
    tableRow(['---', '---:', '---:', '---:', '---:']),
    tableRow([
      'reading the node index a page a run',
      String(result.tree.runs),
      result.tree.maxReadUnits.toFixed(0),
      result.tree.readUnits.toFixed(0),
      result.tree.pruned.toLocaleString('en-US'),
    ]),
  ];
}

export function logRetention(result: RetentionResult): void {
  log(`\nRetention: what a session stores (${result.seconds.toFixed(0)} s)\n${retentionTable(result).join('\n')}`);
}

/** The page's section (bench/page.ts). */
export function retentionSection(result: RetentionResult): string {
  return `## Retention: what a session stores

Two sessions written side by side through the service, ${result.writes.toLocaleString('en-US')} state writes of a 1 KB state
each at the head, one of them with \`retention: {keepVersions: ${result.keepVersions}}\`; then its history pruned as the
change hook prunes it (docs/architecture.md, "Retention"), here run after run at once until it caught up
(a run takes at most 4,000 changes; the hook runs one at most once a minute per session). Bytes are
DynamoDB's item sizes (names and values) of everything in the session's partition.

${retentionTable(result).join('\n')}

A pruned version's item is stripped of its state at once and removed by DynamoDB's TTL a day later
(it holds the version's place in the log, a claim a write still running could otherwise make again);
DynamoDB Local runs no TTL, so the stripped items are counted on a line of their own. The last
table is one pass over a large tree's node index: a run reads at most 5,000 index items (and the
changes since the run before), so what one run reads stays bounded however large the tree (one
run read the whole index before: about what the whole pass reads now); the pass decides at its
last run (store/log/prune-pointers.ts; a session's runs are a minute apart).
`;
}
