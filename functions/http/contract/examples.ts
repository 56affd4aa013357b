import type * as z from 'zod';
import {
  AgentStateError,
  type ErrorCode,
  type Problem as ProblemDocument,
  type ProblemFieldsOf,
  toProblem,
} from '../../core/kernel/errors.js';
import type { ComponentName, components } from './schemas.js';

/**
 * What the OpenAPI document (document.ts) shows as each answer's example: one story (session
 * `s1` of user `u-42`, the agent `planner`), so that a reader of Swagger UI or Redoc sees values
 * that fit together. Each example is typed as its schema's output, so tsc refuses one that
 * drifts from the schema, and `redocly lint` (no-invalid-media-type-examples) checks it again
 * against the JSON Schema the document holds. document.ts refuses to build an answer whose
 * schema has no example here: a new answer schema takes one, like a new path parameter does.
 */

type Example<Name extends ComponentName> = z.output<(typeof components)[Name]>;
type AnswerExamples = { [Name in Exclude<ComponentName, 'Json' | 'Problem'>]?: Example<Name> };

const at = '2025-06-01T10:00:00.000Z';
const later = '2025-06-01T10:05:00.000Z';

const session = {
  sessionId: 's1',
  agentId: 'planner',
  userId: 'u-42',
  metadata: { channel: 'web' },
  createdAt: at,
  updatedAt: later,
  ttlSeconds: 604800,
  expiresAt: '2025-07-08T10:01:00.000Z',
  retention: null,
} satisfies Example<'SessionSummary'>;
const node = { id: 'a1', parentId: 'u1', depth: 2, role: 'assistant', stateVersion: 2, createdAt: later } satisfies Example<'MessageNode'>;
const version = {
  version: 2,
  node: 'a1',
  prevVersion: 1,
  cause: 'patch',
  author: 'planner',
  createdAt: later,
  state: { model: 'fast', turns: 1 },
  agent: { model: 'small-fast' },
} satisfies Example<'Version'>;
const agent = {
  agentId: 'planner',
  parentId: null,
  worker: { url: 'module:examples/worker.ts', timeoutMs: null, hasSecret: false },
  config: { model: 'small-fast' },
  stateFields: null,
  documents: null,
  lifetime: { ttlSeconds: 604800 },
  createdAt: at,
  updatedAt: at,
} satisfies Example<'Agent'>;
/** A whole `state.changed` event (test/unit/contract-check.test.ts starts from it too). */
export const stateChangedExample = {
  id: 's1:2',
  type: 'state.changed',
  sessionId: 's1',
  node: 'a1',
  version: 2,
  prevVersion: 1,
  cause: 'patch',
  author: 'planner',
  decisionId: null,
  next: { model: 'fast', turns: 1 },
  prev: { model: 'fast', turns: 0 },
  patch: { turns: 1 },
  occurredAt: later,
} satisfies Example<'StateChangedEvent'>;
const webhook = {
  id: '0197a1c2-8d4e-7b21-9f3a-5c6d7e8f9a0b',
  url: 'https://example.com/hook',
  sessionId: 's1',
  hasSecret: true,
  createdAt: at,
} satisfies Example<'Webhook'>;
const memoryItem = {
  namespace: ['users', 'u-42', 'facts'],
  key: 'diet',
  value: { food: 'vegetarian', since: 2019 },
  version: 2,
  createdAt: at,
  updatedAt: later,
  expiresAt: '2025-07-01T10:05:00.000Z',
} satisfies Example<'MemoryItem'>;
const cursor = 'eyJzayI6IlMiLCJwayI6InMwIn0';

export const answerExamples: AnswerExamples = {
  Health: { ok: true },
  Session: { ...session, updatedAt: at, head: 'root', version: 0 },
  SessionList: { sessions: [session], next: cursor },
  MessagePath: {
    messages: [
      { id: 'u1', parentId: 'root', role: 'user', content: 'Plan a trip' },
      { id: 'a1', parentId: 'u1', role: 'assistant', content: 'Where to?' },
    ],
    ancestry: ['root', 'u1', 'a1'],
  },
  MessageNode: node,
  AppendResult: { nodes: [{ ...node, id: 'u1', parentId: 'root', depth: 1, role: 'user' }, node], head: 'a1' },
  Tree: {
    head: 'a1',
    nodes: [
      { id: 'root', parentId: null, depth: 0, role: null, stateVersion: 0, preview: null },
      { id: 'u1', parentId: 'root', depth: 1, role: 'user', stateVersion: 1, preview: 'Plan a trip' },
      { id: 'a1', parentId: 'u1', depth: 2, role: 'assistant', stateVersion: 2, preview: 'Where to?' },
    ],
  },
  NodePage: {
    head: 'a1',
    version: 2,
    nodes: [{ ...node, id: 'u1', parentId: 'root', depth: 1, role: 'user', stateVersion: 1 }, node],
    next: cursor,
  },
  HeadResult: { head: 'u1' },
  NoteResult: { sessionId: 's1', node: 'a1', key: 'task-1' },
  NotePage: {
    notes: { a1: { 'task-1': { channel: 'answer', value: 42 }, 'task-2': { channel: 'answer', value: 7 } } },
    next: 'eyJub3RlcyI6MX0',
  },
  StateView: {
    sessionId: 's1',
    node: 'a1',
    version: 2,
    state: { model: 'fast', turns: 1 },
    agent: { model: 'small-fast' },
    updatedAt: later,
  },
  WriteResult: { sessionId: 's1', node: 'a1', version: 2, prevVersion: 1, state: { model: 'fast', turns: 1 }, changed: true },
  Version: version,
  VersionList: {
    versions: [version, { ...version, version: 1, node: 'u1', prevVersion: 0, state: { model: 'fast', turns: 0 }, createdAt: at }],
  },
  DecisionList: {
    decisions: [
      {
        decisionId: 'd2',
        agentId: 'billing',
        routedFrom: 'support',
        routing: [{ from: 'support', to: 'billing', via: 'route', index: 0 }],
        version: 4,
        createdAt: later,
      },
      { decisionId: 'd1', agentId: 'support', routedFrom: null, routing: [], version: 2, createdAt: at },
    ],
  },
  Agent: agent,
  AgentList: { agents: [agent], next: cursor },
  DecideResult: {
    decisionId: 'd1',
    decision: { state: { turns: 1 } },
    state: { turns: 1 },
    agent: { model: 'small-fast' },
    version: 2,
    changed: true,
    head: 'a1',
  },
  CommitResult: {
    sessionId: 's1',
    node: 'a1',
    version: 4,
    state: { votes: { search: 3 } },
    changed: true,
    shared: { version: 7, state: { announcements: ['maintenance at noon'] }, updatedAt: later },
  },
  DocumentView: { version: 7, state: { announcements: ['maintenance at noon'] }, updatedAt: later },
  RunDocument: { sessionId: 's1', runId: 'run-1', version: 1, state: { step: 'search' }, updatedAt: later },
  ProfileDocument: { userId: 'u-42', version: 3, state: { language: 'en' }, updatedAt: later },
  Webhook: webhook,
  WebhookList: { webhooks: [webhook] },
  DeadLetterList: {
    deadLetters: [
      {
        eventId: 's1:2',
        sessionId: 's1',
        version: 2,
        attempts: 3,
        lastError: 'HTTP 500',
        firstFailedAt: '2025-06-01T10:05:02.000Z',
        lastFailedAt: '2025-06-01T10:05:03.300Z',
        event: stateChangedExample,
      },
    ],
  },
  ReplayResult: { delivered: 0, failed: { eventId: 's1:2', error: 'HTTP 500' }, remaining: true },
  ErasureStarted: { erasureId: '0197a1c2-8d4e-7b21-9f3a-5c6d7e8f9a0c' },
  Erasure: {
    erasureId: '0197a1c2-8d4e-7b21-9f3a-5c6d7e8f9a0c',
    status: 'done',
    sessions: 12,
    memoryItems: 40,
    documents: 1,
    createdAt: at,
    finishedAt: later,
  },
  MemoryItem: memoryItem,
  MemoryItemList: { items: [memoryItem], next: cursor },
  MemoryNamespaceList: {
    namespaces: [
      ['users', 'u-42', 'facts'],
      ['users', 'u-42', 'trips'],
    ],
  },
  MemoryVersionList: { versions: [memoryItem, { ...memoryItem, version: 1, value: { food: 'vegan', since: 2019 }, updatedAt: at }] },
};

/** For each error code, what causes it and the members it adds (docs/api.md §9). */
const problemCauses: { [C in ErrorCode]: { detail: string; extras?: ProblemFieldsOf<C> } } = {
  invalid_json: { detail: 'the body is not valid JSON: unexpected end of input at position 12' },
  invalid_request: { detail: 'limit must be an integer from 1 to 500', extras: { field: 'limit' } },
  invalid_id: {
    detail: 'sessionId must be 1–128 characters of A-Z a-z 0-9 . _ : ~ @ -, other than . and ..',
    extras: { field: 'sessionId' },
  },
  unauthorized: { detail: 'send a valid API key as "Authorization: Bearer <key>"' },
  forbidden: { detail: 'this key acts as an agent: send X-Agent-Id with one of its agents', extras: { agents: ['planner'] } },
  field_forbidden: { detail: 'may not write budget', extras: { fields: ['budget'] } },
  not_found: {
    detail: 'webhook 0197a1c2-8d4e-7b21-9f3a-5c6d7e8f9a0b does not exist',
    extras: { webhookId: '0197a1c2-8d4e-7b21-9f3a-5c6d7e8f9a0b' },
  },
  session_not_found: { detail: 'session s1 does not exist', extras: { sessionId: 's1' } },
  node_not_found: { detail: 'node a9 does not exist', extras: { nodeId: 'a9' } },
  version_not_found: { detail: 'version 9 does not exist', extras: { version: 9 } },
  version_pruned: { detail: "version 3 was pruned by the session's retention", extras: { version: 3 } },
  agent_not_found: { detail: 'agent planner does not exist', extras: { agentId: 'planner' } },
  session_exists: { detail: 'session s1 already exists', extras: { sessionId: 's1' } },
  node_exists: { detail: 'node a1 appears twice in one append', extras: { nodeId: 'a1' } },
  decision_in_progress: { detail: 'another decision is running in session s1', extras: { sessionId: 's1' } },
  exclusive_conflict: {
    detail: 'thread:winner is exclusive and was set twice in one batch; nothing was written',
    extras: { key: 'winner', scope: 'thread' },
  },
  patch_conflict: {
    detail: 'operation 1 cannot apply at "/budget": there is no member budget',
    extras: { operation: 1, pointer: '/budget' },
  },
  conflict: { detail: 'the session is changing too fast to delete; try again', extras: { attempts: 8 } },
  version_mismatch: { detail: 'the state at node a1 is at version 2, not 1', extras: { currentVersion: 2 } },
  state_too_large: {
    detail: 'the state would be 4194305 bytes of JSON; the limit is 4194304',
    extras: { limitBytes: 4194304, sizeBytes: 4194305 },
  },
  payload_too_large: { detail: 'the body is 1048577 bytes; the body limit is 1048576 bytes', extras: { limitBytes: 1048576 } },
  unsupported_media_type: { detail: 'JSON bodies are UTF-8; charset=latin1 is not supported' },
  validation_failed: {
    detail: 'budget must be a number',
    extras: { fields: [{ field: 'budget', problem: 'must be a number' }] },
  },
  unknown_field: { detail: 'undeclared field mood', extras: { fields: ['mood'] } },
  idempotency_key_reused: { detail: 'this Idempotency-Key was used with a different request in the last 24 hours' },
  throttled: { detail: 'the table is over its request rate; retry with backoff' },
  internal: { detail: '' },
  worker_failed: { detail: 'the worker answered HTTP 500' },
  unavailable: { detail: '' },
  worker_timeout: { detail: 'the worker did not answer within 30000 ms' },
};

/** A problem document as the server writes it for `code` (5xx other than the worker's: the title). */
export function problemExample(code: ErrorCode): ProblemDocument {
  const cause = problemCauses[code];
  return toProblem(new AgentStateError(code, cause.detail, cause.extras));
}
