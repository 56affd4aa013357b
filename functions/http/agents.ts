import { z } from 'zod';
import { AgentStateError } from '../core/errors.js';
import { requireId } from '../core/ids.js';
import type { Json } from '../core/json.js';
import { MAX_WORKER_TIMEOUT_MS } from '../core/decide-service.js';
import { createHttpHandler, json, pagination, parseBody, requireIds, type RouteInput } from './api.js';

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
    stateFields: z.unknown().optional(),
  })
  .strict();

const agentId = (input: RouteInput) => requireId(input.path('agentId'), 'agentId');

/** The agent registry (API.md section 7): workers, initial config, hierarchy. */
export const handler = createHttpHandler({
  'PUT /v1/agents/{agentId}': async (input) => {
    const id = agentId(input);
    if (input.body === undefined) throw new AgentStateError('invalid_request', 'send the agent as JSON, e.g. {"config": {}}');
    requireIds(input.body, ['parentId']);
    const request = parseBody(agentBody, input.body);
    if (request.stateFields !== undefined) {
      throw new AgentStateError('invalid_request', 'stateFields (typed fields) are not supported yet', { field: 'stateFields' });
    }
    const { agent, created } = await input.deps.agents.putAgent(input.tenant, id, {
      parentId: request.parentId ?? null,
      worker: request.worker ?? null,
      config: (request.config ?? null) as Json,
    });
    return json(created ? 201 : 200, agent, created ? { location: `/v1/agents/${encodeURIComponent(id)}` } : {});
  },

  'GET /v1/agents/{agentId}': async (input) => json(200, await input.deps.agents.getAgent(input.tenant, agentId(input))),

  'GET /v1/agents': async (input) => {
    const page = await input.deps.agents.listAgents(input.tenant, pagination(input));
    return json(200, { agents: page.items, ...(page.next ? { next: page.next } : {}) });
  },
});
