import { ID_PATTERN } from '../../core/kernel/ids.js';
import { AGENT_CONFIG_LIMIT_BYTES, AGENT_STATE_FIELDS_LIMIT_BYTES } from '../../core/model/limits.js';
import { jsonValue } from '../edge/request.js';
import { agentBody } from '../handlers/agents.js';
import { commitBody } from '../handlers/commits.js';
import { decideBody } from '../handlers/decide.js';
import { putMemoryBody, searchMemoryBody } from '../handlers/memory.js';
import { createSessionBody, updateSessionBody } from '../handlers/sessions.js';
import { createWebhookBody, replayBody } from '../handlers/webhooks.js';
import type { Operation } from './operation-types.js';
import { flag, node, notesOf, page } from './query-parameters.js';
import type { RouteKey } from './routes.js';
import { treeOperations } from './tree-operations.js';

/**
 * What each route is, for the OpenAPI document (document.ts). The table is keyed by every
 * route of routes.ts, so a new route does not type-check until it is described here — that is
 * the one step a new route takes. Request bodies are the handlers' own zod schemas; answers
 * name a schema of schemas.ts. `problems` lists the route's own error codes; the document adds
 * those every keyed route or every write can answer (see `commonProblems` in document.ts).
 */

const stateWrite = {
  schema: jsonValue,
  contentTypes: ['application/merge-patch+json', 'application/json'],
  example: { model: 'fast', turns: 1 },
} as const;
/** PATCH takes a merge patch or, as `application/json-patch+json`, RFC 6902 operations. */
const statePatch = {
  ...stateWrite,
  contentTypes: ['application/merge-patch+json', 'application/json', 'application/json-patch+json'],
  exampleOf: {
    'application/json-patch+json': [
      { op: 'test', path: '/turns', value: 1 },
      { op: 'replace', path: '/turns', value: 2 },
      { op: 'add', path: '/visited/-', value: 'Lisbon' },
    ],
  },
} as const;
const typedWriteProblems = ['unknown_field', 'validation_failed', 'field_forbidden'] as const;

export const operations: Record<RouteKey, Operation> = {
  'GET /health': {
    tag: 'health',
    summary: 'Health check',
    description: 'No key needed; reads no data. `503 unavailable` while the store cannot be reached.',
    public: true,
    responses: { 200: { description: 'The service is up.', schema: 'Health' } },
    problems: ['unavailable'],
  },
  'GET /v1/openapi.json': {
    tag: 'health',
    summary: 'This API as an OpenAPI 3.1 document',
    description: 'No key needed. Generated from the schemas the handlers validate with; docs/openapi.json is the same document.',
    public: true,
    responses: { 200: { description: 'The OpenAPI document.' } },
    problems: [],
  },
  'POST /v1/sessions': {
    tag: 'sessions',
    summary: 'Create a session',
    body: {
      schema: createSessionBody,
      optional: true,
      example: { sessionId: 's1', agentId: 'planner', userId: 'u-42', metadata: { channel: 'web' } },
    },
    responses: { 201: { description: 'Created.', schema: 'Session', headers: ['Location'] } },
    problems: ['invalid_request', 'session_exists', 'conflict'],
  },
  'GET /v1/sessions': {
    tag: 'sessions',
    summary: 'List sessions, most recently active first',
    description:
      'One filter at a time: `userId`, `agentId`, or `metadata.<key>=<string>` (a top-level metadata key, matching string values; e.g. `?metadata.channel=web`). A session is in every list it belongs to once the request that created it (or changed its `userId`, `agentId` or `metadata`) has answered, and in no list it left; the order may trail its latest write by up to 30 s.',
    query: [
      ...page,
      { name: 'prefix', description: 'Only ids that start with it (pages may then be short).', schema: { type: 'string' } },
      { name: 'userId', description: "Only this user's sessions.", schema: { type: 'string', pattern: ID_PATTERN.source } },
      { name: 'agentId', description: "Only this agent's sessions.", schema: { type: 'string', pattern: ID_PATTERN.source } },
    ],
    responses: { 200: { description: 'One page.', schema: 'SessionList' } },
    problems: ['invalid_request'],
  },
  'GET /v1/sessions/{sid}': {
    tag: 'sessions',
    summary: 'Read a session',
    responses: { 200: { description: 'The session.', schema: 'Session' } },
    problems: ['session_not_found'],
  },
  'PATCH /v1/sessions/{sid}': {
    tag: 'sessions',
    summary: "Change a session's metadata (merge patch), user, agent and lifetime",
    description:
      "Each field given changes, field by field over what the session has (API.md sections 2 and 12): `metadata` (merge-patched), `userId` and `agentId` (`null`: none; only a key not limited to agents may send them, `403` otherwise, whatever the value), `ttlSeconds` (idle expiry, 1 s to 10 years), `expiresAt` (an absolute time in the future), `retention` (`keepVersions`, `keepDays`, each at least 1); `null` removes a setting. A change is a write: it restarts an idle expiry. Once it answers, the session is in the lists of its new user, agent and metadata strings and in none of its old ones; its profile is the new user's, and the new user's erasure erases it. Bad settings are `400` naming the field.",
    body: {
      schema: updateSessionBody,
      example: { metadata: { channel: 'email' }, userId: 'u-43', ttlSeconds: 604800, retention: { keepVersions: 100 } },
    },
    responses: { 200: { description: 'The session after the change.', schema: 'Session' } },
    problems: ['invalid_request', 'session_not_found', 'forbidden', 'conflict'],
  },
  'DELETE /v1/sessions/{sid}': {
    tag: 'sessions',
    summary: 'Delete a session and everything in it',
    responses: { 204: { description: 'Deleted.' } },
    problems: ['session_not_found', 'conflict'],
  },
  'DELETE /v1/users/{userId}': {
    tag: 'sessions',
    summary: 'Erase a user: their sessions, profile and memory under users/<userId>',
    description:
      'From the `202` on none of it is readable; once the erasure is `done` none of it is stored (history and kept versions included). The change hook does the work, in steps, whatever the user has; the request waits up to 12 s for it to close everything, then answers `202`, or `409 conflict` with the `erasureId` while the erasure goes on (send the request again: it answers `202` once closing is done). A call while an erasure of the user is not done joins it (one erasure, each thing counted once); a call after it is done starts another. A user nobody has is erased all the same, with zero counts. Only a key not limited to agents may erase (`403`).',
    responses: { 202: { description: 'Started; follow it at `Location`.', schema: 'ErasureStarted', headers: ['Location'] } },
    problems: ['forbidden', 'conflict'],
  },
  'GET /v1/erasures/{erasureId}': {
    tag: 'sessions',
    summary: 'Read an erasure: running or done, and the counts of what it erased',
    responses: { 200: { description: 'The erasure.', schema: 'Erasure' } },
    problems: ['forbidden', 'not_found'],
  },
  // The message tree's routes (tree-operations.ts).
  ...treeOperations,
  'GET /v1/sessions/{sid}/state': {
    tag: 'state',
    summary: 'Read the state at a node or a version',
    description: 'An unknown session reads `null` at version 0.',
    query: [
      node,
      { name: 'version', description: 'A historical version (time travel).', schema: { type: 'integer', minimum: 0 } },
      flag('notes', "`1` or `true` adds the node's notes (`notes`); not with `version`."),
    ],
    responses: { 200: { description: 'The state.', schema: 'StateView', headers: ['ETag'] } },
    problems: ['invalid_request', 'node_not_found', 'version_not_found', 'version_pruned', 'conflict'],
  },
  'PATCH /v1/sessions/{sid}/state': {
    tag: 'state',
    summary: 'Patch the state: a merge patch (RFC 7396) or JSON Patch operations (RFC 6902); creates the session',
    description:
      'With `application/json-patch+json` the body is an array of RFC 6902 operations, applied in order, all or nothing: one that cannot apply is `409 patch_conflict` naming its index (`operation`); a malformed one is `400 invalid_request`.',
    query: [node],
    body: statePatch,
    responses: { 200: { description: 'The state after the write.', schema: 'WriteResult', headers: ['ETag'] } },
    problems: [
      'invalid_request',
      'node_not_found',
      'version_mismatch',
      'patch_conflict',
      'state_too_large',
      'conflict',
      ...typedWriteProblems,
    ],
    tooLarge: 'state_too_large',
  },
  'PUT /v1/sessions/{sid}/state': {
    tag: 'state',
    summary: 'Replace the state (creates the session)',
    query: [node],
    body: stateWrite,
    responses: { 200: { description: 'The state after the write.', schema: 'WriteResult', headers: ['ETag'] } },
    problems: ['invalid_request', 'node_not_found', 'version_mismatch', 'state_too_large', 'conflict', ...typedWriteProblems],
    tooLarge: 'state_too_large',
  },
  'GET /v1/sessions/{sid}/versions': {
    tag: 'state',
    summary: 'History, newest first',
    query: [{ ...node, description: "Only the lineage of this node's current state." }, ...page, notesOf],
    responses: { 200: { description: 'One page.', schema: 'VersionList' } },
    problems: ['invalid_request', 'session_not_found', 'node_not_found', 'conflict'],
  },
  'GET /v1/sessions/{sid}/decisions': {
    tag: 'state',
    summary: 'Decisions, newest first: which agent decided each, and why',
    query: page,
    responses: { 200: { description: 'One page.', schema: 'DecisionList' } },
    problems: ['invalid_request', 'session_not_found', 'conflict'],
  },
  'GET /v1/sessions/{sid}/versions/{v}': {
    tag: 'state',
    summary: 'Read one version',
    responses: { 200: { description: 'The version.', schema: 'Version' } },
    problems: ['invalid_request', 'session_not_found', 'version_not_found', 'version_pruned', 'conflict'],
  },
  'PUT /v1/agents/{agentId}': {
    tag: 'agents',
    summary: 'Register or replace an agent',
    description:
      `\`config\` holds at most ${AGENT_CONFIG_LIMIT_BYTES / 1024} KiB of JSON; \`stateFields\` at most 200 fields and ` +
      `${AGENT_STATE_FIELDS_LIMIT_BYTES / 1024} KiB (${AGENT_STATE_FIELDS_LIMIT_BYTES.toLocaleString('en-US')} bytes) of JSON in all. ` +
      'Past either, `400 invalid_request` naming the `field` and its `limitBytes`; nothing is written.',
    body: { schema: agentBody, example: { worker: { url: 'module:examples/worker.ts' }, config: { model: 'small-fast' } } },
    responses: {
      201: { description: 'Registered.', schema: 'Agent', headers: ['Location'] },
      200: { description: 'Replaced.', schema: 'Agent' },
    },
    problems: ['invalid_request', 'agent_not_found', 'conflict'],
  },
  'GET /v1/agents/{agentId}': {
    tag: 'agents',
    summary: 'Read an agent (never its secret)',
    responses: { 200: { description: 'The agent.', schema: 'Agent' } },
    problems: ['agent_not_found'],
  },
  'GET /v1/agents': {
    tag: 'agents',
    summary: 'List agents',
    query: page,
    responses: { 200: { description: 'One page.', schema: 'AgentList' } },
    problems: ['invalid_request'],
  },
  'POST /v1/sessions/{sid}/decide': {
    tag: 'decide',
    summary: "Run one decision: the agent's worker sees the state and answers what to store",
    body: {
      schema: decideBody,
      example: { trigger: { type: 'client.messages', messages: [{ id: 'q1', role: 'user', content: 'hi' }] } },
    },
    responses: { 200: { description: 'The decision and the state after it.', schema: 'DecideResult' } },
    problems: [
      'invalid_request',
      'node_not_found',
      // The trigger's messages are appended by the rules of POST messages: an id taken under
      // another parent is the caller's conflict.
      'node_exists',
      'agent_not_found',
      'decision_in_progress',
      'conflict',
      'state_too_large',
      'worker_failed',
      'worker_timeout',
      // A replay (the same decisionId) of a decision whose version retention pruned.
      'version_pruned',
      ...typedWriteProblems,
    ],
  },
  'POST /v1/sessions/{sid}/commits': {
    tag: 'commits',
    summary: 'Apply keyed commands atomically (thread, run, profile, shared)',
    query: [node],
    body: {
      schema: commitBody,
      example: { commands: [{ key: 'votes', scope: 'thread', merge: 'commutative', set: { search: 1 } }], expectedVersion: 3 },
    },
    responses: { 200: { description: 'What the batch changed.', schema: 'CommitResult', headers: ['ETag'] } },
    problems: [
      'invalid_request',
      'node_not_found',
      'version_mismatch',
      'exclusive_conflict',
      'state_too_large',
      'conflict',
      ...typedWriteProblems,
    ],
  },
  'GET /v1/sessions/{sid}/runs/{runId}/state': {
    tag: 'commits',
    summary: "Read a run's document",
    responses: { 200: { description: 'The document (version 0 when never written).', schema: 'RunDocument', headers: ['ETag'] } },
    problems: [],
  },
  'GET /v1/profiles/{userId}/state': {
    tag: 'commits',
    summary: "Read a user's profile document",
    responses: { 200: { description: 'The document (version 0 when never written).', schema: 'ProfileDocument', headers: ['ETag'] } },
    problems: [],
  },
  'GET /v1/shared/state': {
    tag: 'commits',
    summary: "Read the tenant's shared document",
    responses: { 200: { description: 'The document (version 0 when never written).', schema: 'DocumentView', headers: ['ETag'] } },
    problems: [],
  },
  'POST /v1/webhooks': {
    tag: 'webhooks',
    summary: 'Register a webhook',
    body: { schema: createWebhookBody, example: { url: 'https://example.com/hook', secret: 's3cret', sessionId: 's1' } },
    responses: { 201: { description: 'Registered (the secret is never returned).', schema: 'Webhook', headers: ['Location'] } },
    problems: ['invalid_request'],
  },
  'GET /v1/webhooks': {
    tag: 'webhooks',
    summary: 'List webhooks',
    query: page,
    responses: { 200: { description: 'One page.', schema: 'WebhookList' } },
    problems: ['invalid_request'],
  },
  'GET /v1/webhooks/{webhookId}': {
    tag: 'webhooks',
    summary: 'Read a webhook',
    responses: { 200: { description: 'The webhook.', schema: 'Webhook' } },
    problems: ['not_found'],
  },
  'DELETE /v1/webhooks/{webhookId}': {
    tag: 'webhooks',
    summary: 'Delete a webhook',
    responses: { 204: { description: 'Deleted.' } },
    problems: ['not_found'],
  },
  'GET /v1/webhooks/{webhookId}/dead-letters': {
    tag: 'webhooks',
    summary: "A webhook's dead letters, in replay order",
    query: page,
    responses: { 200: { description: 'One page.', schema: 'DeadLetterList' } },
    problems: ['invalid_request', 'not_found'],
  },
  'POST /v1/webhooks/{webhookId}/dead-letters/replay': {
    tag: 'webhooks',
    summary: 'Replay dead letters, one attempt each, stopping at a failure',
    body: { schema: replayBody, optional: true, example: { limit: 25 } },
    responses: { 200: { description: 'What was delivered.', schema: 'ReplayResult' } },
    problems: ['invalid_request', 'not_found'],
  },
  'GET /v1/memory': {
    tag: 'memory',
    summary: 'List the namespaces under a prefix',
    description:
      'In path order. A namespace is listed as soon as the put of its first item answered, and leaves a moment after its last item.',
    query: [
      { name: 'prefix', description: 'A namespace path, `users/u1`; absent: every namespace.', schema: { type: 'string' } },
      {
        name: 'maxDepth',
        description: 'Cut each namespace to this many ids, 1–8, each cut listed once.',
        schema: { type: 'integer', minimum: 1, maximum: 8 },
      },
      ...page,
    ],
    responses: { 200: { description: 'One page.', schema: 'MemoryNamespaceList' } },
    problems: ['invalid_request'],
  },
  'POST /v1/memory/search': {
    tag: 'memory',
    summary: 'Search items under a namespace prefix, newest first, or by similarity to a vector',
    description:
      'Filters top-level fields by equality or `$eq $ne $gt $gte $lt $lte $in`. A page holds at most `limit` items and 4 MiB of values, and may hold fewer: follow `next`. With `vector` (1–4,096 numbers): the items whose embedding has its dimensions, ranked by cosine similarity (exact), each with `score`; one page of the best `limit`, no cursor. `includeEmbedding`: each item with its embedding. A put is found as soon as it answered.',
    body: {
      schema: searchMemoryBody,
      optional: true,
      example: { namespacePrefix: ['users', 'u1'], filter: { topic: 'travel', score: { $gte: 0.5 } }, limit: 20 },
    },
    responses: { 200: { description: 'One page.', schema: 'MemoryItemList' } },
    problems: ['invalid_request'],
  },
  'GET /v1/memory/versions': {
    tag: 'memory',
    summary: "An item's versions, newest first",
    description: 'The current version, then those it replaced (kept 30 days, a moment after each write).',
    query: [
      { name: 'namespace', description: 'The namespace path, `users/u1/facts`.', schema: { type: 'string' } },
      { name: 'key', description: "The item's key.", schema: { type: 'string' } },
      ...page,
    ],
    responses: { 200: { description: 'One page.', schema: 'MemoryVersionList' } },
    problems: ['invalid_request', 'not_found'],
  },
  'GET /v1/memory/{path+}': {
    tag: 'memory',
    summary: 'Read an item',
    query: [
      {
        name: 'includeEmbedding',
        description: '`true`: the item with its embedding (as stored: 32-bit floats).',
        schema: { type: 'boolean' },
      },
    ],
    responses: { 200: { description: 'The item.', schema: 'MemoryItem', headers: ['ETag'] } },
    problems: ['invalid_request', 'not_found'],
  },
  'PUT /v1/memory/{path+}': {
    tag: 'memory',
    summary: 'Put an item (replace it whole)',
    description:
      '`If-Match: "7"` or `*`, and `If-None-Match: *` (create only), else `412 version_mismatch`. `embedding`: your own embedding of the item (1–4,096 finite numbers, not all zero; the items of a namespace share their dimensions, else `400`), for searches with `vector`; stored as 32-bit floats, not part of the value.',
    body: { schema: putMemoryBody, example: { value: { food: 'vegetarian', since: 2019 }, ttlSeconds: 2592000 } },
    responses: {
      200: { description: 'Replaced.', schema: 'MemoryItem', headers: ['ETag'] },
      201: { description: 'Created (version 1).', schema: 'MemoryItem', headers: ['ETag', 'Location'] },
    },
    problems: ['version_mismatch'],
  },
  'DELETE /v1/memory/{path+}': {
    tag: 'memory',
    summary: 'Delete an item',
    description: '`204` also when there was none. With `If-Match`, only at that version.',
    responses: { 204: { description: 'Deleted (or there was none).' } },
    problems: ['invalid_request', 'version_mismatch'],
  },

  'GET /': {
    tag: 'inspector',
    summary: 'The inspector page',
    public: true,
    responses: { 200: { description: 'The page.', contentType: 'text/html' } },
    problems: ['not_found'],
  },
  'GET /inspector/{file}': {
    tag: 'inspector',
    summary: "The inspector page's scripts, styles and config.json",
    public: true,
    responses: { 200: { description: 'The file.', contentType: '*/*' } },
    problems: ['not_found'],
  },
};
