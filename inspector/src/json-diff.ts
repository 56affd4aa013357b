/**
 * A structural diff of two JSON values, for comparing versions: the paths where they differ
 * and how. Objects are compared by key (order ignored, as the API's JSON equality does),
 * arrays by position. Pure: no DOM.
 */

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

export type PathSegment = string | number;

export type Change =
  | { kind: 'added'; path: PathSegment[]; after: Json }
  | { kind: 'removed'; path: PathSegment[]; before: Json }
  | { kind: 'changed'; path: PathSegment[]; before: Json; after: Json };

/** Every difference between `before` and `after`, in document order (keys of `after` first). */
export function diffJson(before: Json, after: Json): Change[] {
  const changes: Change[] = [];
  walk(before, after, [], changes);
  return changes;
}

function walk(before: Json, after: Json, path: PathSegment[], changes: Change[]): void {
  if (isObject(before) && isObject(after)) {
    for (const key of Object.keys(after)) {
      if (!Object.hasOwn(before, key)) changes.push({ kind: 'added', path: [...path, key], after: after[key] as Json });
      else walk(before[key] as Json, after[key] as Json, [...path, key], changes);
    }
    for (const key of Object.keys(before)) {
      if (!Object.hasOwn(after, key)) changes.push({ kind: 'removed', path: [...path, key], before: before[key] as Json });
    }
    return;
  }
  if (Array.isArray(before) && Array.isArray(after)) {
    const shared = Math.min(before.length, after.length);
    for (let index = 0; index < shared; index += 1) walk(before[index] as Json, after[index] as Json, [...path, index], changes);
    for (let index = shared; index < after.length; index += 1)
      changes.push({ kind: 'added', path: [...path, index], after: after[index] as Json });
    for (let index = shared; index < before.length; index += 1)
      changes.push({ kind: 'removed', path: [...path, index], before: before[index] as Json });
    return;
  }
  if (!jsonEqual(before, after)) changes.push({ kind: 'changed', path, before, after });
}

/** JSON equality: key order ignored, arrays ordered, `null` differs from a missing key. */
export function jsonEqual(a: Json, b: Json): boolean {
  if (a === b) return true;
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((item, index) => jsonEqual(item, b[index] as Json));
  }
  if (isObject(a) && isObject(b)) {
    const keys = Object.keys(a);
    return keys.length === Object.keys(b).length && keys.every((key) => Object.hasOwn(b, key) && jsonEqual(a[key] as Json, b[key] as Json));
  }
  return false;
}

/** `plan.steps[2]`, `["odd key"]`; the whole value is `(root)`. */
export function formatPath(path: readonly PathSegment[]): string {
  if (path.length === 0) return '(root)';
  return path
    .map((segment, index) => {
      if (typeof segment === 'number') return `[${segment}]`;
      if (/^[A-Za-z_$][\w$]*$/.test(segment)) return index === 0 ? segment : `.${segment}`;
      return `[${JSON.stringify(segment)}]`;
    })
    .join('');
}

/** A path as an RFC 6901 JSON Pointer: `/plan/steps/2`, `~1` for `/` and `~0` for `~`; `""` is the whole value. */
export function pointerOf(path: readonly PathSegment[]): string {
  return path.map((segment) => `/${String(segment).replace(/~/g, '~0').replace(/\//g, '~1')}`).join('');
}

export type PatchOperation = { op: 'add' | 'replace'; path: string; value: Json } | { op: 'remove'; path: string };

/**
 * The changes as RFC 6902 operations that turn `before` into `after` applied in order: adds
 * and replaces as listed (array items ascending), removals after them and in reverse, so that
 * removing an array item never moves the next one it removes.
 */
export function jsonPatchOf(changes: readonly Change[]): PatchOperation[] {
  const operations: PatchOperation[] = [];
  const removals: PatchOperation[] = [];
  for (const change of changes) {
    const path = pointerOf(change.path);
    if (change.kind === 'added') operations.push({ op: 'add', path, value: change.after });
    else if (change.kind === 'changed') operations.push({ op: 'replace', path, value: change.after });
    else removals.unshift({ op: 'remove', path });
  }
  return [...operations, ...removals];
}

function isObject(value: Json): value is { [key: string]: Json } {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
