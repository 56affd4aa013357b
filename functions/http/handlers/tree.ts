import * as z from 'zod/mini';
import type { Json } from '../../core/json/json.js';
import { AgentStateError } from '../../core/kernel/errors.js';
import { requireId } from '../../core/kernel/ids.js';
import { APPEND_BODY_LIMIT_BYTES, checkMetadata } from '../../core/model/limits.js';
import type { AppendResult, StateChange } from '../../core/sessions/append-input.js';
import { checkListedMetadata } from '../../core/sessions/session-lists.js';
import { createHttpHandler, type RouteInput } from '../api.js';
import {
  bodyAsSent,
  flag,
  ifMatch,
  jsonObject,
  jsonValue,
  keyAccess,
  pagination,
  queryNode,
  queryNodeIds,
  sessionScope,
} from '../edge/request.js';
import { json } from '../edge/responses.js';
import { messageTree, sessionCopier } from '../parts/session-tree.js';
import { checkMessages, MAX_MESSAGES_PER_APPEND, messageSchema } from './messages.js';

export const appendBody = z.strictObject({
  messages: z.array(messageSchema).check(z.minLength(1), z.maxLength(MAX_MESSAGES_PER_APPEND)),
  parentId: z.optional(z.string()),
  /** A merge patch of the new head's state (API.md section 3). */
  state: z.optional(jsonValue),
  /** The new head's whole state. */
  replaceState: z.optional(jsonValue),
});

export const headBody = z.strictObject({ nodeId: z.string() });

export const copyBody = z.strictObject({
  /** Checked as an id by `bodyAsSent` (the zod id schema stays out of this group's bundle). */
  sessionId: z.optional(z.string()),
  /** The path root→node is copied (default: the head). */
  node: z.optional(z.string()),
  /** The whole tree instead. */
  tree: z.optional(z.boolean()),
  metadata: z.optional(z.nullable(jsonObject)),
});

/** The state an append writes with its messages: `state` (a merge patch) or `replaceState`, not both. */
function stateChangeOf(body: { state?: Json; replaceState?: Json }): StateChange | undefined {
  const patch = Object.hasOwn(body, 'state');
  const whole = Object.hasOwn(body, 'replaceState');
  if (patch && whole) {
    throw new AgentStateError('invalid_request', 'send state (a merge patch) or replaceState (a whole state), not both', {
      field: 'replaceState',
    });
  }
  if (patch) return { replace: false, value: body.state as Json };
  if (whole) return { replace: true, value: body.replaceState as Json };
  return undefined;
}

/** The message tree: append, path, node, tree, head (API.md section 3). */
/** The `201` of an append (also what its change keeps for an `Idempotency-Key` retry). */
const appended = (result: AppendResult) => json(201, result);

export const handler = createHttpHandler(
  { sessionTree: messageTree, copier: sessionCopier },
  {
    'POST /v1/sessions/{sid}/messages': async (input) => {
      const scope = sessionScope(input);
      // As sent: messages are stored with their keys in the order they came.
      const body = bodyAsSent(input, appendBody, { required: 'send {"messages": [...]}', ids: ['parentId'] });
      const { messages, parentId } = body;
      checkMessages(messages, 'messages');
      const state = stateChangeOf(body);
      const precondition = ifMatch(input);
      const result = await input.deps.sessionTree.appendMessages(
        scope,
        {
          messages,
          ...(parentId === undefined ? {} : { parentId }),
          ...(state === undefined ? {} : { state }),
          ...(precondition === undefined ? {} : { ifMatch: precondition }),
          keep: input.keeper(appended),
        },
        keyAccess(input),
      );
      return appended(result);
    },

    'GET /v1/sessions/{sid}/messages': async (input) =>
      json(200, await input.deps.sessionTree.getPath(sessionScope(input), queryNode(input), lastMessages(input))),

    'GET /v1/sessions/{sid}/nodes/{nid}': async (input) => {
      const scope = sessionScope(input);
      return json(200, await input.deps.sessionTree.getNode(scope, requireId(input.path('nid'), 'nodeId')));
    },

    // A page of nodes by id, from the last: what reads a long session's newest nodes without its whole tree.
    'GET /v1/sessions/{sid}/nodes': async (input) => {
      const before = input.query('before');
      return json(
        200,
        await input.deps.sessionTree.listNodes(sessionScope(input), {
          ...pagination(input),
          ...(before === undefined ? {} : { before: requireId(before, 'before') }),
        }),
      );
    },

    // `?preview=1` adds message snippets; `?notes=1` every node's notes.
    'GET /v1/sessions/{sid}/tree': async (input) =>
      json(
        200,
        await input.deps.sessionTree.getTree(sessionScope(input), {
          preview: flag(input, 'preview'),
          notes: flag(input, 'notes'),
          ...(input.query('cursor') === undefined ? {} : { cursor: input.query('cursor') }),
        }),
      ),

    // The notes of some nodes (`?nodes=a,b`) or of all, in parts: what goes on from a read's `notesNext`.
    'GET /v1/sessions/{sid}/notes': async (input) => {
      const nodeIds = queryNodeIds(input, 'nodes');
      const cursor = input.query('cursor');
      const page = await input.deps.sessionTree.readNotesPage(sessionScope(input), {
        ...(nodeIds === undefined ? {} : { nodeIds }),
        ...(cursor === undefined ? {} : { cursor }),
      });
      return json(200, page);
    },

    'PUT /v1/sessions/{sid}/nodes/{nid}/notes/{key}': async (input) => {
      const scope = sessionScope(input);
      if (input.body === undefined) throw new AgentStateError('invalid_json', 'the body must be a JSON value: the note');
      const nodeId = requireId(input.path('nid'), 'nodeId');
      const key = requireId(input.path('key'), 'key');
      return json(200, await input.deps.sessionTree.putNote(scope, nodeId, key, input.body as Json, keyAccess(input)));
    },

    'POST /v1/sessions/{sid}/copy': async (input) => {
      // As sent: zod's copy of the metadata would turn a "__proto__" key into a prototype.
      const body = bodyAsSent(input, copyBody, { ids: ['sessionId', 'node'] });
      if (body.tree === true && body.node !== undefined) {
        throw new AgentStateError('invalid_request', 'send node (a path) or "tree": true (the whole tree), not both', { field: 'node' });
      }
      if (body.metadata !== undefined) {
        checkMetadata(body.metadata);
        checkListedMetadata(body.metadata);
      }
      const copy = await input.deps.copier.copy(
        sessionScope(input),
        {
          ...(body.sessionId === undefined ? {} : { sessionId: body.sessionId }),
          ...(body.node === undefined ? {} : { node: body.node }),
          ...(body.tree === undefined ? {} : { tree: body.tree }),
          ...(body.metadata === undefined ? {} : { metadata: body.metadata }),
        },
        input.allowedAgents,
      );
      return json(201, copy, { location: `/v1/sessions/${encodeURIComponent(copy.sessionId)}` });
    },

    'PUT /v1/sessions/{sid}/head': async (input) => {
      const scope = sessionScope(input);
      const { nodeId } = bodyAsSent(input, headBody, { required: 'send {"nodeId": "..."}', ids: ['nodeId'] });
      return json(200, await input.deps.sessionTree.switchHead(scope, nodeId, keyAccess(input)));
    },
  },
  // An append may carry the new head's state: the state's limit plus the messages'.
  { bodyLimitBytes: APPEND_BODY_LIMIT_BYTES },
);

/** The most `?last=` may ask for: a path's newest part is read in parts of at most this many messages. */
const MAX_LAST = 10_000;

/** `?last=N`: only the path's last N messages (1 to 10,000); all of them when absent. */
function lastMessages(input: RouteInput): { last?: number } {
  const raw = input.query('last');
  if (raw === undefined) return {};
  const last = Number(raw);
  if (!/^[1-9]\d{0,4}$/.test(raw) || last > MAX_LAST) {
    throw new AgentStateError('invalid_request', `last must be an integer from 1 to ${MAX_LAST}`, { field: 'last' });
  }
  return { last };
}
