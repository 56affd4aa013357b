import { AgentStateError } from '../kernel/errors.js';
import { isJsonObject, type Json, type JsonObject, jsonValueEqual, setOwn } from './json.js';

/**
 * JSON Patch, exactly as RFC 6902 defines it, over JSON Pointers as RFC 6901 does: the six
 * operations applied in order, all or nothing. Nothing given is modified: every operation
 * copies the containers on its path and shares the rest, so a failed patch leaves the state as
 * it was and a small patch to a large state costs its path, not its size.
 *
 * Two kinds of failure, as API.md section 4 says: an operation that is not well formed (not
 * an object, an unknown `op`, a missing `path`, `from` or `value`, a pointer that is not a
 * pointer) is `400 invalid_request`, found before anything is applied; one that cannot apply
 * to the document (a missing target, an index past the end, a failed `test`) is
 * `409 patch_conflict`. Both name the operation by its index (`operation`) and its pointer.
 */

export type PatchOperation =
  | { readonly op: 'add' | 'replace' | 'test'; readonly path: string; readonly value: Json }
  | { readonly op: 'remove'; readonly path: string }
  | { readonly op: 'move' | 'copy'; readonly path: string; readonly from: string };

const OPS = ['add', 'remove', 'replace', 'move', 'copy', 'test'] as const;

/** The operations of a JSON Patch document, checked; `400 invalid_request` naming the first bad one. */
export function parseJsonPatch(body: Json): PatchOperation[] {
  if (!Array.isArray(body)) throw malformed(null, 'a JSON Patch is an array of operations');
  return body.map((entry, index) => {
    if (!isJsonObject(entry)) throw malformed(index, 'an operation must be an object');
    const { op, path } = entry;
    if (typeof op !== 'string' || !(OPS as readonly string[]).includes(op)) {
      throw malformed(index, `op must be one of ${OPS.join(', ')}`);
    }
    if (typeof path !== 'string') throw malformed(index, 'path must be a JSON Pointer string');
    pointerTokens(path, index, 'path');
    switch (op) {
      case 'add':
      case 'replace':
      case 'test':
        // `value` may be null, but it must be there.
        if (!Object.hasOwn(entry, 'value')) throw malformed(index, `${op} needs a value`);
        return { op, path, value: entry.value as Json };
      case 'remove':
        return { op, path };
      default: {
        const from = entry.from;
        if (typeof from !== 'string') throw malformed(index, `${op} needs from, a JSON Pointer string`);
        pointerTokens(from, index, 'from');
        // RFC 6902 section 4.4: a value cannot be moved into itself.
        if (op === 'move' && path.startsWith(`${from}/`)) throw malformed(index, 'from must not be a proper prefix of path');
        return { op: op as 'move' | 'copy', path, from };
      }
    }
  });
}

/** `document` with `operations` applied in order; `409 patch_conflict` when one cannot apply. */
export function applyJsonPatch(document: Json, operations: readonly PatchOperation[]): Json {
  let current = document;
  operations.forEach((operation, index) => {
    const path = pointerTokens(operation.path, index, 'path');
    switch (operation.op) {
      case 'add':
        current = add(current, path, operation.value, index);
        break;
      case 'remove':
        current = remove(current, path, index);
        break;
      case 'replace':
        valueAt(current, path, index, 'path');
        current = path.length === 0 ? operation.value : update(current, path, index, () => operation.value);
        break;
      case 'move': {
        const from = pointerTokens(operation.from, index, 'from');
        const value = valueAt(current, from, index, 'from');
        if (operation.from !== operation.path) current = add(remove(current, from, index), path, value, index);
        break;
      }
      case 'copy': {
        const value = valueAt(current, pointerTokens(operation.from, index, 'from'), index, 'from');
        current = add(current, path, value, index);
        break;
      }
      case 'test':
        // Numbers compare by value here (RFC 6902 section 4.6: 1 and 1.0 are the same number).
        if (!jsonValueEqual(valueAt(current, path, index, 'path'), operation.value)) {
          throw conflict(index, operation.path, 'the value there is not the one the test expects');
        }
        break;
    }
  });
  return current;
}

// ---- JSON Pointer (RFC 6901) ------------------------------------------------------------

/** The reference tokens of a pointer, unescaped (`~1` is `/`, `~0` is `~`, in that order). */
function pointerTokens(pointer: string, index: number, field: 'path' | 'from'): string[] {
  if (pointer === '') return [];
  if (!pointer.startsWith('/')) throw malformed(index, `${field} must be empty or start with "/"`);
  return pointer
    .slice(1)
    .split('/')
    .map((token) => {
      if (/~(?![01])/.test(token)) throw malformed(index, `${field} has a "~" that is not "~0" or "~1"`);
      return token.replace(/~1/g, '/').replace(/~0/g, '~');
    });
}

/** An array index token: `0`, or digits without a leading zero. `-` is handled by the callers. */
function arrayIndex(token: string): number | null {
  return /^(?:0|[1-9]\d*)$/.test(token) ? Number(token) : null;
}

/** The value a pointer names; `409 patch_conflict` when there is none. */
function valueAt(document: Json, tokens: readonly string[], index: number, field: 'path' | 'from'): Json {
  let current: Json = document;
  for (const [depth, token] of tokens.entries()) {
    const child = childOf(current, token);
    if (child === undefined) throw conflict(index, pointerOf(tokens.slice(0, depth + 1)), `the ${field} names nothing`);
    current = child;
  }
  return current;
}

function childOf(container: Json, token: string): Json | undefined {
  if (Array.isArray(container)) {
    const position = arrayIndex(token);
    return position !== null && position < container.length ? (container[position] as Json) : undefined;
  }
  if (isJsonObject(container) && Object.hasOwn(container, token)) return container[token] as Json;
  return undefined;
}

/**
 * `document` with the container at `tokens` (all but the last token of a path) replaced by
 * `change(container)`: the containers on the way are copied, everything else is shared.
 */
function update(document: Json, tokens: readonly string[], index: number, change: (value: Json) => Json): Json {
  if (tokens.length === 0) return change(document);
  const [head, ...rest] = tokens as [string, ...string[]];
  const child = childOf(document, head);
  if (child === undefined) throw conflict(index, pointerOf(tokens.slice(0, 1)), 'the path names nothing');
  const replaced = update(child, rest, index, change);
  if (Array.isArray(document)) {
    const copy = document.slice();
    copy[arrayIndex(head) as number] = replaced;
    return copy;
  }
  const copy = copyObject(document as JsonObject);
  setOwn(copy, head, replaced);
  return copy;
}

function add(document: Json, tokens: readonly string[], value: Json, index: number): Json {
  if (tokens.length === 0) return value;
  const parent = tokens.slice(0, -1);
  const last = tokens[tokens.length - 1] as string;
  return update(document, parent, index, (container) => {
    if (Array.isArray(container)) {
      const position = last === '-' ? container.length : arrayIndex(last);
      if (position === null || position > container.length) {
        throw conflict(index, pointerOf(tokens), `an array index must be 0 to ${container.length}, or "-"`);
      }
      const copy = container.slice();
      copy.splice(position, 0, value);
      return copy;
    }
    if (!isJsonObject(container)) throw conflict(index, pointerOf(parent), 'the parent of the path is not an object or an array');
    const copy = copyObject(container);
    setOwn(copy, last, value);
    return copy;
  });
}

function remove(document: Json, tokens: readonly string[], index: number): Json {
  // Removing the whole document leaves nothing: the state reads as null.
  if (tokens.length === 0) return null;
  valueAt(document, tokens, index, 'path');
  const last = tokens[tokens.length - 1] as string;
  return update(document, tokens.slice(0, -1), index, (container) => {
    if (Array.isArray(container)) {
      const copy = container.slice();
      copy.splice(arrayIndex(last) as number, 1);
      return copy;
    }
    const copy = copyObject(container as JsonObject);
    delete copy[last];
    return copy;
  });
}

function copyObject(object: JsonObject): JsonObject {
  const copy: JsonObject = {};
  for (const key of Object.keys(object)) setOwn(copy, key, object[key] as Json);
  return copy;
}

/** A pointer back from its unescaped tokens. */
function pointerOf(tokens: readonly string[]): string {
  return tokens.map((token) => `/${token.replace(/~/g, '~0').replace(/\//g, '~1')}`).join('');
}

function malformed(index: number | null, detail: string): AgentStateError {
  return new AgentStateError(
    'invalid_request',
    index === null ? detail : `operation ${index}: ${detail}`,
    index === null ? {} : { operation: index },
  );
}

function conflict(index: number, pointer: string, detail: string): AgentStateError {
  return new AgentStateError('patch_conflict', `operation ${index} cannot apply at "${pointer}": ${detail}`, {
    operation: index,
    pointer,
  });
}
