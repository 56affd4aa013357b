import * as z from 'zod/mini';
import { AgentStateError } from '../../core/kernel/errors.js';
import { requireId } from '../../core/kernel/ids.js';
import { createHttpHandler, type RouteInput } from '../api.js';
import { bodyAsSent, keyAccess, queryNode, sessionScope } from '../edge/request.js';
import { json } from '../edge/responses.js';
import { sessionTree } from '../parts/session-tree.js';
import { checkMessages, MAX_MESSAGES_PER_APPEND, messageSchema } from './messages.js';

export const appendBody = z.strictObject({
  messages: z.array(messageSchema).check(z.minLength(1), z.maxLength(MAX_MESSAGES_PER_APPEND)),
  parentId: z.optional(z.string()),
});

export const headBody = z.strictObject({ nodeId: z.string() });

/** `?preview=1` (or `true`) adds message snippets to the tree; `0`, `false` or absent leaves them out. */
function previewFlag(input: RouteInput): boolean {
  const raw = input.query('preview');
  if (raw === undefined || raw === '0' || raw === 'false') return false;
  if (raw === '1' || raw === 'true') return true;
  throw new AgentStateError('invalid_request', 'preview must be 1, true, 0 or false', { field: 'preview' });
}

/** The message tree: append, path, node, tree, head (API.md section 3). */
export const handler = createHttpHandler(
  { sessionTree },
  {
    'POST /v1/sessions/{sid}/messages': async (input) => {
      const scope = sessionScope(input);
      // As sent: messages are stored with their keys in the order they came.
      const { messages, parentId } = bodyAsSent(input, appendBody, { required: 'send {"messages": [...]}', ids: ['parentId'] });
      checkMessages(messages, 'messages');
      const result = await input.deps.sessionTree.appendMessages(
        scope,
        { messages, ...(parentId === undefined ? {} : { parentId }) },
        keyAccess(input),
      );
      return json(201, result);
    },

    'GET /v1/sessions/{sid}/messages': async (input) =>
      json(200, await input.deps.sessionTree.getPath(sessionScope(input), queryNode(input))),

    'GET /v1/sessions/{sid}/nodes/{nid}': async (input) => {
      const scope = sessionScope(input);
      return json(200, await input.deps.sessionTree.getNode(scope, requireId(input.path('nid'), 'nodeId')));
    },

    'GET /v1/sessions/{sid}/tree': async (input) =>
      json(200, await input.deps.sessionTree.getTree(sessionScope(input), { preview: previewFlag(input) })),

    'PUT /v1/sessions/{sid}/head': async (input) => {
      const scope = sessionScope(input);
      const { nodeId } = bodyAsSent(input, headBody, { required: 'send {"nodeId": "..."}', ids: ['nodeId'] });
      return json(200, await input.deps.sessionTree.switchHead(scope, nodeId, keyAccess(input)));
    },
  },
);
