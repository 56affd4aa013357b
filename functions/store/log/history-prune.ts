import { QueryCommand, type QueryCommandInput, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { SessionScope, Tip } from '../../core/model/model.js';
import {
  countWindowStart,
  fallsOutAt,
  inWindow,
  PRUNE_GRACE_MS,
  PRUNE_INTERVAL_MS,
  PRUNED_TTL_SECONDS,
} from '../../core/model/retention.js';
import type { LineageEntry } from '../state/lineage.js';
import * as versionItem from '../state/version-item.js';
import { KIND_ATTRIBUTE, LOG_ITEM_KIND } from '../table/item-kinds.js';
import * as keys from '../table/keys.js';
import { logPositionOf } from '../table/keys.js';
import { tableKeys } from '../table/table.js';
import { batchGet, conditionally, type Item, type TableClient } from '../table/table-client.js';
import { KEPT_ANSWER_ATTRIBUTES } from './kept-answers.js';
import { claimRun, clearDue, type Marker, saveMarker } from './prune-marker.js';
import { continuePass, startPass } from './prune-pointers.js';

/**
 * Retention (API.md section 12): the versions of a session outside its windows, that no node
 * and not the head points at, are pruned; the change hook runs this, at most once a minute per
 * session (core/model/retention.ts has the rules).
 *
 * A version's item is a place of the log, and places are write claims (log-writer.ts): a write
 * that read a tip from before a place was freed could claim it again. So a pruned version is
 * never deleted. Its item is stripped of its content (state, commands, change, agent config:
 * `versionItem.contentAttributes`) and marked `pruned`, and, unless it holds a decision's
 * messages or record, DynamoDB's TTL removes it a day later, when no write can hold a tip that
 * old. Other changes that hold nothing any read needs (a head switch, a lease, its end, a
 * settings change) get the same TTL; changes that made nodes stay, since their nodes' messages
 * are in them. The pieces of large states that only pruned versions named are then unnamed, and
 * the piece collector (state-pieces.ts) removes them.
 *
 * Why it never removes what a read or a write still needs:
 *
 * - What a node points at only ever moves to a version newer than every existing one (a write
 *   at the node), and a new node starts at its parent's version. So a version that no node and
 *   not the head points at, as of a tip, is never pointed at again. The pruner reads the node
 *   index in a pass that starts at a tip and may take several runs (prune-pointers.ts says why
 *   it sees every pointer that still holds when it ends), and prunes only versions up to that
 *   tip that nothing points at when it decides, as of the tip of the run that decides.
 * - A write computes its version from the version its node points at (its base) and claims the
 *   log's next place after the tip it read. If the base was pruned, the pruner read a tip in
 *   which nothing pointed at it, which is later than the writer's, so the writer's claim fails
 *   and it reads again. A read that finds its node's version pruned is as stale and reads again.
 * - A large state kept as a splice needs the versions of its chain (`stateK`): every version
 *   in the chain of a kept version is kept too, and a new version's chain is its base's chain
 *   and its base, so it only names versions that are kept.
 * - A change event's `prev` is read from the previous version: versions whose event this
 *   process has not built yet (`builtThrough`) are left alone, and so is each one's previous
 *   version.
 *
 * Where runs got to is the session's marker (prune-marker.ts), which also says when the next
 * run is due without a write: the change hook's scheduled sweep (prune-due.ts) runs those.
 *
 * A run reads a page of the node index (5,000 items at most, a pass over a larger tree takes
 * several runs and decides at its last) and the changes since the last run, then, deciding, the
 * log from `w` to the edge of the window (each change once in its life, as it falls out) and the
 * versions kept below `w`; a session with
 * large states also reads the window's versions, for their chains. It writes one UpdateItem per
 * pruned or expiring change, then the marker; a run that dies midway is redone by the next one
 * (every write is conditional and idempotent), and a session with a long history is caught up
 * over several runs of at most MAX_CHANGES_PER_RUN changes each.
 */

/** Changes read as candidates in one run at most; a longer backlog is taken over the next runs. */
const MAX_CHANGES_PER_RUN = 4000;
/**
 * What a pruned version that TTL removes also drops: what it carried forward (every later change
 * carries it), its lineage and numbers. Its `kind`, `version` and `createdAt` stay, so that it
 * still reads as a pruned version (not as a missing one) until it is gone.
 */
const WHAT_A_REMOVED_VERSION_DROPS = ['t', 'writeId', 'lineage', 'node', 'prevVersion', 'cause', 'author', 'decisionId'] as const;

/** Writes in flight at once. */
const PARALLEL_WRITES = 16;

/** What one run did. */
export interface PruneReport {
  /** Versions pruned. */
  pruned: number;
  /** Other changes given their removal time (they hold nothing a read needs). */
  expiring: number;
  /** Versions kept below the window (a node or the head points at them, or a kept splice needs them). */
  kept: number;
  /** Versions left undecided for the next run (a long backlog). */
  behind: boolean;
  /** False when another run claimed the session within the interval (nothing was done). */
  ran: boolean;
  /**
   * Versions that fell out but were left for a moment: their events may not be built yet by
   * every stream consumer. A run a little later prunes them (the change hook schedules one).
   */
  waiting: boolean;
}

const NOT_ITS_TURN: PruneReport = { pruned: 0, expiring: 0, kept: 0, behind: false, ran: false, waiting: true };

export interface PruneOptions {
  /** The newest version whose change event this process built (the change hook's runs). */
  builtThrough?: { incarnation: number; version: number };
  /** Run now, whenever the last run was. */
  force?: boolean;
  /** At most one run per this long (PRUNE_INTERVAL_MS). */
  everyMs?: number;
  /** The previous version of a version younger than this stays, for its event (default PRUNE_GRACE_MS). */
  graceMs?: number;
  /** Node index items a run reads at most (prune-pointers.ts; default 5,000): tests make it small. */
  nodePage?: number;
}

/** The session's tip (store `readTip`, without the state). */
type TipReader = () => Promise<Tip>;

/** A version that may be pruned: its place and what its item holds. */
interface Candidate extends LineageEntry {
  /** Holds a decision's messages or record: stripped, never removed (undefined: not known, its item says). */
  holdsNodes?: boolean;
}

/**
 * One run for a session: when `force` is not set, only if no run claimed it in the last
 * `everyMs` (PRUNE_INTERVAL_MS). Resolves with what it did (`ran: false` when it was not its
 * turn), or null when the session has no retention (or no history).
 */
export async function pruneHistory(
  table: TableClient,
  scope: SessionScope,
  readTip: TipReader,
  options: PruneOptions = {},
): Promise<PruneReport | null> {
  const everyMs = options.everyMs ?? PRUNE_INTERVAL_MS;
  const nowMs = table.now();
  const claim = await claimRun(table, scope, options.force === true ? 0 : everyMs);
  // The other stream consumer (webhooks) may trail this one by a moment: the previous versions
  // of versions this young stay for its events.
  const youngSince = nowMs - (options.graceMs ?? Math.min(PRUNE_GRACE_MS, everyMs));
  if (!claim) return NOT_ITS_TURN;
  const tip = await readTip();
  const retention = tip.lifetime?.retention;
  const life = tip.incarnation;
  // No history or no retention; or events built for an older life only: none of this life's
  // are, so nothing of it is touched yet (the hook runs again when they are).
  if (
    (tip.kind !== 'version' && tip.kind !== 'entry') ||
    !retention ||
    (options.builtThrough && options.builtThrough.incarnation !== life)
  ) {
    await clearDue(table, scope, claim.at);
    return null;
  }
  const newest = tip.version;
  const marker: Marker = claim.marker?.life === life ? claim.marker : { life, w: 1, kept: [], large: false, scan: null };
  const builtThrough = Math.min(options.builtThrough?.version ?? newest, newest);
  const windowStart = countWindowStart(retention, newest);
  let edge = Math.min(windowStart, builtThrough + 1);

  // What nodes point at: a pass over the node index, a page a run (prune-pointers.ts). Not
  // needed while nothing below the window is left to decide on.
  if (!marker.scan && marker.w >= edge && marker.kept.length === 0) {
    await saveMarker(table, scope, claim.at, marker, windowStart > builtThrough + 1 ? claim.at + everyMs : null);
    return { pruned: 0, expiring: 0, kept: 0, behind: false, ran: true, waiting: windowStart > builtThrough + 1 };
  }
  // Versions kept below `w` are decided on again: the pass covers them too.
  const pass = marker.scan?.life === life ? marker.scan : startPass(tip, Math.max(edge, marker.w));
  if (!(await continuePass(table, scope, tip, pass, options.nodePage))) {
    // The rest of the pass in the next runs, an interval apart.
    await saveMarker(table, scope, claim.at, { ...marker, scan: pass }, claim.at + everyMs);
    return { pruned: 0, expiring: 0, kept: marker.kept.length, behind: true, ran: true, waiting: false };
  }
  // Decided on: only versions the pass covers.
  edge = Math.min(edge, pass.edge);

  // The versions that fell out of the window since the last run (each read once), up to those
  // whose events are built.
  const candidates: Candidate[] = [];
  const expiring: string[] = [];
  let large = marker.large;
  let behind = false;
  // When the first version still in the window by age alone leaves it (keepDays).
  let agesOutAt: number | null = null;
  if (marker.w < edge) {
    const read = await readRange(table, scope, keys.basePrefix(life, marker.w - 1), keys.basePrefix(life, edge - 1), MAX_CHANGES_PER_RUN);
    const others: Array<{ sk: string; base: number }> = [];
    for (const item of read.items) {
      const position = logPositionOf(String(item.sk));
      if (!position) continue;
      if (item[KIND_ATTRIBUTE] !== LOG_ITEM_KIND.version) {
        if (!holdsNodes(item) && item[KIND_ATTRIBUTE] !== LOG_ITEM_KIND.tombstone && item[tableKeys.timeToLive] === undefined) {
          others.push({ sk: String(item.sk), base: position.base });
        }
        continue;
      }
      const version = Number(item.version);
      // Younger than keepDays: this one and every later one are in the window.
      const createdAt = Date.parse(String(item.createdAt));
      if (inWindow(retention, version, createdAt, newest, nowMs)) {
        edge = version;
        agesOutAt = fallsOutAt(retention, createdAt);
        break;
      }
      if (typeof item.stateN === 'number') large = true;
      if (!versionItem.isPruned(item)) candidates.push({ version, seq: position.seq, holdsNodes: holdsNodes(item) });
    }
    if (read.cut !== undefined && read.cut < edge) {
      edge = read.cut;
      behind = true;
    }
    // Other changes before the last version decided on (those after it wait for the next run).
    expiring.push(...others.filter((change) => change.base < edge - 1).map((change) => change.sk));
  }
  const decided = candidates.filter((candidate) => candidate.version < edge);

  // What is pointed at, as the pass read it; and what must stay for events and splice chains.
  const pointed = new Set<number>([tip.headVersion, ...pass.pointed]);
  const pinned = await pinnedVersions(table, scope, {
    life,
    edge,
    builtThrough,
    youngSince,
    newest,
    large,
    kept: marker.kept,
    pointed,
    decided,
  });
  const keep = (version: number) => pointed.has(version) || pinned.chains.has(version) || pinned.events.has(version);

  const retained: LineageEntry[] = [];
  const pruned: Candidate[] = [];
  // Left only for the events not built yet: a later run takes them.
  let waiting = windowStart > builtThrough + 1;
  for (const entry of [...marker.kept, ...decided]) {
    if (keep(entry.version)) retained.push({ version: entry.version, seq: entry.seq });
    else pruned.push(entry);
    if (!pointed.has(entry.version) && !pinned.chains.has(entry.version) && pinned.events.has(entry.version)) waiting = true;
  }

  const ttl = table.nowSeconds() + PRUNED_TTL_SECONDS;
  await inParallel(pruned, (candidate) => stripVersion(table, scope, candidate, { life, nowMs, ttl }));
  await inParallel(expiring, (sk) => expireChange(table, scope, sk, ttl));
  retained.sort((a, b) => b.version - a.version);
  // Due again: in an interval when something was left for later, else when a version ages out
  // (none, until a write, for a count window alone: only writes move it).
  const due = waiting || behind ? claim.at + everyMs : agesOutAt;
  await saveMarker(table, scope, claim.at, { life, w: Math.max(marker.w, edge), kept: retained, large, scan: null }, due);
  return { pruned: pruned.length, expiring: expiring.length, kept: retained.length, behind, ran: true, waiting };
}

/** Whether a change holds what must stay: a decision's (or an append's) messages, or a decision's record. */
function holdsNodes(item: Item): boolean {
  return item.chain !== undefined || item.decision !== undefined;
}

/**
 * The versions that must stay though nothing points at them: the previous version of each
 * version whose event a stream consumer may not have built yet (this hook's: after
 * `builtThrough`; the other's: written since `youngSince`), and, in a session with large states,
 * every version in the splice chain of a version that stays (the window, what is pointed at).
 */
async function pinnedVersions(
  table: TableClient,
  scope: SessionScope,
  at: {
    life: number;
    edge: number;
    builtThrough: number;
    youngSince: number;
    newest: number;
    large: boolean;
    kept: readonly LineageEntry[];
    pointed: ReadonlySet<number>;
    decided: readonly Candidate[];
  },
): Promise<{ events: Set<number>; chains: Set<number> }> {
  const events = new Set<number>();
  const chains = new Set<number>();
  const young = (item: Item) => Number(item.version) > at.builtThrough || Date.parse(String(item.createdAt)) > at.youngSince;
  // With large states, the window whole (for its chains); else the newest versions back to the first that is not young.
  const recent = at.large
    ? (await readRange(table, scope, keys.basePrefix(at.life, Math.min(at.edge, at.builtThrough + 1) - 1), keys.logEndOf(at.life))).items
    : await readNewest(table, scope, at.life, (item) => !young(item));
  const staying: Item[] = [];
  for (const item of recent) {
    if (item[KIND_ATTRIBUTE] !== LOG_ITEM_KIND.version) continue;
    if (young(item)) events.add(Number(item.prevVersion ?? 0));
    staying.push(item);
  }
  if (at.large) {
    // Kept below the window, or about to be: read for their chains.
    const below = [...at.kept, ...at.decided].filter((entry) => at.pointed.has(entry.version));
    staying.push(
      ...(await batchGet(
        table,
        below.map((entry) => ({
          pk: keys.session(scope),
          sk: keys.logEntry({ incarnation: at.life, base: entry.version - 1, seq: entry.seq }),
        })),
      )),
    );
    for (const item of staying) {
      for (const sk of versionItem.readKeys(item)) {
        const position = logPositionOf(sk);
        if (position) chains.add(position.base + 1);
      }
    }
  }
  return { events, chains };
}

/** The life's newest changes, newest first, down to the first version for which `last` holds (included). */
async function readNewest(table: TableClient, scope: SessionScope, life: number, last: (item: Item) => boolean): Promise<Item[]> {
  const items: Item[] = [];
  await queryUntil(
    table,
    {
      KeyConditionExpression: 'pk = :pk AND begins_with(sk, :life)',
      ExpressionAttributeValues: { ':pk': keys.session(scope), ':life': keys.lifePrefix(life) },
      ScanIndexForward: false,
      Limit: 100,
    },
    (item) => {
      items.push(item);
      return item[KIND_ATTRIBUTE] === LOG_ITEM_KIND.version && last(item);
    },
  );
  return items;
}

/**
 * Strips a version of its content and marks it pruned; TTL removes it a day later unless it
 * holds a decision's messages or record (when that is not known, its item decides).
 */
async function stripVersion(
  table: TableClient,
  scope: SessionScope,
  candidate: Candidate,
  stamp: { life: number; nowMs: number; ttl: number },
): Promise<void> {
  const { life, nowMs, ttl } = stamp;
  const key = { pk: keys.session(scope), sk: keys.logEntry({ incarnation: life, base: candidate.version - 1, seq: candidate.seq }) };
  const strip = (removed: boolean, onlyWithoutNodes: boolean) => {
    // What goes: the content; for an item TTL removes, also what only a read of its version used.
    // A kept answer holds the state too (kept-answers.ts): it goes with the content.
    const gone = [...versionItem.contentAttributes, ...KEPT_ANSWER_ATTRIBUTES, ...(removed ? WHAT_A_REMOVED_VERSION_DROPS : [])];
    return conditionally(
      table.send(
        new UpdateCommand({
          TableName: table.tableName,
          Key: key,
          UpdateExpression: `SET #pruned = :now${removed ? ', #ttl = :ttl' : ''} REMOVE ${gone.map((_, index) => `#c${index}`).join(', ')}`,
          // Only a version not pruned yet (a run that died midway is redone), and never a tombstone.
          ConditionExpression: `#kind = :version AND attribute_not_exists(#pruned)${onlyWithoutNodes ? ' AND attribute_not_exists(#chain) AND attribute_not_exists(#decision)' : ''}`,
          ExpressionAttributeNames: {
            '#pruned': versionItem.PRUNED_ATTRIBUTE,
            '#kind': KIND_ATTRIBUTE,
            ...(removed ? { '#ttl': tableKeys.timeToLive } : {}),
            ...(onlyWithoutNodes ? { '#chain': 'chain', '#decision': 'decision' } : {}),
            ...Object.fromEntries(gone.map((name, index) => [`#c${index}`, name])),
          },
          ExpressionAttributeValues: { ':now': nowMs, ':version': LOG_ITEM_KIND.version, ...(removed ? { ':ttl': ttl } : {}) },
        }),
      ),
    );
  };
  if (candidate.holdsNodes === undefined) {
    if (!(await strip(true, true))) await strip(false, false);
    return;
  }
  await strip(!candidate.holdsNodes, false);
}

/** Gives a change that holds nothing a read needs its removal time. */
async function expireChange(table: TableClient, scope: SessionScope, sk: string, ttl: number): Promise<void> {
  await conditionally(
    table.send(
      new UpdateCommand({
        TableName: table.tableName,
        Key: { pk: keys.session(scope), sk },
        // What it carried forward is in every later change: only its place is left to hold.
        UpdateExpression: 'SET #ttl = :ttl REMOVE #t, #writeId',
        // Not a tombstone (a delete's own TTL stands), and only once.
        ConditionExpression: 'attribute_exists(pk) AND #kind <> :tombstone AND attribute_not_exists(#ttl)',
        ExpressionAttributeNames: { '#ttl': tableKeys.timeToLive, '#kind': KIND_ATTRIBUTE, '#t': 't', '#writeId': 'writeId' },
        ExpressionAttributeValues: { ':ttl': ttl, ':tombstone': LOG_ITEM_KIND.tombstone },
      }),
    ),
  );
}

/** The log's changes from `from` (inclusive) to `to` (exclusive) in order; `cut`: the version a read cut short at `limit` stopped before. */
async function readRange(
  table: TableClient,
  scope: SessionScope,
  from: string,
  to: string,
  limit = Number.POSITIVE_INFINITY,
): Promise<{ items: Item[]; cut?: number }> {
  const items: Item[] = [];
  const stopped = await queryUntil(
    table,
    {
      KeyConditionExpression: 'pk = :pk AND sk BETWEEN :from AND :to',
      ExpressionAttributeValues: { ':pk': keys.session(scope), ':from': from, ':to': to },
    },
    (item) => {
      if (String(item.sk) < to) items.push(item);
      return items.length >= limit;
    },
  );
  if (!stopped) return { items };
  // Decide on whole versions only: stop at the last version read.
  const lastVersion = items.findLast((item) => item[KIND_ATTRIBUTE] === LOG_ITEM_KIND.version);
  return { items, cut: lastVersion ? Number(lastVersion.version) + 1 : (logPositionOf(String(items[0]?.sk))?.base ?? 1) };
}

/** A consistent Query, page by page, each item handed to `each` until it says stop; whether it stopped before the end. */
async function queryUntil(
  table: TableClient,
  input: Omit<QueryCommandInput, 'TableName' | 'ExclusiveStartKey' | 'ConsistentRead'>,
  each: (item: Item) => boolean,
): Promise<boolean> {
  let start: Item | undefined;
  do {
    const page = await table.send(
      new QueryCommand({ ...input, TableName: table.tableName, ExclusiveStartKey: start, ConsistentRead: true }),
    );
    const found = page.Items ?? [];
    for (const [index, item] of found.entries()) {
      if (each(item)) return index < found.length - 1 || page.LastEvaluatedKey !== undefined;
    }
    start = page.LastEvaluatedKey;
  } while (start);
  return false;
}

async function inParallel<T>(items: readonly T[], run: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const item = items[next++] as T;
      await run(item);
    }
  };
  await Promise.all(Array.from({ length: Math.min(PARALLEL_WRITES, items.length) }, worker));
}
