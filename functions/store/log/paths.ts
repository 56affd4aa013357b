import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import type { JsonObject } from '../../core/json/json.js';
import { AgentStateError } from '../../core/kernel/errors.js';
import { ROOT_NODE } from '../../core/kernel/ids.js';
import type { PathRead } from '../../core/model/message-path.js';
import type { NodeRecord, SessionScope } from '../../core/model/model.js';
import type { LogPosition } from '../table/keys.js';
import * as keys from '../table/keys.js';
import { queryAll } from '../table/paging.js';
import type { Item, TableClient } from '../table/table-client.js';
import { type Chain, type LogEntry, type NodePlace, parseJsonText, type Run, unpackText } from './log-items.js';

/**
 * Paths through the message tree, read by ranges of the log rather than node by node.
 *
 * Every change that makes nodes records the path to its last node as a short list of ranges of
 * the session's log (`Run`): from one change to a later one, holding every change the path
 * passes through, and perhaps some others. A conversation that goes straight on is one range
 * that grows; a fork, or a return to an older branch after another one grew, starts a new one.
 * Each change also records where its first node hangs (`Chain.up`), so a reader that holds the
 * changes of the ranges walks the path back from its last node in memory, skipping what is off
 * the path.
 *
 *   path to a6:  [V#0#0#1 … V#0#3#2] [V#0#5#1 … V#0#9#1]     two ranges, read in parallel
 *
 * A read is the target (the tip, or a node's index with the tip) and then one round of range
 * queries in parallel, a long range split into parts of about `SEGMENT_BYTES` so that each
 * part is one page of a Query: at any depth, two rounds, and a third only for a part that
 * still spans more than a page. Ranges are bounded (`MAX_RUNS`): past that, the two closest
 * ranges merge into one that also holds what lies between them — correct, only read wider.
 */

/** A path keeps at most this many ranges; past it, the closest two merge. */
const MAX_RUNS = 16;
/** A range longer than this (by the log's bytes) is read in parts, in parallel (one Query page is 1 MB). */
const SEGMENT_BYTES = 700_000;
/** The largest seq a key holds (keys.ts pads it to 8 digits): the end of a base's changes. */
const LAST_SEQ = 99_999_999;

/**
 * The ranges of a change at `at` whose first node hangs under `parent` (null: the root). It
 * continues its parent's last range when no other change made nodes in between (`newestNodes`
 * is the newest change that made nodes before it), and starts a new range otherwise.
 */
export function childRuns(
  parent: NodePlace | null,
  newestNodes: readonly [number, number] | undefined,
  at: { base: number; seq: number; bytesBefore: number; bytesAfter: number },
): Run[] {
  const inherited = parent ? [...parent.r] : [];
  const last = inherited.at(-1);
  const continues = parent && last && newestNodes && newestNodes[0] === parent.s[0] && newestNodes[1] === parent.s[1];
  const runs: Run[] = continues
    ? [...inherited.slice(0, -1), [last[0], last[1], last[2], at.base, at.seq, at.bytesAfter]]
    : [...inherited, [at.base, at.seq, at.bytesBefore, at.base, at.seq, at.bytesAfter]];
  while (runs.length > MAX_RUNS) mergeClosest(runs);
  return runs;
}

/** Merges the two neighbouring ranges with the fewest bytes between them. */
function mergeClosest(runs: Run[]): void {
  let best = 0;
  for (let index = 1; index < runs.length - 1; index++) {
    const gap = (run: number) => (runs[run + 1] as Run)[2] - (runs[run] as Run)[5];
    if (gap(index) < gap(best)) best = index;
  }
  const [a, b] = [runs[best] as Run, runs[best + 1] as Run];
  runs.splice(best, 2, [a[0], a[1], a[2], b[3], b[4], b[5]]);
}

/** A change as a path read needs it: its position, its messages, where it hangs. */
interface PathEntry {
  readonly position: LogPosition;
  readonly chain: Chain;
  readonly messages: readonly JsonObject[];
}

/** What a path read asks the table for: only changes that made nodes, and only what a walk needs. */
const PATH_PROJECTION = {
  ProjectionExpression: 'sk, #chain, #nodes',
  ExpressionAttributeNames: { '#chain': 'chain', '#nodes': 'nodes' },
};

function pathEntry(item: Item, position: LogPosition): PathEntry | null {
  const chain = parseJsonText<Chain | null>(item.chain);
  const text = unpackText(item.nodes);
  if (!chain || text === null) return null;
  return { position, chain, messages: JSON.parse(text) as JsonObject[] };
}

/** Reads the paths of one session (one life of it) from its log. */
export class PathReader {
  private readonly entries = new Map<string, PathEntry>();

  constructor(
    private readonly table: TableClient,
    private readonly scope: SessionScope,
    private readonly incarnation: number,
    known: Iterable<LogEntry>,
    private readonly segmentBytes: number = SEGMENT_BYTES,
  ) {
    for (const entry of known) {
      if (entry.chain) this.entries.set(this.key(entry.position), { ...entry, chain: entry.chain });
    }
  }

  private key(at: { base: number; seq: number }): string {
    return keys.logEntry({ incarnation: this.incarnation, base: at.base, seq: at.seq });
  }

  /** The path root→`target`; with `last`, its last `last` messages only. */
  async read(target: NodeRecord, last?: number): Promise<PathRead> {
    if (target.id === ROOT_NODE) return { messages: [], ancestry: [ROOT_NODE], omitted: 0 };
    const place = target.place as NodePlace | undefined;
    if (!place) throw new AgentStateError('internal', `node ${target.id} has no place in the log`);
    const want = last === undefined ? target.depth : Math.min(last, target.depth);
    const start = { s: place.s, p: place.p };
    for (let round = 0; ; round++) {
      const walked = this.walk(start, want);
      if (walked.missing === null) {
        const ids = walked.newestFirst.map((message) => String(message.id)).reverse();
        const messages = [...walked.newestFirst].reverse();
        return {
          messages,
          ancestry: walked.reachedRoot ? [ROOT_NODE, ...ids] : ids,
          omitted: target.depth - messages.length,
        };
      }
      // Every round but a pathological one (a range that lost track of a change) is the first.
      if (round > target.depth + 2) throw new AgentStateError('internal', `the path to ${target.id} is broken in the log`);
      await this.fetch(place.r, walked.missing, last === undefined ? undefined : want - walked.newestFirst.length, round);
    }
  }

  /** The messages from `start` back towards the root, as far as the changes known reach. */
  private walk(
    start: { s: readonly [number, number]; p: number },
    want: number,
  ): { newestFirst: JsonObject[]; reachedRoot: boolean; missing: readonly [number, number] | null } {
    const newestFirst: JsonObject[] = [];
    let at: { s: readonly [number, number]; p: number } | null = start;
    while (at) {
      const entry = this.entries.get(this.key({ base: at.s[0], seq: at.s[1] }));
      if (!entry) return { newestFirst, reachedRoot: false, missing: at.s };
      for (let index = at.p; index >= 0; index--) {
        newestFirst.push(entry.messages[index] as JsonObject);
        if (newestFirst.length >= want) return { newestFirst, reachedRoot: entry.chain.up === null && index === 0, missing: null };
      }
      at = entry.chain.up;
    }
    return { newestFirst, reachedRoot: true, missing: null };
  }

  /**
   * Reads the changes a walk stopped at. For a whole path, every range up to the missing change,
   * in parallel parts; for its last messages, back from the missing change within its range, a
   * few more than needed. A change that no range holds (never, unless ranges are wrong) is read
   * by its key.
   */
  private async fetch(
    runs: readonly Run[],
    missing: readonly [number, number],
    stillWanted: number | undefined,
    round: number,
  ): Promise<void> {
    const upTo = this.key({ base: missing[0], seq: missing[1] });
    const inRange = runs.filter((run) => this.key({ base: run[0], seq: run[1] }) <= upTo);
    const holding = inRange.at(-1);
    const held = holding && this.key({ base: holding[3], seq: holding[4] }) >= upTo;
    if (!holding || !held || (stillWanted === undefined && round > 0)) {
      await this.query(upTo, upTo, {});
      return;
    }
    if (stillWanted !== undefined) {
      await this.query(this.key({ base: holding[0], seq: holding[1] }), upTo, { newestFirst: true, limit: stillWanted * 2 + 8 });
      return;
    }
    await Promise.all(inRange.flatMap((run) => this.segments(run, missing)).map(([from, to]) => this.query(from, to, {})));
  }

  /** A range up to `missing`, cut into parts of about SEGMENT_BYTES by the numbers of its keys. */
  private segments(run: Run, missing: readonly [number, number]): Array<[string, string]> {
    const [fromBase, fromSeq, bytesBefore] = run;
    const beyond = run[3] > missing[0] || (run[3] === missing[0] && run[4] > missing[1]);
    const [toBase, toSeq] = beyond ? missing : [run[3], run[4]];
    const parts = Math.max(1, Math.ceil((run[5] - bytesBefore) / this.segmentBytes));
    const from = this.key({ base: fromBase, seq: fromSeq });
    const to = this.key({ base: toBase, seq: toSeq });
    if (parts === 1) return [[from, to]];
    const bounds: Array<{ base: number; seq: number }> = [{ base: fromBase, seq: fromSeq }];
    for (let part = 1; part < parts; part++) {
      const bound =
        fromBase === toBase
          ? { base: fromBase, seq: fromSeq + Math.round(((toSeq - fromSeq) * part) / parts) }
          : { base: fromBase + Math.round(((toBase - fromBase) * part) / parts), seq: 0 };
      const previous = bounds.at(-1) as { base: number; seq: number };
      if (bound.base > previous.base || (bound.base === previous.base && bound.seq > previous.seq)) bounds.push(bound);
    }
    return bounds.map((bound, index) => {
      const next = bounds[index + 1];
      const end = next
        ? next.seq === 0
          ? this.key({ base: next.base - 1, seq: LAST_SEQ })
          : this.key({ base: next.base, seq: next.seq - 1 })
        : to;
      return [this.key(bound), end];
    });
  }

  private async query(from: string, to: string, options: { newestFirst?: boolean; limit?: number }): Promise<void> {
    await queryAll(
      async (start) => {
        const page = await this.table.send(
          new QueryCommand({
            TableName: this.table.tableName,
            KeyConditionExpression: 'pk = :pk AND sk BETWEEN :from AND :to',
            FilterExpression: 'attribute_exists(#chain)',
            ExpressionAttributeValues: { ':pk': keys.session(this.scope), ':from': from, ':to': to },
            ...PATH_PROJECTION,
            ExpressionAttributeNames: { ...PATH_PROJECTION.ExpressionAttributeNames },
            ...(options.newestFirst ? { ScanIndexForward: false } : {}),
            ...(options.limit ? { Limit: options.limit } : {}),
            ExclusiveStartKey: start,
            ConsistentRead: true,
          }),
        );
        // A limited read stops after its page: the walk asks again if it needs more.
        return options.limit ? { Items: page.Items ?? [] } : { Items: page.Items ?? [], LastEvaluatedKey: page.LastEvaluatedKey };
      },
      (item) => {
        const at = String(item.sk);
        const match = /^V#\d+#(\d+)#(\d+)$/.exec(at);
        if (!match) return;
        const entry = pathEntry(item, { incarnation: this.incarnation, base: Number(match[1]), seq: Number(match[2]) });
        if (entry) this.entries.set(at, entry);
      },
    );
  }
}
