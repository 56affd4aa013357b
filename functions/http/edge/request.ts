import * as z from 'zod/mini';
import type { AllowedAgents } from '../../core/agents/acting-agent.js';
import { isJsonNumber, isJsonObject, type Json, type JsonObject } from '../../core/json/json.js';
import { AgentStateError, LateDetailError } from '../../core/kernel/errors.js';
import { requireId } from '../../core/kernel/ids.js';
import type { SessionScope } from '../../core/model/model.js';
import type { VersionPrecondition } from '../../core/write/write-target.js';
import type { RouteInput } from '../api.js';

/**
 * Reading a request: path and query parameters, `If-Match`, and bodies checked by zod. Every
 * problem is a `400` with the field it is about, the same for every route.
 */

/**
 * zod/mini (tree-shaken: a bundle carries the checks its schemas use, not the whole library)
 * loads no messages of its own; the details of a refused body are zod's English ones
 * (`zod/v4/locales/en.js`). Only a refused body needs them, so they are imported by the first one
 * (a chunk that no valid request reads): that body is checked again once they are in, and
 * from then on every refusal has them at once.
 */
let english: Promise<void> | undefined;
let englishLoaded = false;

function loadEnglish(): Promise<void> {
  // The one locale's own file: `zod/locales` is every locale, which an import must take whole.
  english ??= import('zod/v4/locales/en.js').then(
    ({ default: en }) => {
      z.config(en());
      englishLoaded = true;
    },
    (error: unknown) => {
      english = undefined;
      throw error;
    },
  );
  return english;
}

/**
 * Any JSON value, for the free-form parts of a body (state, config, metadata, a command's
 * `set`). The body was parsed from JSON text, so whatever is there is JSON; zod's own
 * `z.json()` would refuse a number kept verbatim (a JsonNumber, core/json/json.ts).
 */
export const jsonValue = z.custom<Json>((value) => value !== undefined, { message: 'must be a JSON value' });

/**
 * A JSON object of any values (a decision's \`proposed\`, a session's \`metadata\`). For a
 * body parsed from JSON text this checks what \`z.record(z.string(), jsonValue)\` checks (JSON
 * keys are strings, and no value is undefined) without zod's record schema in the bundle.
 */
export const jsonObject = z.custom<JsonObject>(isJsonObject, { message: 'must be a JSON object' });

export function sessionScope(input: RouteInput): SessionScope {
  return { tenant: input.tenant, sessionId: requireId(input.path('sid'), 'sessionId') };
}

/** The key's agents and the agent it acts as: what a session write of a limited key is held to (API.md section 7). */
export function keyAccess(input: RouteInput): { allowed: AllowedAgents; caller: string | null } {
  return { allowed: input.allowedAgents, caller: input.caller };
}

/** A yes/no query parameter: `1` or `true`; `0`, `false` or absent is no. */
export function flag(input: RouteInput, name: string): boolean {
  const raw = input.query(name);
  if (raw === undefined || raw === '0' || raw === 'false') return false;
  if (raw === '1' || raw === 'true') return true;
  throw new AgentStateError('invalid_request', `${name} must be 1, true, 0 or false`, { field: name });
}

/** `?node=`: the node a read or write is about; undefined when absent. */
export function queryNode(input: RouteInput): string | undefined {
  const node = input.query('node');
  return node === undefined ? undefined : requireId(node, 'node');
}

/** How many nodes one `notesOf` (or `nodes`) may name. */
const MAX_NAMED_NODES = 200;

/**
 * `?notesOf=a,b,c` (or `?nodes=`): nodes whose notes a read carries (what LangGraph's `list` needs
 * of the checkpoints it shows, in the request that reads their states), at most `MAX_NAMED_NODES`.
 */
export function queryNodeIds(input: RouteInput, name: string): string[] | undefined {
  const raw = input.query(name);
  if (raw === undefined) return undefined;
  const ids = raw.split(',');
  if (ids.length > MAX_NAMED_NODES) {
    throw new AgentStateError('invalid_request', `${name} names at most ${MAX_NAMED_NODES} nodes`, { field: name });
  }
  return ids.map((id) => requireId(id, name));
}

/** `limit` and `cursor` of a list (API.md section 1). */
export function pagination(input: RouteInput): { limit: number; cursor?: string } {
  const raw = input.query('limit');
  let limit = 50;
  if (raw !== undefined) {
    limit = Number(raw);
    if (!/^[1-9]\d{0,2}$/.test(raw) || limit > 500) {
      throw new AgentStateError('invalid_request', 'limit must be an integer from 1 to 500', { field: 'limit' });
    }
  }
  const cursor = input.query('cursor');
  return cursor === undefined ? { limit } : { limit, cursor };
}

/**
 * A version number as this API writes it: decimal digits with no leading zero (`0`, `7`,
 * `12`), up to 15 of them. One rule for every place a number is sent as text — a path or
 * query parameter, an `If-Match` ETag, `limit` — so that `07` is refused everywhere rather than
 * read as 7 in one place and refused in another (docs/api.md, "Numbers in paths, queries and
 * headers").
 */
const DECIMAL = '(0|[1-9]\\d{0,14})';

/** A non-negative integer from a path or query parameter. */
export function versionNumber(raw: string, field: string): number {
  const value = Number(raw);
  if (!new RegExp(`^${DECIMAL}$`).test(raw) || !Number.isSafeInteger(value)) {
    throw new AgentStateError('invalid_request', `${field} must be a non-negative integer, written without leading zeros`, { field });
  }
  return value;
}

/** One entity-tag of ours in an `If-Match` list: `"7"` or (compared as `"7"`) `W/"7"`. */
const VERSION_ETAG = new RegExp(`^(?:W/)?"${DECIMAL}"$`);

/**
 * `If-Match` as RFC 9110 section 13.1.1 writes it: `*` (the node has a recorded version), or a
 * list of our version ETags, `"7"` or `W/"7"` (a write happens if the node is at one of them).
 * Absent → undefined. Anything else, an unquoted `7` or `"9` included, is `400
 * invalid_request`: it can never match an ETag this API sends.
 */
export function ifMatch(input: RouteInput): VersionPrecondition | undefined {
  const raw = input.header('if-match');
  if (raw === undefined) return undefined;
  const refuse = () =>
    new AgentStateError('invalid_request', 'If-Match must be *, or version ETags such as "7" or W/"7"', { field: 'If-Match' });
  if (raw.trim() === '*') return '*';
  // A list may hold empty elements (RFC 9110 section 5.6.1.2); ETags of ours hold no commas.
  const tags = raw
    .split(',')
    .map((tag) => tag.trim())
    .filter((tag) => tag !== '');
  if (tags.length === 0) throw refuse();
  return tags.map((tag) => {
    const match = VERSION_ETAG.exec(tag);
    if (!match) throw refuse();
    return Number(match[1]);
  });
}

/* ------------------------------------------------------------------ bodies */

/**
 * The type of a body that passed a schema: what the schema says, where whatever it leaves open
 * (`unknown`: a message's other keys, a trigger's fields) is JSON, since the body was parsed
 * from JSON text.
 */
export type AsSent<T> = unknown extends T
  ? Json
  : T extends readonly (infer Item)[]
    ? AsSent<Item>[]
    : T extends object
      ? { [Key in keyof T]: AsSent<T[Key]> }
      : T;

export interface BodyRules {
  /** The detail of the `400 invalid_request` for a write sent without a body; without it, no body counts as `{}`. */
  required?: string;
  /** Fields that hold ids: checked before the schema, so that a bad one answers `400 invalid_id`. */
  ids?: readonly string[];
}

/** Validates a value with a zod schema; problems become `400 invalid_request` listing each. */
function parseBody<S extends z.ZodMiniType>(schema: S, body: unknown): z.output<S> {
  const result = schema.safeParse(body);
  if (result.success) return result.data;
  if (englishLoaded) throw refusal(result.error, body);
  // The first refusal of the process: answered once the messages are in, checked again with them.
  throw new LateDetailError('invalid_request', 'the body is not valid for this route', async () => {
    await loadEnglish();
    const again = schema.safeParse(body);
    return again.success ? new AgentStateError('invalid_request', 'the body is not valid for this route') : refusal(again.error, body);
  });
}

/**
 * What a number the API reads itself (`limit`, `ttlSeconds`, `expectedVersion`, …) must be,
 * said instead of zod's "expected number, received JsonNumber": a number kept verbatim (`1.0`,
 * `1e3`, beyond 2^53) is held in a JsonNumber, a name the caller never sent.
 */
const PLAIN_NUMBER = 'must be a number written plainly: an integer in its shortest form (7, not 7.0 or 7e0), within ±2^53';

/** `400 invalid_request` listing each of zod's problems with a body, the first in the detail. */
function refusal(error: z.core.$ZodError, body: unknown): AgentStateError {
  const errors = error.issues.map((issue) => ({
    path: issue.path.join('.'),
    message: issue.code === 'invalid_type' && isJsonNumber(valueAt(body, issue.path)) ? PLAIN_NUMBER : issue.message,
  }));
  const first = errors[0];
  return new AgentStateError(
    'invalid_request',
    first ? `${first.path || 'body'}: ${first.message}` : 'the body is not valid for this route',
    {
      errors,
    },
  );
}

/** The value at a zod issue's path inside `value`, if there is one. */
function valueAt(value: unknown, path: readonly PropertyKey[]): unknown {
  let current = value;
  for (const key of path) {
    if (typeof current !== 'object' || current === null || typeof key === 'symbol' || !Object.hasOwn(current, key)) return undefined;
    current = (current as Record<string, unknown>)[key as string];
  }
  return current;
}

/**
 * Validates a value parsed from JSON text (a body, or a part of one) with a zod schema and
 * returns the value itself, not zod's copy: that copy
 * puts a message's keys in the schema's order and turns a `"__proto__"` key into a prototype,
 * and what is stored (messages, commands, metadata, a worker's trigger) is stored as sent.
 *
 * For schemas that only check: one with a `.default()` or a `.transform()` describes its own
 * output, not the value sent, and is read with `parsedBody`.
 */
export function asSent<S extends z.ZodMiniType>(schema: S, value: unknown): AsSent<z.output<S>> {
  parseBody(schema, value);
  // The one assertion of a body's type: the schema accepted this very value, and a schema that
  // only checks outputs a copy of what it accepted.
  return value as AsSent<z.output<S>>;
}

/** A write's body: refused when required and absent, `{}` when optional and absent; its ids checked first. */
function presentBody(input: RouteInput, rules: BodyRules): Json {
  if (input.body === undefined && rules.required !== undefined) throw new AgentStateError('invalid_request', rules.required);
  const body = input.body ?? {};
  if (rules.ids) requireIds(body, rules.ids);
  return body;
}

/** The body of a write, checked by `schema` and returned as sent (see `asSent`). */
export function bodyAsSent<S extends z.ZodMiniType>(input: RouteInput, schema: S, rules: BodyRules = {}): AsSent<z.output<S>> {
  return asSent(schema, presentBody(input, rules));
}

/** The body of a write as `schema` parses it, its defaults filled in. */
export function parsedBody<S extends z.ZodMiniType>(input: RouteInput, schema: S, rules: BodyRules = {}): z.output<S> {
  return parseBody(schema, presentBody(input, rules));
}

/**
 * Identifier problems deserve their own code (`invalid_id`) even inside bodies, so bodies with
 * ids are checked for them before the rest of the schema.
 */
function requireIds(body: Json, fields: readonly string[]): void {
  if (!isJsonObject(body)) return;
  for (const field of fields) {
    const value = body[field];
    if (value !== undefined && value !== null) requireId(value, field);
  }
}
