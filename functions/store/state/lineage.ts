/**
 * How a version item stores its lineage window: the versions before it in its node lineage,
 * nearest first (VersionRecord.lineage), each with the `seq` of its place in the log (a version
 * k is the `seq`-th change after version k - 1, keys.ts), so that the window reads in one
 * batch. The list is strictly decreasing and mostly made of runs of consecutive numbers that
 * share a seq (a linear history is one run), so it is stored as runs, `@seq` when not 1:
 *
 *   [56@2, 55@2, 54@2, 50, 20, 19, 18]  →  "56-54@2,50,20-18"
 *
 * One short string instead of a list of up to 32 numbers: about 120 bytes less per version
 * item, and 32 fewer attribute values for the SDK and DynamoDB to encode and decode.
 */
export interface LineageEntry {
  version: number;
  seq: number;
}

/**
 * The periods a run's seqs may repeat with. A chat's turn records two versions, a decision's
 * (the third change after the version before it: the append, the lease, the commit) and a
 * `PATCH`'s (the first), so its lineage alternates 3 and 1: one run "19-1@3/1" instead of
 * nineteen ("19@3,18,17@3,…"), some 120 bytes less in each of its version items.
 */
const PERIODS = [1, 2, 3, 4] as const;

export function encodeLineage(lineage: readonly LineageEntry[]): string {
  const runs: string[] = [];
  let index = 0;
  while (index < lineage.length) {
    const first = lineage[index] as LineageEntry;
    // The longest run of consecutive versions whose seqs repeat with one period (the shortest
    // period of that length); a run no longer than its period would be no shorter written so.
    let best = { length: 1, period: 1 };
    for (const period of PERIODS) {
      let length = 1;
      while (
        index + length < lineage.length &&
        lineage[index + length]?.version === first.version - length &&
        (length < period || lineage[index + length]?.seq === lineage[index + length - period]?.seq)
      )
        length += 1;
      if (length > best.length && (period === 1 || length > period)) best = { length, period };
    }
    const last = first.version - best.length + 1;
    const range = best.length === 1 ? String(first.version) : `${first.version}-${last}`;
    const pattern = lineage.slice(index, index + best.period).map((entry) => entry.seq);
    runs.push(best.period === 1 && first.seq === 1 ? range : `${range}@${pattern.join('/')}`);
    index += best.length;
  }
  return runs.join(',');
}

/** The lineage of a stored version item, as `encodeLineage` wrote it. */
export function decodeLineage(stored: unknown): LineageEntry[] {
  if (typeof stored !== 'string' || stored === '') return [];
  const lineage: LineageEntry[] = [];
  for (const run of stored.split(',')) {
    const [range = '', seqText] = run.split('@');
    const pattern = seqText === undefined ? [1] : seqText.split('/').map(Number);
    const dash = range.indexOf('-');
    const first = Number(dash < 0 ? range : range.slice(0, dash));
    const last = dash < 0 ? first : Number(range.slice(dash + 1));
    for (let version = first; version >= last; version--)
      lineage.push({ version, seq: pattern[(first - version) % pattern.length] as number });
  }
  return lineage;
}
