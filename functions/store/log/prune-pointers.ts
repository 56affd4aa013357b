import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import type { SessionScope, Tip } from '../../core/model/model.js';
import * as keys from '../table/keys.js';
import type { Item, TableClient } from '../table/table-client.js';
import { type Chain, entryOf, parseJsonText } from './log-items.js';
import { nodesOfLife } from './node-index.js';

/**
 * Which old versions a session's nodes point at, for retention (history-prune.ts), read a page
 * of the node index a run, so that what one run reads is bounded however large the tree: a
 * *pass* over the index, resumed run after run from the marker (prune-marker.ts), and decided
 * on only once it has read the whole index.
 *
 * Why a pass spread over minutes is as good as one read of the index at one tip `T0` (its
 * start), for the versions up to `T0`'s newest (`edge` bounds what it keeps: only those):
 *
 * - A node's pointer only moves to a version newer than every one there is, and a new node
 *   starts at its parent's version. So an old version pointed at later was pointed at by some
 *   node all along since `T0`: either a node that existed at `T0` and has not moved since (its
 *   index and pointer items, read when the pass reaches them, name it; a node whose index the
 *   next writer had not put yet is in the tip's newest change, and a pointer moved by the tip's
 *   change is the tip's own version: both taken at the start), or a node made after `T0`.
 * - Nodes made after `T0` are in the changes after it, with the version they start at (`p0` of
 *   the change's chain). Each run reads the log's changes since the last it read (`from`), so
 *   the pass knows every node made while it ran, wherever its key sorts in the index.
 * - The head's pointer is the tip's (`headVersion`), and so is the pointer of the node the tip's
 *   own change was written at (its version; the next writer puts its pointer item): each run
 *   takes both from its tip instead of those nodes' items, and the run that decides its own.
 *
 * What the pass takes too much (a node that moved on after its page was read) only keeps a
 * version until the next pass; nothing it takes too little.
 */

/** Node index items read in one run at most: 2,500 to 5,000 nodes (an index item each, and a pointer item once one moved). */
const NODE_PAGE = 5_000;
/** Changes made since the last run read in one run at most (a longer backlog takes the next runs). */
const CHANGES_PAGE = 4_000;

/** A pass over the node index, as the marker keeps it between runs. */
export interface PointerPass {
  life: number;
  /** Only versions below it are decided on when the pass ends (the first version kept at its start). */
  edge: number;
  /** The last node index key read ('' before the first page; null once the index is read to its end). */
  after: string | null;
  /** The key of the last change whose new nodes are counted. */
  from: string;
  /** Versions below `edge` some node points at, as read so far. */
  pointed: Set<number>;
}

/** A new pass at `tip`, deciding on versions below `edge`: what the tip itself says is pointed at. */
export function startPass(tip: Tip, edge: number): PointerPass {
  const entry = entryOf(tip);
  const from = entry ? keys.logEntry(entry.position) : keys.basePrefix(tip.incarnation, 0);
  const pass: PointerPass = { life: tip.incarnation, edge, after: '', from, pointed: new Set() };
  // The tip's newest change: the nodes it made (not indexed yet), and the node it moved (its pointer item not written yet).
  const made = entry ? parseJsonText<Chain | null>(entry.item.chain) : null;
  for (const version of [tip.headVersion, tip.version, made?.p0 ?? 0]) point(pass, version);
  return pass;
}

/**
 * One run's share of a pass: the next page of the node index and the changes made since the
 * last run. Whether the pass has read everything (then its `pointed` is what is pointed at).
 */
export async function continuePass(
  table: TableClient,
  scope: SessionScope,
  tip: Tip,
  pass: PointerPass,
  page = NODE_PAGE,
): Promise<boolean> {
  point(pass, tip.headVersion);
  point(pass, tip.version);
  const [, changesCaughtUp] = await Promise.all([
    pass.after === null ? undefined : readNodePage(table, scope, tip, pass, page),
    readNewNodes(table, scope, pass),
  ]);
  return pass.after === null && changesCaughtUp;
}

function point(pass: PointerPass, version: number): void {
  if (version > 0 && version < pass.edge) pass.pointed.add(version);
}

/** The next page of the node index; `after` moves to its last whole node, or null at the end. */
async function readNodePage(table: TableClient, scope: SessionScope, tip: Tip, pass: PointerPass, page: number): Promise<void> {
  const { Items, LastEvaluatedKey } = await table.send(
    new QueryCommand({
      TableName: table.tableName,
      KeyConditionExpression: 'pk = :pk AND begins_with(sk, :nodes)',
      ExpressionAttributeValues: { ':pk': keys.session(scope), ':nodes': keys.nodePrefix },
      ...(pass.after ? { ExclusiveStartKey: { pk: keys.session(scope), sk: pass.after } } : {}),
      Limit: page,
      ConsistentRead: true,
    }),
  );
  let items: Item[] = Items ?? [];
  if (LastEvaluatedKey) {
    // A node's index and pointer items are side by side: the last node of a cut page is read
    // whole by the next run (unless it is all the page holds).
    const lastNode = nodeIdOf(items.at(-1));
    const whole = items.filter((item) => nodeIdOf(item) !== lastNode);
    if (whole.length > 0) items = whole;
  }
  // The head's pointer is the tip's, not its index's; and the node the tip's own change was
  // written at points at the tip's version, its pointer item not put yet (both added every run).
  const moved = entryOf(tip)?.versionNode;
  for (const node of nodesOfLife(items, pass.life)) {
    if (node.id !== tip.head && node.id !== moved) point(pass, node.stateVersion);
  }
  pass.after = LastEvaluatedKey ? String(items.at(-1)?.sk ?? pass.after) : null;
}

/** The nodes made by changes after `from` (each starts at its chain's `p0`); whether it read up to the newest. */
async function readNewNodes(table: TableClient, scope: SessionScope, pass: PointerPass): Promise<boolean> {
  let start: Item | undefined = { pk: keys.session(scope), sk: pass.from };
  let read = 0;
  do {
    const page: { Items?: Item[]; LastEvaluatedKey?: Item } = await table.send(
      new QueryCommand({
        TableName: table.tableName,
        KeyConditionExpression: 'pk = :pk AND sk < :end',
        ExpressionAttributeValues: { ':pk': keys.session(scope), ':end': keys.logEndOf(pass.life) },
        ProjectionExpression: 'sk, chain',
        ExclusiveStartKey: start,
        Limit: Math.min(1_000, CHANGES_PAGE - read),
        ConsistentRead: true,
      }),
    );
    for (const item of page.Items ?? []) {
      const chain = parseJsonText<Chain | null>(item.chain);
      if (chain) point(pass, chain.p0);
      pass.from = String(item.sk);
    }
    read += page.Items?.length ?? 0;
    start = page.LastEvaluatedKey;
  } while (start && read < CHANGES_PAGE);
  return start === undefined;
}

/** `N#<node>#<life>[#p]` → the node's id. */
function nodeIdOf(item: Item | undefined): string | undefined {
  return /^N#(.+)#\d+(?:#p)?$/.exec(String(item?.sk ?? ''))?.[1];
}

// ---- the marker's form ----------------------------------------------------------------------

/** A pass as the marker stores it (`pointed` as runs: `3-9,12`). */
export function storedPass(pass: PointerPass): Item {
  return { life: pass.life, edge: pass.edge, after: pass.after, from: pass.from, pointed: encodeRuns(pass.pointed) };
}

export function passOf(stored: unknown): PointerPass | null {
  if (!stored || typeof stored !== 'object') return null;
  const item = stored as Item;
  if (typeof item.life !== 'number' || typeof item.edge !== 'number' || typeof item.from !== 'string') return null;
  return {
    life: item.life,
    edge: item.edge,
    after: typeof item.after === 'string' ? item.after : null,
    from: item.from,
    pointed: decodeRuns(String(item.pointed ?? '')),
  };
}

function encodeRuns(numbers: ReadonlySet<number>): string {
  const sorted = [...numbers].sort((a, b) => a - b);
  const runs: string[] = [];
  for (let index = 0; index < sorted.length; ) {
    const first = sorted[index] as number;
    let last = first;
    while (sorted[index + 1] === last + 1) last = sorted[++index] as number;
    runs.push(first === last ? String(first) : `${first}-${last}`);
    index++;
  }
  return runs.join(',');
}

function decodeRuns(text: string): Set<number> {
  const numbers = new Set<number>();
  for (const run of text.split(',')) {
    if (!run) continue;
    const [first, last = first] = run.split('-').map(Number) as [number, number?];
    for (let version = first; version <= (last as number); version++) numbers.add(version);
  }
  return numbers;
}
