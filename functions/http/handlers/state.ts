import { parseJsonPatch } from '../../core/json/json-patch.js';
import { AgentStateError } from '../../core/kernel/errors.js';
import { STATE_BODY_LIMIT_BYTES, STATE_LIMIT_BYTES } from '../../core/model/model.js';
import type { SessionService, WriteResult } from '../../core/sessions/session-service.js';
import { createHttpHandler, type RouteInput } from '../api.js';
import { flag, ifMatch, pagination, queryNode, queryNodeIds, sessionScope, versionNumber } from '../edge/request.js';
import { json, versionedJson } from '../edge/responses.js';
import { sessions } from '../parts/sessions.js';

/** The media type of a JSON Patch body (RFC 6902); any other JSON type is a merge patch. */
const JSON_PATCH = 'application/json-patch+json';

/**
 * `PATCH` and `PUT`: the service applies the body as a merge patch, as JSON Patch operations
 * (checked here, before anything is read), or as the whole state.
 */
async function write(input: RouteInput<{ sessions: SessionService }>, method: 'patchState' | 'replaceState') {
  const scope = sessionScope(input);
  if (input.body === undefined) {
    throw new AgentStateError('invalid_json', 'the body must be a JSON value (send {} to clear the state)');
  }
  const node = queryNode(input);
  const expected = ifMatch(input);
  const mediaType = (input.header('content-type') ?? '').split(';')[0]?.trim().toLowerCase();
  const options = {
    ...(node === undefined ? {} : { node }),
    ...(expected === undefined ? {} : { ifMatch: expected }),
    // The acting agent (checked for every route by the actingAgent middleware): the version's author.
    caller: input.caller,
    // A key limited to agents writes only in its conversations (API.md section 7).
    allowed: input.allowedAgents,
    keep: input.keeper(versionedJson<WriteResult>),
  };
  if (method === 'patchState' && mediaType === JSON_PATCH) {
    return versionedJson(await input.deps.sessions.jsonPatchState(scope, parseJsonPatch(input.body), options));
  }
  const result: WriteResult = await input.deps.sessions[method](scope, input.body, options);
  return versionedJson(result);
}

/** State at a node, its writes, and its history (API.md sections 4 and 5). */
export const handler = createHttpHandler(
  { sessions },
  {
    'GET /v1/sessions/{sid}/state': async (input) => {
      const scope = sessionScope(input);
      const node = queryNode(input);
      const rawVersion = input.query('version');
      if (node !== undefined && rawVersion !== undefined) {
        throw new AgentStateError('invalid_request', 'ask for a node or a version, not both', { field: 'version' });
      }
      const notes = flag(input, 'notes');
      if (notes && rawVersion !== undefined) {
        throw new AgentStateError('invalid_request', "a node's notes are read at the node, not with a version", { field: 'notes' });
      }
      const view = await input.deps.sessions.readState(
        scope,
        {
          ...(node === undefined ? {} : { node }),
          ...(rawVersion === undefined ? {} : { version: versionNumber(rawVersion, 'version') }),
          ...(notes ? { notes } : {}),
        },
        input.caller,
      );
      return versionedJson(view);
    },

    'PATCH /v1/sessions/{sid}/state': (input) => write(input, 'patchState'),

    'PUT /v1/sessions/{sid}/state': (input) => write(input, 'replaceState'),

    'GET /v1/sessions/{sid}/versions': async (input) => {
      const scope = sessionScope(input);
      const node = queryNode(input);
      const notesOf = queryNodeIds(input, 'notesOf');
      if (notesOf !== undefined && node !== undefined) {
        throw new AgentStateError('invalid_request', "notesOf goes with the session's history, not a node's lineage", { field: 'notesOf' });
      }
      const page = await input.deps.sessions.listVersions(
        scope,
        { ...pagination(input), ...(node === undefined ? {} : { node }), ...(notesOf === undefined ? {} : { notesOf }) },
        input.caller,
      );
      return json(200, {
        versions: page.items,
        ...(page.next ? { next: page.next } : {}),
        ...(page.prunedBefore === undefined ? {} : { pruned: { before: page.prunedBefore } }),
        ...(page.notes === undefined ? {} : { notes: page.notes }),
        ...(page.notesNext === undefined ? {} : { notesNext: page.notesNext }),
      });
    },

    'GET /v1/sessions/{sid}/decisions': async (input) => {
      const page = await input.deps.sessions.listDecisions(sessionScope(input), pagination(input));
      return json(200, { decisions: page.items, ...(page.next ? { next: page.next } : {}) });
    },

    'GET /v1/sessions/{sid}/versions/{v}': async (input) => {
      const scope = sessionScope(input);
      return json(200, await input.deps.sessions.getVersion(scope, versionNumber(input.path('v'), 'version'), input.caller));
    },
  },
  // A state body beyond the limit can only be refused, so say which limit it broke. The JSON
  // text of a body may exceed the state it encodes (whitespace), hence some headroom.
  { bodyLimitBytes: STATE_BODY_LIMIT_BYTES, tooLarge: 'state_too_large', reportedLimitBytes: STATE_LIMIT_BYTES },
);
