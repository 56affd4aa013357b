import * as z from 'zod/mini';
import { requireActingAgent } from '../../core/agents/acting-agent.js';
import type { DecideResult } from '../../core/decide/decide-service.js';
import { STATE_BODY_LIMIT_BYTES } from '../../core/model/model.js';
import { createHttpHandler } from '../api.js';
import { HEADER_WORDING } from '../edge/middleware.js';
import { asSent, bodyAsSent, jsonObject, sessionScope } from '../edge/request.js';
import { json } from '../edge/responses.js';
import { decide } from '../parts/decide.js';
import { checkMessages, MAX_MESSAGES_PER_APPEND, messageSchema } from './messages.js';

export const decideBody = z.strictObject({
  trigger: z.looseObject({ type: z.string().check(z.minLength(1, 'trigger.type must be a non-empty string')) }),
  decisionId: z.optional(z.string()),
  agentId: z.optional(z.string()),
  turnId: z.optional(z.string()),
  parentId: z.optional(z.string()),
  proposed: z.optional(jsonObject),
  stateOverlay: z.optional(jsonObject),
});

const clientMessages = z.object({ messages: z.array(messageSchema).check(z.minLength(1), z.maxLength(MAX_MESSAGES_PER_APPEND)) });

/** `POST /v1/sessions/{sid}/decide` (API.md section 6). */
export const handler = createHttpHandler(
  { decide },
  {
    'POST /v1/sessions/{sid}/decide': async (input) => {
      const scope = sessionScope(input);
      // As sent: the worker sees the trigger verbatim.
      const body = bodyAsSent(input, decideBody, {
        required: 'send {"trigger": {"type": "..."}}',
        ids: ['decisionId', 'agentId', 'turnId', 'parentId'],
      });
      if (body.trigger.type === 'client.messages') {
        const { messages } = asSent(clientMessages, { messages: body.trigger.messages });
        checkMessages(messages, 'trigger.messages');
      }
      // parentId is any node, the root included (a fork under it edits the first message); its
      // syntax was checked with the body's ids.
      // The deciding agent: named in the body, else the one the caller acts as (X-Agent-Id, which
      // the middleware checked); one named in the body must be one the key may act as, too.
      if (body.agentId !== undefined) requireActingAgent(input.allowedAgents, body.agentId, HEADER_WORDING);
      const agentId = body.agentId ?? input.caller ?? undefined;
      const answer = (result: DecideResult) => json(200, result);
      const keep = input.keeper(answer);
      return answer(
        await input.deps.decide.decide(scope, { ...body, ...(agentId ? { agentId } : {}), allowed: input.allowedAgents }, keep),
      );
    },
  },
  // A commit may set a thread key to a state of up to 4 MiB; a decision may carry one in `proposed`.
  { bodyLimitBytes: STATE_BODY_LIMIT_BYTES },
);
