/**
 * How a version item stores its lineage window: the versions before it in its node lineage,
 * nearest first (VersionRecord.lineage). The list is strictly decreasing and mostly made of
 * runs of consecutive numbers (a linear history is one run), so it is stored as runs:
 *
 *   [56, 55, 54, 50, 20, 19, 18]  →  "56-54,50,20-18"
 *
 * One short string instead of a list of up to 32 numbers: about 120 bytes less per version
 * item, and 32 fewer attribute values for the SDK and DynamoDB to encode and decode on every
 * read and write of the state.
 */
export function encodeLineage(lineage: readonly number[]): string {
  const runs: string[] = [];
  let index = 0;
  while (index < lineage.length) {
    const first = lineage[index] as number;
    let last = first;
    while (index + 1 < lineage.length && lineage[index + 1] === last - 1) {
      last -= 1;
      index += 1;
    }
    runs.push(first === last ? String(first) : `${first}-${last}`);
    index += 1;
  }
  return runs.join(',');
}

/** The lineage of a stored version item: runs as written by `encodeLineage`, or a plain list (items written before it). */
export function decodeLineage(stored: unknown): number[] {
  if (Array.isArray(stored)) return stored.map(Number);
  if (typeof stored !== 'string' || stored === '') return [];
  const lineage: number[] = [];
  for (const run of stored.split(',')) {
    const dash = run.indexOf('-');
    const first = Number(dash < 0 ? run : run.slice(0, dash));
    const last = dash < 0 ? first : Number(run.slice(dash + 1));
    for (let version = first; version >= last; version--) lineage.push(version);
  }
  return lineage;
}
