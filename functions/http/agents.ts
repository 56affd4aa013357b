import * as z from 'zod';
import { AgentStateError } from '../core/errors.js';
import { requireId } from '../core/ids.js';
import type { Json } from '../core/json.js';
import { FIELD_TYPES, type StateFields } from '../core/fields.js';
import { MAX_WORKER_TIMEOUT_MS } from '../core/worker-timeout.js';
import { createHttpHandler, idSchema, json, pagination, parseBody, requireIds, type RouteInput } from './api.js';

const scope = z.union([z.literal('private'), z.literal('public'), z.object({ agents: z.array(idSchema).max(100) }).strict()]);

const fieldDeclaration = z
  .object({
    type: z.enum(FIELD_TYPES),
    description: z.string().max(2000).optional(),
    updateRules: z.string().max(2000).optional(),
    read: scope.default('private'),
    write: scope.default('private'),
    migrate: z.literal('clear').optional(),
  })
  .strict();

/** Field names are the top-level keys of the state: ids' characters, no more than 128. */
const stateFields = z.record(idSchema, fieldDeclaration).refine((fields) => Object.keys(fields).length <= 200, {
  message: 'at most 200 fields',
});

const agentBody = z
  .object({
    parentId: z.string().nullable().optional(),
    worker: z
      .object({
        url: z.string().min(1).max(2048),
        secret: z.string().min(1).max(1024).nullable().optional(),
        timeoutMs: z.number().int().min(1).max(MAX_WORKER_TIMEOUT_MS).nullable().optional(),
      })
      .strict()
      .nullable()
      .optional(),
    config: z.json().optional(),
    stateFields: stateFields.nullable().optional(),
  })
  .strict();

const agentId = (input: RouteInput) => requireId(input.path('agentId'), 'agentId');

/** The agent registry (API.md section 7): workers, initial config, hierarchy, typed fields. */
export const handler = createHttpHandler({
  'PUT /v1/agents/{agentId}': async (input) => {
    const id = agentId(input);
    if (input.body === undefined) throw new AgentStateError('invalid_request', 'send the agent as JSON, e.g. {"config": {}}');
    requireIds(input.body, ['parentId']);
    const request = parseBody(agentBody, input.body);
    const { agent, created } = await input.deps.agents.putAgent(input.tenant, id, {
      parentId: request.parentId ?? null,
      worker: request.worker ?? null,
      config: (request.config ?? null) as Json,
      stateFields: (request.stateFields ?? null) as StateFields | null,
    });
    return json(created ? 201 : 200, agent, created ? { location: `/v1/agents/${encodeURIComponent(id)}` } : {});
  },

  'GET /v1/agents/{agentId}': async (input) => json(200, await input.deps.agents.getAgent(input.tenant, agentId(input))),

  'GET /v1/agents': async (input) => {
    const page = await input.deps.agents.listAgents(input.tenant, pagination(input));
    return json(200, { agents: page.items, ...(page.next ? { next: page.next } : {}) });
  },
});
