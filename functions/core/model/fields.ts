import { isJsonNumber, isJsonObject, type Json, type JsonObject, jsonEqual, setOwn } from '../json/json.js';
import { AgentStateError } from '../kernel/errors.js';

/**
 * Typed state fields with per-field access control (API.md section 7). Pure: the service
 * loads the agents, this module decides what a caller may see and write.
 */
export const FIELD_TYPES = ['string', 'number', 'boolean', 'date', 'json'] as const;
export type FieldType = (typeof FIELD_TYPES)[number];

/** `private`: the declaring agent only; `public`: every agent of the hierarchy; or a list. */
export type FieldScope = 'private' | 'public' | { agents: string[] };

export interface FieldDeclaration {
  type: FieldType;
  description?: string;
  updateRules?: string;
  read: FieldScope;
  write: FieldScope;
  /**
   * How stored values that no longer fit a changed type are treated: `clear` reads them as
   * absent (and the next write drops them). Without it, a type change that stored values do
   * not fit is refused.
   */
  migrate?: 'clear';
}

export type StateFields = Record<string, FieldDeclaration>;

/** The fields a session's hierarchy declares, each with the agent that declared it. */
export interface Schema {
  fields: Map<string, { declaration: FieldDeclaration; owner: string }>;
  /** The session's agent and every agent below it. */
  hierarchy: Set<string>;
}

/** Who is asking: an agent id, or null for a tenant key acting as no agent (full access). */
export type Caller = string | null;

export interface AgentFields {
  agentId: string;
  parentId: string | null;
  stateFields: StateFields | null;
}

// ---- declarations -------------------------------------------------------------------------

/** Write access requires read access: every agent that may write a field must be able to read it. */
export function checkDeclarations(fields: StateFields): void {
  for (const [name, declaration] of Object.entries(fields)) {
    if (!writersCanRead(declaration)) {
      throw new AgentStateError(
        'invalid_request',
        `stateFields.${name}: write access requires read access (every writer must be a reader)`,
        { field: `stateFields.${name}` },
      );
    }
  }
}

function writersCanRead(declaration: FieldDeclaration): boolean {
  const { read, write } = declaration;
  if (read === 'public') return true;
  if (write === 'public') return false;
  if (write === 'private') return true;
  const readers = read === 'private' ? [] : read.agents;
  return write.agents.every((agent) => readers.includes(agent));
}

/** The schema of a session whose agent is `rootAgentId`, or null when nothing is declared. */
export function buildSchema(rootAgentId: string, agents: readonly AgentFields[]): Schema | null {
  const children = new Map<string, string[]>();
  for (const agent of agents) {
    if (agent.parentId === null) continue;
    children.set(agent.parentId, [...(children.get(agent.parentId) ?? []), agent.agentId]);
  }
  const hierarchy = new Set<string>();
  const queue = [rootAgentId];
  while (queue.length > 0) {
    const next = queue.shift() as string;
    if (hierarchy.has(next)) continue;
    hierarchy.add(next);
    queue.push(...(children.get(next) ?? []));
  }
  const fields: Schema['fields'] = new Map();
  for (const agent of agents) {
    if (!hierarchy.has(agent.agentId) || !agent.stateFields) continue;
    for (const [name, declaration] of Object.entries(agent.stateFields)) {
      // Declarations are checked for clashes when agents are registered; should two agents of
      // one hierarchy still declare a name, the one nearer the root keeps it.
      const existing = fields.get(name);
      if (existing && depthOf(existing.owner, agents) <= depthOf(agent.agentId, agents)) continue;
      fields.set(name, { declaration, owner: agent.agentId });
    }
  }
  return fields.size > 0 ? { fields, hierarchy } : null;
}

function depthOf(agentId: string, agents: readonly AgentFields[]): number {
  let depth = 0;
  let current = agents.find((agent) => agent.agentId === agentId);
  while (current?.parentId && depth < 64) {
    depth++;
    const parentId: string = current.parentId;
    current = agents.find((agent) => agent.agentId === parentId);
  }
  return depth;
}

// ---- access -------------------------------------------------------------------------------

function allows(scope: FieldScope, owner: string, caller: Caller, schema: Schema): boolean {
  if (caller === null) return true;
  if (caller === owner) return true;
  if (scope === 'private') return false;
  if (scope === 'public') return schema.hierarchy.has(caller);
  return scope.agents.includes(caller);
}

export function canRead(schema: Schema, caller: Caller, name: string): boolean {
  const field = schema.fields.get(name);
  return field !== undefined && allows(field.declaration.read, field.owner, caller, schema);
}

function canWrite(schema: Schema, caller: Caller, name: string): boolean {
  const field = schema.fields.get(name);
  return field !== undefined && allows(field.declaration.write, field.owner, caller, schema);
}

// ---- values -------------------------------------------------------------------------------

const isoDate = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2}))?$/;

/** Why `value` is not a `type`, or null when it is. */
export function typeProblem(type: FieldType, value: Json): string | null {
  switch (type) {
    case 'string':
      return typeof value === 'string' ? null : 'must be a string';
    case 'number':
      // Any JSON number, as sent: `9007199254740993` and `1e-400` too (core/json/json.ts).
      return typeof value === 'number' || isJsonNumber(value) ? null : 'must be a number';
    case 'boolean':
      return typeof value === 'boolean' ? null : 'must be a boolean';
    case 'date':
      return typeof value === 'string' && isoDate.test(value) && !Number.isNaN(Date.parse(value))
        ? null
        : 'must be an ISO 8601 date or date-time string';
    case 'json':
      return null;
  }
}

/**
 * What `caller` sees of a typed state: only the fields it may read. Stored data that no longer
 * fits its declared type fails the read (never silently replaced), unless the field says to
 * read such values as cleared. A write starts from the view with such values kept as stored
 * (`misfits: "keep"`), so that it may replace them: failing that view too left a session whose
 * value went stale (a type change racing a write, docs/api.md) unwritable by anyone. A stored
 * state that is not an object (written before its agent declared fields) holds no declared
 * field: it fails a read, and a write starts from an empty view, so any write the caller may
 * make of the fields it sets replaces it (there is nothing of it to keep for anyone).
 */
export function viewOf(schema: Schema, caller: Caller, state: Json, misfits: 'refuse' | 'keep' = 'refuse'): Json {
  if (state === null) return null;
  if (!isJsonObject(state)) {
    if (misfits === 'keep') return {};
    throw new AgentStateError('conflict', 'the stored state is not an object of declared fields; replace it with a write of them', {});
  }
  const view: JsonObject = {};
  const mismatched: Array<{ field: string; problem: string }> = [];
  for (const [name, value] of Object.entries(state)) {
    if (!canRead(schema, caller, name)) continue;
    const declaration = schema.fields.get(name)?.declaration as FieldDeclaration;
    const problem = typeProblem(declaration.type, value);
    if (problem) {
      if (declaration.migrate === 'clear') continue;
      if (misfits === 'refuse') mismatched.push({ field: name, problem });
      else setOwn(view, name, value);
      continue;
    }
    setOwn(view, name, value);
  }
  if (mismatched.length > 0) {
    throw new AgentStateError(
      'conflict',
      `stored ${mismatched.map((item) => item.field).join(', ')} no longer match their declared type; write new values or declare migrate: "clear"`,
      { fields: mismatched },
    );
  }
  return view;
}

/**
 * Applies a caller's write to a typed state. `next` is the state the caller means, as it sees
 * it; fields outside its view are kept as they are, so a writer never erases what it cannot
 * see. Refuses, writing nothing, an undeclared field (`422 unknown_field`), a field it may not
 * write (`403 field_forbidden`), a value of the wrong type (`422 validation_failed`).
 */
export function applyTypedWrite(schema: Schema, caller: Caller, stored: Json, seen: Json, next: Json): JsonObject {
  if (!isJsonObject(next)) {
    throw new AgentStateError('validation_failed', 'typed state must be an object of declared fields', {
      fields: [{ field: '', problem: 'must be an object' }],
    });
  }
  const before = isJsonObject(stored) ? stored : {};
  const visible = isJsonObject(seen) ? seen : {};
  // A null field is a cleared field: the same as leaving it out.
  next = Object.fromEntries(Object.entries(next).filter(([, value]) => value !== null));

  const unknown = Object.keys(next).filter((name) => !schema.fields.has(name));
  if (unknown.length > 0) {
    throw new AgentStateError('unknown_field', `undeclared field ${unknown.join(', ')}`, { fields: unknown });
  }
  // Every field whose value the write changes (set, changed, or removed) must be writable.
  const touched = new Set<string>();
  for (const name of new Set([...Object.keys(visible), ...Object.keys(next)])) {
    const had = Object.hasOwn(visible, name);
    const has = Object.hasOwn(next, name);
    if (had !== has || (has && !jsonEqual(visible[name] as Json, next[name] as Json))) touched.add(name);
  }
  const forbidden = [...touched].filter((name) => !canWrite(schema, caller, name));
  if (forbidden.length > 0) {
    throw new AgentStateError('field_forbidden', `may not write ${forbidden.join(', ')}`, { fields: forbidden });
  }
  const invalid = [...touched].flatMap((name) => {
    if (!Object.hasOwn(next, name)) return [];
    const problem = typeProblem((schema.fields.get(name) as { declaration: FieldDeclaration }).declaration.type, next[name] as Json);
    return problem ? [{ field: name, problem }] : [];
  });
  if (invalid.length > 0) {
    throw new AgentStateError('validation_failed', invalid.map((item) => `${item.field} ${item.problem}`).join('; '), {
      fields: invalid,
    });
  }

  const result: JsonObject = {};
  for (const [name, value] of Object.entries(before)) {
    // Kept: what the caller cannot see, and what it saw and did not touch; but a value that
    // reads as cleared (`migrate: "clear"`, it no longer fits) goes with the next write of an
    // agent that may write it, so that no later declaration can bring it back.
    if (!touched.has(name) && !readsAsCleared(schema, caller, name, value)) setOwn(result, name, value);
  }
  for (const name of touched) {
    if (Object.hasOwn(next, name)) setOwn(result, name, next[name] as Json);
  }
  return result;
}

/** Whether `caller` may write `name` and its stored `value` reads as cleared (`migrate: "clear"`, of another type). */
function readsAsCleared(schema: Schema, caller: Caller, name: string, value: Json): boolean {
  const declaration = schema.fields.get(name)?.declaration;
  return declaration?.migrate === 'clear' && typeProblem(declaration.type, value) !== null && canWrite(schema, caller, name);
}

/**
 * A head switch, or an append under a parent other than the head, changes which state the head
 * reads: from `from` to `to`. A limited key may make that move only if every declared field
 * whose value it changes is one it may write (API.md section 7); else `403 field_forbidden`
 * naming them, as a state write touching them would be.
 */
export function requireMayMoveHead(schema: Schema, caller: Caller, from: Json, to: Json): void {
  const before = isJsonObject(from) ? from : {};
  const after = isJsonObject(to) ? to : {};
  const changed = [...new Set([...Object.keys(before), ...Object.keys(after)])].filter((name) => {
    const had = Object.hasOwn(before, name);
    return had !== Object.hasOwn(after, name) || (had && !jsonEqual(before[name] as Json, after[name] as Json));
  });
  const forbidden = changed.filter((name) => schema.fields.has(name) && !canWrite(schema, caller, name));
  if (forbidden.length > 0) {
    throw new AgentStateError('field_forbidden', `moving the head would change ${forbidden.join(', ')}, which this key may not write`, {
      fields: forbidden,
    });
  }
}

/** Validates a field-level patch (`stateOverlay`): declared fields, right types; null clears. */
export function checkOverlay(schema: Schema, caller: Caller, overlay: JsonObject): void {
  const unknown = Object.keys(overlay).filter((name) => !schema.fields.has(name));
  if (unknown.length > 0) {
    throw new AgentStateError('unknown_field', `undeclared field ${unknown.join(', ')}`, { fields: unknown });
  }
  const hidden = Object.keys(overlay).filter((name) => !canRead(schema, caller, name));
  if (hidden.length > 0) {
    throw new AgentStateError('field_forbidden', `may not see ${hidden.join(', ')}`, { fields: hidden });
  }
  const invalid = Object.entries(overlay).flatMap(([name, value]) => {
    if (value === null) return [];
    const problem = typeProblem((schema.fields.get(name) as { declaration: FieldDeclaration }).declaration.type, value);
    return problem ? [{ field: name, problem }] : [];
  });
  if (invalid.length > 0) {
    throw new AgentStateError('validation_failed', invalid.map((item) => `${item.field} ${item.problem}`).join('; '), {
      fields: invalid,
    });
  }
}
