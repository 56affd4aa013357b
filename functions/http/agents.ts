import * as z from 'zod';
import { FIELD_TYPES } from '../core/fields.js';
import { requireId } from '../core/ids.js';
import { MAX_LAST_MESSAGES } from '../core/model.js';
import { MAX_WORKER_TIMEOUT_MS } from '../core/worker-timeout.js';
import { createHttpHandler, type RouteInput } from './api.js';
import { agents } from './parts/agents.js';
import { idSchema, jsonValue, pagination, parsedBody } from './request.js';
import { json } from './responses.js';

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

export const agentBody = z
  .object({
    parentId: z.string().nullable().optional(),
    worker: z
      .object({
        url: z.string().min(1).max(2048),
        secret: z.string().min(1).max(1024).nullable().optional(),
        timeoutMs: z.number().int().min(1).max(MAX_WORKER_TIMEOUT_MS).nullable().optional(),
        // How much of the conversation the worker is shown: all of it, or its last N messages.
        messages: z
          .union([z.literal('all'), z.object({ last: z.number().int().min(0).max(MAX_LAST_MESSAGES) }).strict()])
          .nullable()
          .optional(),
      })
      .strict()
      .nullable()
      .optional(),
    config: jsonValue.optional(),
    stateFields: stateFields.nullable().optional(),
  })
  .strict();

const agentId = (input: RouteInput) => requireId(input.path('agentId'), 'agentId');

/**
 * The agent registry (API.md section 7): workers, initial config, hierarchy, typed fields. A
 * key limited to agents reads and writes only its agents and those below them (agent-access.ts).
 */
export const handler = createHttpHandler(
  { agents },
  {
    'PUT /v1/agents/{agentId}': async (input) => {
      const id = agentId(input);
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
