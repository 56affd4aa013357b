import type { Json, JsonPatchOperation } from './types.js';

/**
 * The changes an event of a large state carries, applied to the state before it: RFC 6902
 * operations (preferred: appends stay small) or an RFC 7396 merge patch. The state given is
 * never modified; containers on the changed paths are copied, everything else is shared.
 * Returns undefined when an operation does not apply (the caller then reads the version).
 */
export function applyChange(prev: Json, change: { jsonPatch?: JsonPatchOperation[]; patch?: Json }): Json | undefined {
  if (change.jsonPatch) {
    let current: Json | undefined = prev;
    for (const operation of change.jsonPatch) {
      current = applyOperation(current as Json, operation);
      if (current === undefined) return undefined;
    }
    return current;
  }
  if (change.patch !== undefined) return mergePatch(prev, change.patch);
  return undefined;
}

type Container = Json[] | { [key: string]: Json };

function isObject(value: Json | undefined): value is { [key: string]: Json } {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function tokensOf(pointer: string): string[] {
  return pointer === ''
    ? []
    : pointer
        .slice(1)
        .split('/')
        .map((token) => token.replace(/~1/g, '/').replace(/~0/g, '~'));
}

function own(target: { [key: string]: Json }, key: string, value: Json): void {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
}

function copy(container: Container): Container {
  if (Array.isArray(container)) return container.slice();
  const result: { [key: string]: Json } = {};
  for (const key of Object.keys(container)) own(result, key, container[key] as Json);
  return result;
}

function get(document: Json, tokens: readonly string[]): Json | undefined {
  let current: Json | undefined = document;
  for (const token of tokens) {
    if (Array.isArray(current)) current = /^(0|[1-9]\d*)$/.test(token) ? current[Number(token)] : undefined;
    else if (isObject(current) && Object.hasOwn(current, token)) current = current[token];
    else return undefined;
  }
  return current;
}

/** `document` with the container at `tokens` changed by `change` (copied on the way). */
function at(document: Json, tokens: readonly string[], change: (container: Container) => boolean): Json | undefined {
  const path: Container[] = [];
  let current: Json | undefined = document;
  for (const token of tokens) {
    if (typeof current !== 'object' || current === null) return undefined;
    path.push(current);
    current = get(current, [token]);
  }
  if (typeof current !== 'object' || current === null) return undefined;
  let replaced: Container = copy(current);
  if (!change(replaced)) return undefined;
  for (let depth = path.length - 1; depth >= 0; depth--) {
    const parent = copy(path[depth] as Container);
    const token = tokens[depth] as string;
    if (Array.isArray(parent)) parent[Number(token)] = replaced;
    else own(parent, token, replaced);
    replaced = parent;
  }
  return replaced;
}

function add(document: Json, tokens: readonly string[], value: Json): Json | undefined {
  if (tokens.length === 0) return value;
  const last = tokens[tokens.length - 1] as string;
  return at(document, tokens.slice(0, -1), (container) => {
    if (!Array.isArray(container)) {
      own(container, last, value);
      return true;
    }
    const index = last === '-' ? container.length : Number(last);
    if (!(index >= 0 && index <= container.length)) return false;
    container.splice(index, 0, value);
    return true;
  });
}

function remove(document: Json, tokens: readonly string[]): Json | undefined {
  if (tokens.length === 0) return null;
  if (get(document, tokens) === undefined) return undefined;
  const last = tokens[tokens.length - 1] as string;
  return at(document, tokens.slice(0, -1), (container) => {
    if (Array.isArray(container)) container.splice(Number(last), 1);
    else delete container[last];
    return true;
  });
}

function applyOperation(document: Json, operation: JsonPatchOperation): Json | undefined {
  const tokens = tokensOf(operation.path);
  switch (operation.op) {
    case 'add':
      return add(document, tokens, operation.value as Json);
    case 'remove':
      return remove(document, tokens);
    case 'replace': {
      if (get(document, tokens) === undefined) return undefined;
      if (tokens.length === 0) return operation.value as Json;
      const removed = remove(document, tokens);
      return removed === undefined ? undefined : add(removed, tokens, operation.value as Json);
    }
    case 'move':
    case 'copy': {
      const from = tokensOf(operation.from as string);
      const value = get(document, from);
      if (value === undefined) return undefined;
      const base = operation.op === 'move' ? remove(document, from) : document;
      return base === undefined ? undefined : add(base, tokens, value);
    }
    case 'test':
      return JSON.stringify(get(document, tokens)) === JSON.stringify(operation.value) ? document : undefined;
  }
}

function mergePatch(target: Json, patch: Json): Json {
  if (!isObject(patch)) return patch;
  const result: { [key: string]: Json } = {};
  if (isObject(target)) for (const key of Object.keys(target)) own(result, key, target[key] as Json);
  for (const key of Object.keys(patch)) {
    const value = patch[key] as Json;
    if (value === null) delete result[key];
    else own(result, key, mergePatch(Object.hasOwn(result, key) ? (result[key] as Json) : null, value));
  }
  return result;
}
