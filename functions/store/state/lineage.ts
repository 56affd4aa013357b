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

export function encodeLineage(lineage: readonly LineageEntry[]): string {
  const runs: string[] = [];
  let index = 0;
  while (index < lineage.length) {
    const first = lineage[index] as LineageEntry;
    let last = first.version;
    while (index + 1 < lineage.length && lineage[index + 1]?.version === last - 1 && lineage[index + 1]?.seq === first.seq) {
      last -= 1;
      index += 1;
    }
    const range = first.version === last ? String(first.version) : `${first.version}-${last}`;
    runs.push(first.seq === 1 ? range : `${range}@${first.seq}`);
    index += 1;
  }
  return runs.join(',');
}

/** The lineage of a stored version item, as `encodeLineage` wrote it. */
export function decodeLineage(stored: unknown): LineageEntry[] {
  if (typeof stored !== 'string' || stored === '') return [];
  const lineage: LineageEntry[] = [];
  for (const run of stored.split(',')) {
    const [range = '', seqText] = run.split('@');
    const seq = seqText === undefined ? 1 : Number(seqText);
    const dash = range.indexOf('-');
    const first = Number(dash < 0 ? range : range.slice(0, dash));
    const last = dash < 0 ? first : Number(range.slice(dash + 1));
    for (let version = first; version >= last; version--) lineage.push({ version, seq });
  }
  return lineage;
}
