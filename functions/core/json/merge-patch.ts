import { isJsonObject, type Json, type JsonObject, jsonEqual, setOwn } from './json.js';

/**
 * Applies a JSON Merge Patch exactly as RFC 7396 section 2 specifies: objects merge
 * recursively, a `null` member removes the key, and any patch that is not an object
 * replaces the target whole. Neither argument is modified.
 */
export function mergePatch(target: Json, patch: Json): Json {
  if (!isJsonObject(patch)) return patch;
  const result: JsonObject = {};
  if (isJsonObject(target)) {
    for (const key of Object.keys(target)) setOwn(result, key, target[key] as Json);
  }
  for (const key of Object.keys(patch)) {
    const value = patch[key] as Json;
    if (value === null) {
      delete result[key];
    } else {
      const current = Object.hasOwn(result, key) ? (result[key] as Json) : null;
      setOwn(result, key, mergePatch(current, value));
    }
  }
  return result;
}

/**
 * The RFC 7396 merge patch that turns `prev` into `next` — `mergePatch(prev, patch)` equals
 * `next` — or undefined when there is none. Members of `prev` that `next` lacks become
 * `null`; objects on both sides are compared member by member, anything else is replaced
 * whole. A merge patch cannot set a member to `null` (null removes it), so when `next` holds a
 * null member that a patch would have to write, there is no merge patch.
 */
export function mergePatchBetween(prev: Json, next: Json): Json | undefined {
  if (!isJsonObject(next)) return next;
  if (!isJsonObject(prev)) return writesNoNullMember(next) ? next : undefined;
  const patch: JsonObject = {};
  for (const key of Object.keys(prev)) {
    if (!Object.hasOwn(next, key)) setOwn(patch, key, null);
  }
  for (const key of Object.keys(next)) {
    const after = next[key] as Json;
    const had = Object.hasOwn(prev, key);
    if (had && jsonEqual(prev[key] as Json, after)) continue;
    if (after === null) return undefined;
    const member = had ? mergePatchBetween(prev[key] as Json, after) : writesNoNullMember(after) ? after : undefined;
    if (member === undefined) return undefined;
    setOwn(patch, key, member);
  }
  return patch;
}

/** Whether `value` applied as a patch writes itself: no object in it (outside arrays) has a null member. */
function writesNoNullMember(value: Json): boolean {
  if (!isJsonObject(value)) return true;
  return Object.keys(value).every((key) => {
    const member = value[key] as Json;
    return member !== null && writesNoNullMember(member);
  });
}
