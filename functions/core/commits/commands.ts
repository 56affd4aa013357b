import { isJsonObject, type Json, type JsonObject, setOwn } from '../json/json.js';
import { AgentStateError } from '../kernel/errors.js';
import type { KeyChange } from '../model/ports.js';

/**
 * Commits (API.md section 8): keyed commands with scopes and merge policies. Pure: this
 * module folds a batch into one change per document; the service reads and writes them.
 */
export const COMMAND_SCOPES = ['thread', 'run', 'profile', 'shared'] as const;
export type CommandScope = (typeof COMMAND_SCOPES)[number];
export const MERGE_POLICIES = ['disjoint', 'commutative', 'exclusive'] as const;
export type MergePolicy = (typeof MERGE_POLICIES)[number];

export type Command =
  | { key: string; scope: CommandScope; merge: MergePolicy; set: Json; remove?: undefined }
  | { key: string; scope: CommandScope; merge: MergePolicy; remove: true; set?: undefined };

/** What a batch does to one `(scope, key)` slot. */
type SlotChange = KeyChange;

/**
 * Folds a batch into the change of each slot, in order: `disjoint` — the later command
 * replaces; `commutative` — objects shallow-merge (the first one also with the stored value),
 * other values replace; `exclusive` — a second `set` rejects the whole batch. A `remove` is
 * never a second set. Commands on one slot must share a policy.
 */
export function foldCommands(commands: readonly Command[]): Map<CommandScope, Map<string, SlotChange>> {
  const slots = new Map<CommandScope, Map<string, { merge: MergePolicy; sets: number; change: SlotChange }>>();
  for (const command of commands) {
    const scope = slots.get(command.scope) ?? new Map();
    slots.set(command.scope, scope);
    const previous = scope.get(command.key);
    if (previous && previous.merge !== command.merge) {
      throw new AgentStateError(
        'invalid_request',
        `commands on ${command.scope}:${command.key} mix merge policies ${previous.merge} and ${command.merge}`,
        { key: command.key, scope: command.scope },
      );
    }
    const isSet = command.remove !== true;
    const sets = (previous?.sets ?? 0) + (isSet ? 1 : 0);
    if (command.merge === 'exclusive' && isSet && sets > 1) {
      throw new AgentStateError(
        'exclusive_conflict',
        `${command.scope}:${command.key} is exclusive and was set twice in one batch; nothing was written`,
        { key: command.key, scope: command.scope },
      );
    }
    let change: SlotChange;
    if (!isSet) change = { kind: 'remove' };
    else if (command.merge === 'commutative' && isJsonObject(command.set)) {
      const before = previous?.change;
      change =
        before?.kind === 'merge'
          ? { kind: 'merge', patch: shallowMerge(before.patch, command.set) }
          : before?.kind === 'set' && isJsonObject(before.value)
            ? { kind: 'set', value: shallowMerge(before.value, command.set) }
            : before?.kind === 'remove'
              ? { kind: 'set', value: command.set }
              : { kind: 'merge', patch: command.set };
    } else change = { kind: 'set', value: command.set as Json };
    scope.set(command.key, { merge: command.merge, sets, change });
  }
  return new Map([...slots].map(([scope, entries]) => [scope, new Map([...entries].map(([key, slot]) => [key, slot.change]))]));
}

/** Applies the slot changes of one scope to its document (an object, or null for none). */
export function applySlots(document: Json, changes: ReadonlyMap<string, SlotChange>, scope: CommandScope): JsonObject {
  if (document !== null && !isJsonObject(document)) {
    throw new AgentStateError(
      'conflict',
      `the ${scope} state is not an object, so it has no keys to write; replace it with an object first`,
      { scope },
    );
  }
  const result: JsonObject = {};
  for (const [key, value] of Object.entries(document ?? {})) setOwn(result, key, value);
  for (const [key, change] of changes) {
    if (change.kind === 'remove') {
      delete result[key];
    } else if (change.kind === 'set') {
      setOwn(result, key, change.value);
    } else {
      const stored = Object.hasOwn(result, key) ? (result[key] as Json) : null;
      setOwn(result, key, isJsonObject(stored) ? shallowMerge(stored, change.patch) : change.patch);
    }
  }
  return result;
}

function shallowMerge(base: JsonObject, patch: JsonObject): JsonObject {
  const merged: JsonObject = {};
  for (const [key, value] of Object.entries(base)) setOwn(merged, key, value);
  for (const [key, value] of Object.entries(patch)) setOwn(merged, key, value);
  return merged;
}
