import * as z from 'zod';
import { AgentStateError } from '../core/errors.js';
import { requireNodeId } from '../core/ids.js';
import type { JsonObject } from '../core/json.js';
import type { DecideRequest } from '../core/decide-service.js';
import { createHttpHandler, json, parseBody, requireIds, sessionScope } from './api.js';
import { MAX_MESSAGES_PER_APPEND, checkMessages, messageSchema } from './messages.js';

const decideBody = z
  .object({
    trigger: z.looseObject({ type: z.string().min(1, 'trigger.type must be a non-empty string') }),
    decisionId: z.string().optional(),
    agentId: z.string().optional(),
    turnId: z.string().optional(),
    parentId: z.string().optional(),
    proposed: z.record(z.string(), z.json()).optional(),
    stateOverlay: z.record(z.string(), z.json()).optional(),
  })
  .strict();

const clientMessages = z.array(messageSchema).min(1).max(MAX_MESSAGES_PER_APPEND);

/** `POST /v1/sessions/{sid}/decide` (API.md section 6). */
export const handler = createHttpHandler({
  'POST /v1/sessions/{sid}/decide': async (input) => {
    const scope = sessionScope(input);
    if (input.body === undefined) throw new AgentStateError('invalid_request', 'send {"trigger": {"type": "..."}}');
    requireIds(input.body, ['decisionId', 'agentId', 'turnId', 'parentId']);
    parseBody(decideBody, input.body);
    // Validated above; passed on as sent, so the worker sees the trigger verbatim.
    const body = input.body as DecideRequest & { trigger: JsonObject & { type: string } };
    if (body.trigger.type === 'client.messages') {
      parseBody(z.object({ messages: clientMessages }), { messages: body.trigger.messages });
      checkMessages(body.trigger.messages as JsonObject[], 'trigger.messages');
    }
    if (body.parentId !== undefined) requireNodeId(body.parentId, 'parentId');
    // The deciding agent: named in the body, else the one the caller acts as (X-Agent-Id).
    const agentId = body.agentId ?? input.caller ?? undefined;
    if (body.agentId !== undefined && input.event.allowedAgents && !input.event.allowedAgents.includes(body.agentId)) {
      throw new AgentStateError('forbidden', `this key may not act as agent ${body.agentId}`, {
        agents: input.event.allowedAgents,
      });
    }
    return json(200, await input.deps.decide.decide(scope, { ...body, ...(agentId ? { agentId } : {}) }));
  },
});
