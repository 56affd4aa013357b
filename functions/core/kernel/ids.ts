import { v7 } from 'uuid';
import { AgentStateError } from './errors.js';

/**
 * Identifiers are 1–128 characters of `A-Z a-z 0-9 . _ : ~ @ -` (API.md section 1): session,
 * node, agent, user, run and webhook ids, tenants, and the names of typed fields. The one
 * pattern behind `requireId`, the zod schemas of bodies (http/edge/request.ts) and the `prefix` of
 * a session list.
 */
export const ID_PATTERN = /^[A-Za-z0-9._:~@-]{1,128}$/;
/** What `ID_PATTERN` matches, in words. */
export const ID_CHARACTERS = '1–128 characters of A-Z a-z 0-9 . _ : ~ @ -';
/** What an identifier must be, as a problem's detail says it: `<field> must be ${ID_RULE}`. */
export const ID_RULE = `${ID_CHARACTERS}, other than . and ..`;

/**
 * `.` and `..` fit the pattern but are dot segments: every URL parser (fetch, browsers, curl)
 * removes them from a path, `%2E` spelt or not, so an id of that name could be created in a body
 * but never named in a URL again.
 */
export function isDotSegment(value: string): boolean {
  return value === '.' || value === '..';
}

export const ROOT_NODE = 'root';

export function isValidId(value: unknown): value is string {
  return typeof value === 'string' && ID_PATTERN.test(value) && !isDotSegment(value);
}

/**
 * A tenant id is an identifier without `:`: `AGENTSTATE_API_KEYS` holds `tenant:key` pairs split
 * at the first colon, so a tenant with one could be issued a key (`agentstate keys create`) but
 * never be given one locally. One rule, for the CLI, the key store and the environment alike.
 */
export function isValidTenantId(value: unknown): value is string {
  return isValidId(value) && !value.includes(':');
}

/** What `isValidTenantId` accepts, in words. */
export const TENANT_ID_RULE = '1–128 characters of A-Z a-z 0-9 . _ ~ @ - (no colon), other than . and ..';

/** Returns `value` when it is a valid identifier, else throws `400 invalid_id` naming `what`. */
export function requireId(value: unknown, what: string): string {
  if (!isValidId(value)) {
    throw new AgentStateError('invalid_id', `${what} must be ${ID_RULE}`, { field: what });
  }
  return value;
}

/** A message node id supplied by a client: a valid id that is not the reserved `root`. */
export function requireNodeId(value: unknown, what: string): string {
  const id = requireId(value, what);
  if (id === ROOT_NODE) {
    throw new AgentStateError('invalid_id', `${what} must not be the reserved id "root"`, { field: what });
  }
  return id;
}

/**
 * A new time-ordered identifier (UUIDv7), used for generated session and message ids. `uuid`'s
 * v7 keeps a counter within a millisecond, so ids made by one process sort in the order made.
 */
export function newId(): string {
  return v7();
}
