import { z } from 'zod';
import { requireId } from '../core/ids.js';
import { WebhookService } from '../core/webhooks.js';
import { dynamoDbClient } from '../store/client.js';
import { defaultTableName } from '../store/table.js';
import { DynamoDbWebhookStore } from '../store/webhook-store.js';
import { validateWebhookUrl, webhookSender } from '../workers/webhook-delivery.js';
import { createHttpHandler, idSchema, json, noContent, pagination, parseBody, requireIds, type RouteInput } from './api.js';

const createWebhookBody = z
  .object({
    url: z.string().min(1).max(2048),
    secret: z.string().min(1).max(1024).nullable().optional(),
    sessionId: idSchema.nullable().optional(),
  })
  .strict();

const replayBody = z.object({ limit: z.number().int().optional() }).strict();

let service: WebhookService | undefined;

/**
 * The webhook service, built from the environment on first use (like dependencies.ts). In a
 * Lambda, webhook URLs follow the AWS rules (public https only); locally http to loopback too.
 */
function webhooks(): WebhookService {
  if (!service) {
    const env = process.env;
    const local = !env.AWS_LAMBDA_FUNCTION_NAME;
    service = new WebhookService(
      new DynamoDbWebhookStore(dynamoDbClient(env), env.AGENTSTATE_TABLE ?? defaultTableName),
      (url) => void validateWebhookUrl(url, { allowLoopbackHttp: local }),
      webhookSender({ allowLoopbackHttp: local }),
    );
  }
  return service;
}

/** Replaces the service (tests); undefined rebuilds it from the environment on next use. */
export function useWebhookService(replacement: WebhookService | undefined): void {
  service = replacement;
}

const webhookId = (input: RouteInput) => requireId(input.path('webhookId'), 'webhookId');

/** Webhooks and their dead letters (API.md section 9, docs/api.md "Change events"). */
export const handler = createHttpHandler({
  'POST /v1/webhooks': async (input) => {
    requireIds(input.body, ['sessionId']);
    const request = parseBody(createWebhookBody, input.body ?? {});
    const webhook = await webhooks().create(input.tenant, request);
    return json(201, webhook, { location: `/v1/webhooks/${encodeURIComponent(webhook.id)}` });
  },

  'GET /v1/webhooks': async (input) => {
    const page = await webhooks().list(input.tenant, pagination(input));
    return json(200, { webhooks: page.items, ...(page.next ? { next: page.next } : {}) });
  },

  'GET /v1/webhooks/{webhookId}': async (input) => json(200, await webhooks().get(input.tenant, webhookId(input))),

  'DELETE /v1/webhooks/{webhookId}': async (input) => {
    await webhooks().delete(input.tenant, webhookId(input));
    return noContent();
  },

  'GET /v1/webhooks/{webhookId}/dead-letters': async (input) => {
    const id = webhookId(input);
    const page = await webhooks().listDeadLetters(input.tenant, id, pagination(input));
    return json(200, { deadLetters: page.items, ...(page.next ? { next: page.next } : {}) });
  },

  'POST /v1/webhooks/{webhookId}/dead-letters/replay': async (input) => {
    const id = webhookId(input);
    const request = parseBody(replayBody, input.body ?? {});
    return json(200, await webhooks().replay(input.tenant, id, request.limit === undefined ? {} : { limit: request.limit }));
  },
});
