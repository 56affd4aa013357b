import * as z from 'zod/mini';
import { type ActingAgentWording, mayActAs, requireActingAgent } from '../../core/agents/acting-agent.js';
import { AgentStateError } from '../../core/kernel/errors.js';
import { requireId } from '../../core/kernel/ids.js';
import type { WebhookService } from '../../core/webhooks/registry.js';
import { createHttpHandler, type RouteInput } from '../api.js';
import { idSchema } from '../edge/id-schema.js';
import { bodyAsSent, pagination } from '../edge/request.js';
import { json, noContent } from '../edge/responses.js';
import { webhooks } from '../parts/webhooks.js';

export const createWebhookBody = z.strictObject({
  url: z.string().check(z.minLength(1), z.maxLength(2048)),
  secret: z.optional(z.nullable(z.string().check(z.minLength(1), z.maxLength(1024)))),
  sessionId: z.optional(z.nullable(idSchema)),
  agentId: z.optional(z.nullable(idSchema)),
});

export const replayBody = z.strictObject({ limit: z.optional(z.number().check(z.int())) });

const webhookId = (input: RouteInput) => requireId(input.path('webhookId'), 'webhookId');

/**
 * A key limited to some agents sees only the webhooks registered as one of them: the others
 * (and their dead letters, which hold whole events) do not exist for it.
 */
const visibleTo = (input: RouteInput) => (webhook: { agentId?: string | null }) => mayActAs(input.allowedAgents, webhook.agentId);

/** A key limited to some agents receives events only as one of them (API.md section 7). */
const REGISTRATION_WORDING: ActingAgentWording = {
  missing: 'this key acts as an agent: register the webhook with agentId, one of its agents',
  refused: (agentId) => `this key may not receive events as agent ${agentId}`,
};

/** The webhook the path names, as the caller may see it (`404 not_found` otherwise). */
async function visibleWebhook(input: RouteInput<{ webhooks: WebhookService }>): Promise<string> {
  const id = webhookId(input);
  const webhook = await input.deps.webhooks.get(input.tenant, id);
  if (!visibleTo(input)(webhook)) throw new AgentStateError('not_found', `webhook ${id} does not exist`, { webhookId: id });
  return id;
}

/** Webhooks and their dead letters (API.md section 9, docs/api.md "Change events"). */
export const handler = createHttpHandler(
  { webhooks },
  {
    'POST /v1/webhooks': async (input) => {
      const request = bodyAsSent(input, createWebhookBody, { ids: ['sessionId', 'agentId'] });
      requireActingAgent(input.allowedAgents, request.agentId, REGISTRATION_WORDING);
      const webhook = await input.deps.webhooks.create(input.tenant, request);
      return json(201, webhook, { location: `/v1/webhooks/${encodeURIComponent(webhook.id)}` });
    },

    'GET /v1/webhooks': async (input) => {
      const page = await input.deps.webhooks.list(input.tenant, pagination(input));
      return json(200, { webhooks: page.items.filter(visibleTo(input)), ...(page.next ? { next: page.next } : {}) });
    },

    'GET /v1/webhooks/{webhookId}': async (input) => json(200, await input.deps.webhooks.get(input.tenant, await visibleWebhook(input))),

    'DELETE /v1/webhooks/{webhookId}': async (input) => {
      await input.deps.webhooks.delete(input.tenant, await visibleWebhook(input));
      return noContent();
    },

    'GET /v1/webhooks/{webhookId}/dead-letters': async (input) => {
      const id = await visibleWebhook(input);
      const page = await input.deps.webhooks.listDeadLetters(input.tenant, id, pagination(input));
      return json(200, { deadLetters: page.items, ...(page.next ? { next: page.next } : {}) });
    },

    'POST /v1/webhooks/{webhookId}/dead-letters/replay': async (input) => {
      const id = await visibleWebhook(input);
      const { limit } = bodyAsSent(input, replayBody);
      return json(200, await input.deps.webhooks.replay(input.tenant, id, limit === undefined ? {} : { limit }));
    },
  },
);
