import * as z from 'zod/mini';
import { AgentStateError } from '../../core/kernel/errors.js';
import { ID_CHARACTERS, ID_PATTERN, requireId } from '../../core/kernel/ids.js';
import { checkMetadata } from '../../core/model/limits.js';
import type { SessionFilter } from '../../core/model/ports.js';
import { checkListedMetadata } from '../../core/sessions/session-lists.js';
import { createHttpHandler, type RouteInput } from '../api.js';
import { idSchema, retentionSchema } from '../edge/id-schema.js';
import { bodyAsSent, jsonObject, keyAccess, pagination, sessionScope } from '../edge/request.js';
import { json, noContent } from '../edge/responses.js';
import { erasures } from '../parts/erasures.js';
import { sessionTree } from '../parts/session-tree.js';

/**
 * `PATCH /v1/sessions/{sid}`: the metadata (merge-patched), the user and the agent (`null`
 * clears either), and the lifetime; each field given changes.
 */
export const updateSessionBody = z.strictObject({
  metadata: z.optional(z.nullable(jsonObject)),
  userId: z.optional(z.nullable(idSchema)),
  agentId: z.optional(z.nullable(idSchema)),
  ttlSeconds: z.optional(z.nullable(z.number())),
  expiresAt: z.optional(z.nullable(z.string())),
  retention: z.optional(retentionSchema),
});

export const createSessionBody = z.strictObject({
  sessionId: z.optional(idSchema),
  agentId: z.optional(z.nullable(idSchema)),
  userId: z.optional(z.nullable(idSchema)),
  metadata: z.optional(z.nullable(jsonObject)),
});

/**
 * `prefix` of `GET /v1/sessions`: the start of a session id, so the same characters as an id
 * (an empty prefix would match everything and is refused as a likely mistake).
 */
function sessionIdPrefix(raw: string): string {
  // The pattern alone: `.` is no id, but it starts ids such as `.draft`.
  if (!ID_PATTERN.test(raw)) throw new AgentStateError('invalid_request', `prefix must be ${ID_CHARACTERS}`, { field: 'prefix' });
  return raw;
}

/**
 * The filter of `GET /v1/sessions` (API.md section 2): `userId`, `agentId` or
 * `metadata.<key>` (a top-level key, matched against string values), one at a time, each sent
 * once. Two filters, or one sent twice, are `400 invalid_request`: each filter is a list of its
 * own (store/sessions/list-entries.ts), and a combination would read one and sift it, pages
 * short without end; `prefix` still sifts whatever list is read.
 */
function sessionFilter(input: RouteInput): SessionFilter | undefined {
  const filters = input.queryPairs().filter(([name]) => name === 'userId' || name === 'agentId' || name.startsWith('metadata'));
  if (filters.length === 0) return undefined;
  const [name, value] = filters[0] as [string, string];
  if (filters.length > 1) {
    throw new AgentStateError('invalid_request', 'filter by one of userId, agentId, metadata.<key> at a time, each sent once', {
      field: filters[1]?.[0] ?? name,
    });
  }
  if (name === 'userId' || name === 'agentId') {
    const id = requireId(value, name);
    return name === 'userId' ? { userId: id } : { agentId: id };
  }
  if (!name.startsWith('metadata.')) {
    throw new AgentStateError('invalid_request', 'a metadata filter is metadata.<key>=<string value>', { field: name });
  }
  return { metadata: { key: name.slice('metadata.'.length), value } };
}

/** Sessions: create, read, list by recent activity, delete (API.md section 2); erasures of users (section 12). */
export const handler = createHttpHandler(
  { sessionTree, erasures },
  {
    'POST /v1/sessions': async (input) => {
      // As sent: zod's copy of the metadata would turn a "__proto__" key into a prototype.
      const request = bodyAsSent(input, createSessionBody, { ids: ['sessionId', 'agentId', 'userId'] });
      const metadata = request.metadata ?? null;
      checkMetadata(metadata);
      checkListedMetadata(metadata);
      const session = await input.deps.sessionTree.createSession(
        input.tenant,
        {
          sessionId: request.sessionId,
          agentId: request.agentId ?? null,
          userId: request.userId ?? null,
          metadata,
        },
        keyAccess(input),
      );
      return json(201, session, { location: `/v1/sessions/${encodeURIComponent(session.sessionId)}` });
    },

    'GET /v1/sessions': async (input) => {
      const prefix = input.query('prefix');
      const filter = sessionFilter(input);
      const page = await input.deps.sessionTree.listSessions(input.tenant, {
        ...pagination(input),
        ...(prefix === undefined ? {} : { prefix: sessionIdPrefix(prefix) }),
        ...(filter === undefined ? {} : { filter }),
      });
      return json(200, { sessions: page.items, ...(page.next ? { next: page.next } : {}) });
    },

    'GET /v1/sessions/{sid}': async (input) => json(200, await input.deps.sessionTree.getSession(sessionScope(input))),

    'PATCH /v1/sessions/{sid}': async (input) => {
      const request = bodyAsSent(input, updateSessionBody, { ids: ['userId', 'agentId'] });
      return json(200, await input.deps.sessionTree.updateSession(sessionScope(input), request, keyAccess(input)));
    },

    'DELETE /v1/sessions/{sid}': async (input) => {
      // The function's time left bounds the erase (then the change hook goes on with it): the 204 comes well before the timeout.
      await input.deps.sessionTree.deleteSession(sessionScope(input), input.allowedAgents, input.remainingMs());
      return noContent();
    },

    'DELETE /v1/users/{userId}': async (input) => {
      const userId = requireId(input.path('userId'), 'userId');
      const erasureId = await input.deps.erasures.erase(input.tenant, userId, input.allowedAgents);
      return json(202, { erasureId }, { location: `/v1/erasures/${encodeURIComponent(erasureId)}` });
    },

    'GET /v1/erasures/{erasureId}': async (input) =>
      json(200, await input.deps.erasures.get(input.tenant, requireId(input.path('erasureId'), 'erasureId'), input.allowedAgents)),
  },
);
