import { isJsonObject, type Json, type JsonObject, setOwn } from './json.js';

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
