import type { JsonObject } from '../json/json.js';
import { AgentStateError } from '../kernel/errors.js';
import type { SessionMeta } from '../model/model.js';
import type { ListedAs, SessionFilter } from '../model/ports.js';

/**
 * The lists a session is in (API.md section 2, `GET /v1/sessions` and its filters): the
 * tenant's, its user's, its agent's, and one for each top-level string of its metadata. Each
 * is an entry of the list index that moves with the session's activity, so what a session may
 * be listed under is bounded here, and checked before it is written.
 */

/**
 * The most top-level string values a session's metadata may hold: each is a list the session
 * is in (`?metadata.<key>=<value>`), an entry written when the session is made and moved with
 * its activity (at most once every 20 s). Stripe allows 50 metadata keys; so do we, counting
 * only the strings, which are what a filter matches. Other values (numbers, objects) are free.
 */
const METADATA_STRINGS_LIMIT = 50;

/** The metadata strings a session is listed under: its top-level string values, as [key, value]. */
export function listedMetadata(metadata: JsonObject | null): Array<[string, string]> {
  if (metadata === null) return [];
  const listed: Array<[string, string]> = [];
  for (const key of Object.keys(metadata)) {
    const value = metadata[key];
    if (typeof value === 'string') listed.push([key, value]);
  }
  return listed;
}

/** `400 invalid_request` (`field: "metadata"`) for metadata with more strings than it may be listed under. */
export function checkListedMetadata(metadata: JsonObject | null): void {
  const count = listedMetadata(metadata).length;
  if (count <= METADATA_STRINGS_LIMIT) return;
  throw new AgentStateError(
    'invalid_request',
    `metadata may hold at most ${METADATA_STRINGS_LIMIT} top-level string values (each is a list filter); this holds ${count}`,
    { field: 'metadata' },
  );
}

/**
 * The most lists one change of what a session is listed under (a `PATCH` of its user, agent or
 * metadata) may touch: the lists it is in after the change, and those it leaves. Each is an
 * entry the change writes in its one transaction, beside the change itself, the session item,
 * its metadata item and a profile's fence (store/log/log-writer.ts); a transaction takes at most
 * 100 items. Only a change that swaps most of 50 metadata strings for others at once comes near
 * it: the lists are 52 at most on either side, and those on both count once.
 */
const RELISTED_LIMIT = 90;

/** The lists a session is in besides the tenant's, by name (what each entry of it stands for). */
function listsOf(meta: ListedAs): string[] {
  return [
    ...(meta.userId === null ? [] : ['user']),
    ...(meta.agentId === null ? [] : ['agent']),
    ...listedMetadata(meta.metadata).map(([key]) => `metadata:${key}`),
  ];
}

/**
 * `400 invalid_request` (`field: "metadata"`) for a change that would touch more lists at once
 * than its one transaction holds (`RELISTED_LIMIT`), before anything is written: the same
 * change in two `PATCH`es lands.
 */
export function checkRelisting(before: ListedAs, after: ListedAs): void {
  const touched = new Set([...listsOf(before), ...listsOf(after)]).size;
  if (touched <= RELISTED_LIMIT) return;
  throw new AgentStateError(
    'invalid_request',
    `this change would take the session into or out of ${touched} lists at once (its user's, its agent's and one per top-level metadata string, before and after); at most ${RELISTED_LIMIT}: make it in two PATCHes`,
    { field: 'metadata' },
  );
}

/** Whether a session is in any list besides the tenant's: a user's, an agent's, a metadata string's. */
export function isInFilteredList(meta: Pick<SessionMeta, 'userId' | 'agentId' | 'metadata'>): boolean {
  return meta.userId !== null || meta.agentId !== null || listedMetadata(meta.metadata).length > 0;
}

/** Whether a session is in the list `filter` names (what the list index holds it under). */
export function isListedUnder(meta: Pick<SessionMeta, 'userId' | 'agentId' | 'metadata'>, filter: SessionFilter): boolean {
  if ('userId' in filter) return meta.userId === filter.userId;
  if ('agentId' in filter) return meta.agentId === filter.agentId;
  return listedMetadata(meta.metadata).some(([key, value]) => key === filter.metadata.key && value === filter.metadata.value);
}
