import * as z from 'zod/mini';
import { MAX_WORKER_TIMEOUT_MS } from '../../core/agents/worker-timeout.js';
import { isJsonObject, type Json } from '../../core/json/json.js';
import { AgentStateError } from '../../core/kernel/errors.js';
import { requireId } from '../../core/kernel/ids.js';
import { FIELD_TYPES } from '../../core/model/fields.js';
import { type AgentRoute, MAX_LAST_MESSAGES } from '../../core/model/model.js';
import { createHttpHandler, type RouteInput } from '../api.js';
import { idSchema, retentionSchema } from '../edge/id-schema.js';
import { jsonValue, pagination, parsedBody } from '../edge/request.js';
import { json } from '../edge/responses.js';
import { agents } from '../parts/agents.js';

const scope = z.union([z.literal('private'), z.literal('public'), z.strictObject({ agents: z.array(idSchema).check(z.maxLength(100)) })]);

const fieldDeclaration = z.strictObject({
  type: z.enum(FIELD_TYPES),
  description: z.optional(z.string().check(z.maxLength(2000))),
  updateRules: z.optional(z.string().check(z.maxLength(2000))),
  read: z._default(scope, 'private'),
  write: z._default(scope, 'private'),
  migrate: z.optional(z.literal('clear')),
});

/** Field names are the top-level keys of the state: ids' characters, no more than 128. */
const stateFields = z.record(idSchema, fieldDeclaration).check(
  z.refine((fields) => Object.keys(fields).length <= 200, {
    message: 'at most 200 fields',
  }),
);

export const agentBody = z.strictObject({
  parentId: z.optional(z.nullable(z.string())),
  worker: z.optional(
    z.nullable(
      z.strictObject({
        url: z.string().check(z.minLength(1), z.maxLength(2048)),
        secret: z.optional(z.nullable(z.string().check(z.minLength(1), z.maxLength(1024)))),
        timeoutMs: z.optional(z.nullable(z.number().check(z.int(), z.minimum(1), z.maximum(MAX_WORKER_TIMEOUT_MS)))),
        // How much of the conversation the worker is shown: all of it, or its last N messages.
        messages: z.optional(
          z.nullable(
            z.union([z.literal('all'), z.strictObject({ last: z.number().check(z.int(), z.minimum(0), z.maximum(MAX_LAST_MESSAGES)) })]),
          ),
        ),
      }),
    ),
  ),
  config: z.optional(jsonValue),
  stateFields: z.optional(z.nullable(stateFields)),
  // What a key limited to this agent may do to the tenant's documents (API.md section 7).
  documents: z.optional(z.nullable(z.strictObject({ shared: z.optional(z.literal('write')) }))),
  // Routes (API.md section 13): `when` is kept as sent (a filter over the state, checked by the core).
  routes: z.optional(z.nullable(z.array(z.strictObject({ when: jsonValue, to: idSchema })))),
  // What its new sessions live by (API.md section 12): checked by the core, naming the field.
  lifetime: z.optional(
    z.nullable(z.strictObject({ ttlSeconds: z.optional(z.nullable(z.number())), retention: z.optional(retentionSchema) })),
  ),
});

const agentId = (input: RouteInput) => requireId(input.path('agentId'), 'agentId');

/**
 * A field named `__proto__` is refused: a parsed record skips that key, so the declaration
 * would be dropped without a word (the state itself keeps such a key verbatim).
 */
function refuseProtoField(body: Json | undefined): void {
  const fields = isJsonObject(body) ? body.stateFields : undefined;
  if (isJsonObject(fields) && Object.hasOwn(fields, '__proto__')) {
    throw new AgentStateError('invalid_request', 'stateFields.__proto__: a field may not be named __proto__', {
      field: 'stateFields.__proto__',
    });
  }
}

/**
 * The agent registry (API.md section 7): workers, initial config, hierarchy, typed fields. A
 * key limited to agents reads and writes only its agents and those below them (agent-access.ts).
 */
export const handler = createHttpHandler(
  { agents },
  {
    'PUT /v1/agents/{agentId}': async (input) => {
      const id = agentId(input);
      refuseProtoField(input.body);
      // Parsed: a field's read and write scopes default to private.
      const request = parsedBody(input, agentBody, { required: 'send the agent as JSON, e.g. {"config": {}}', ids: ['parentId'] });
      const { agent, created } = await input.deps.agents.putAgent(
        input.tenant,
        id,
        {
          parentId: request.parentId ?? null,
          worker: request.worker ?? null,
          config: request.config ?? null,
          stateFields: request.stateFields ?? null,
          // Absent stays absent: a limited key's registration then keeps the agent's grants.
          ...(request.documents === undefined ? {} : { documents: request.documents }),
          routes: (request.routes ?? null) as AgentRoute[] | null,
          lifetime: request.lifetime ?? null,
        },
        input.allowedAgents,
      );
      return json(created ? 201 : 200, agent, created ? { location: `/v1/agents/${encodeURIComponent(id)}` } : {});
    },

    'GET /v1/agents/{agentId}': async (input) =>
      json(200, await input.deps.agents.getAgent(input.tenant, agentId(input), input.allowedAgents)),

    'GET /v1/agents': async (input) => {
      const page = await input.deps.agents.listAgents(input.tenant, pagination(input), input.allowedAgents);
      return json(200, { agents: page.items, ...(page.next ? { next: page.next } : {}) });
    },
  },
);
