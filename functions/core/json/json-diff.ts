import { isJsonObject, type Json, jsonEqual } from './json.js';
import type { PatchOperation } from './json-patch.js';

/**
 * What changed between two states as RFC 6902 operations, for the change event of a large
 * state (API.md section 9; the merge patch is `mergePatchBetween` in merge-patch.ts). Found by
 * walking the two values together and skipping every subtree they share by identity — a
 * write copies only the containers on the paths it changes (merge-patch.ts, json-patch.ts) —
 * so a 1 KB change to a 4 MiB state costs about its path.
 */

/** RFC 6902 operations that turn `prev` into `next`: replaces, adds and removes, by path. */
export function jsonPatchBetween(prev: Json, next: Json): PatchOperation[] {
  const operations: PatchOperation[] = [];
  diff(prev, next, '', operations);
  return operations;
}

function diff(prev: Json, next: Json, path: string, out: PatchOperation[]): void {
  if (prev === next) return;
  if (isJsonObject(prev) && isJsonObject(next)) {
    for (const key of Object.keys(prev)) {
      if (!Object.hasOwn(next, key)) out.push({ op: 'remove', path: `${path}/${pointerToken(key)}` });
    }
    for (const key of Object.keys(next)) {
      const child = `${path}/${pointerToken(key)}`;
      if (Object.hasOwn(prev, key)) diff(prev[key] as Json, next[key] as Json, child, out);
      else out.push({ op: 'add', path: child, value: next[key] as Json });
    }
    return;
  }
  if (Array.isArray(prev) && Array.isArray(next)) {
    // The common prefix and suffix stay; what lies between is replaced, removed or added.
    let start = 0;
    while (start < prev.length && start < next.length && sameItem(prev[start] as Json, next[start] as Json)) start++;
    let prevEnd = prev.length;
    let nextEnd = next.length;
    while (prevEnd > start && nextEnd > start && sameItem(prev[prevEnd - 1] as Json, next[nextEnd - 1] as Json)) {
      prevEnd--;
      nextEnd--;
    }
    const common = Math.min(prevEnd - start, nextEnd - start);
    for (let index = 0; index < common; index++)
      diff(prev[start + index] as Json, next[start + index] as Json, `${path}/${start + index}`, out);
    for (let index = prevEnd - 1; index >= start + common; index--) out.push({ op: 'remove', path: `${path}/${index}` });
    for (let index = start + common; index < nextEnd; index++) {
      out.push({ op: 'add', path: nextEnd === next.length ? `${path}/-` : `${path}/${index}`, value: next[index] as Json });
    }
    return;
  }
  if (jsonEqual(prev, next)) return;
  out.push({ op: 'replace', path, value: next });
}

/** Items a write did not touch are the same object; small values compare by JSON equality. */
function sameItem(a: Json, b: Json): boolean {
  return a === b || ((typeof a !== 'object' || a === null) && jsonEqual(a, b));
}

function pointerToken(token: string): string {
  return token.replace(/~/g, '~0').replace(/\//g, '~1');
}
