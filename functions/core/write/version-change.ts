import type { Json } from '../json/json.js';
import { jsonPatchBetween } from '../json/json-diff.js';
import { mergePatchBetween } from '../json/merge-patch.js';
import type { RecordedChange } from '../model/model.js';

/**
 * What a version changes: the merge patch and the JSON Patch that turn the state before it
 * into its state, kept with a version whose state (or the one before it) is large, so that
 * its change event can carry the change without reading the states (VersionRecord.change).
 * The store asks for it only for such a version (`workOutChange`), and this module is a
 * chunk loaded on first use: a write of a small state, nearly every write, computes no diff
 * and its function's cold start reads none.
 */
export function changeBetween(prev: Json, next: Json): RecordedChange {
  const patch = mergePatchBetween(prev, next);
  return { ...(patch === undefined ? {} : { patch }), jsonPatch: jsonPatchBetween(prev, next) };
}
