import { type AttributeValue, type DynamoDBClient, QueryCommand } from '@aws-sdk/client-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { type InProcessRequest, type InProcessResponse, invoke } from '../../bench/invoke.js';
import { canonicalJson, type Json, MAX_JSON_DEPTH } from '../../functions/core/json/json.js';
import { errorStatus } from '../../functions/core/kernel/errors.js';
import type { SessionService } from '../../functions/core/sessions/session-service.js';
import { type Route, routes } from '../../functions/http/contract/routes.js';
import { dependenciesFor, useDependencies } from '../../functions/http/dependencies.js';
import { keysFromEnv } from '../../functions/http/edge/auth.js';
import { handlers } from '../../functions/http/index.js';
import { localDynamoDbClient } from '../../functions/local/dynamodb-local.js';
import { createStores } from '../../functions/store/index.js';
import { isFence, readLogItem, tipOf } from '../../functions/store/log/log-items.js';
import { departure } from '../../functions/store/log/node-index.js';
import * as keys from '../../functions/store/table/keys.js';
import { createTestTable, dynamoEndpoint } from '../helpers/dynamodb.js';

/**
 * Arbitrary requests against the real handlers, in-process, on a real table: whatever comes
 * in, the answer is a documented status, errors are problem+json with a code of API.md
 * section 10, nothing answers 500, and a refused request writes nothing (but the index the
 * session's newest change owed, which an append puts ahead: `owedByNewestChange`).
 *
 * Requests go through the local server's own event builder (bench/invoke.ts), so they are
 * exactly what `npm start` would hand the handlers for the same bytes on the wire.
 */

// Every keyed route group (the inspector's files are static), memory items included. Decide never calls a real worker:
// the fuzzer's own invoker answers for every worker, with whatever a worker might answer.
const GROUPS = new Set(['health', 'sessions', 'tree', 'state', 'agents', 'decide', 'commits', 'webhooks', 'memory']);
const fuzzedRoutes = routes.filter((route) => GROUPS.has(route.group));

/** API.md section 10: every code a client may see, and its status. */
const CONTRACT_CODES: Record<string, number> = {
  invalid_json: 400,
  invalid_request: 400,
  invalid_id: 400,
  unauthorized: 401,
  forbidden: 403,
  field_forbidden: 403,
  not_found: 404,
  session_not_found: 404,
  node_not_found: 404,
  version_not_found: 404,
  agent_not_found: 404,
  session_exists: 409,
  node_exists: 409,
  decision_in_progress: 409,
  exclusive_conflict: 409,
  conflict: 409,
  version_pruned: 410,
  version_mismatch: 412,
  state_too_large: 413,
  payload_too_large: 413,
  unsupported_media_type: 415,
  validation_failed: 422,
  unknown_field: 422,
  idempotency_key_reused: 422,
  worker_failed: 502,
};
const DOCUMENTED_STATUSES = new Set([200, 201, 202, 204, 400, 401, 403, 404, 409, 412, 413, 415, 422, 502]);

const TENANT = 'fuzz';
const OTHER = 'other';
const KEYS = `${TENANT}:fuzz-key,${OTHER}:other-key`;
/** A key of the fuzz tenant limited to `planner` (and so to its subtree in the registry). */
const LIMITED_KEY = 'limited-key';
const fromEnv = keysFromEnv(KEYS);
const resolveKey = async (apiKey: string) => (apiKey === LIMITED_KEY ? { tenant: TENANT, agents: ['planner'] } : fromEnv(apiKey));
/** What the fuzzer's worker answers: a DecisionResponse, or anything else a worker might say. */
const workerAnswers: unknown[] = [{}, { state: { turns: 2 } }, { state: null, messages: [{ role: 'assistant', content: 'ok' }] }, [], 'no'];
let workerCalls = 0;
/** Memory namespaces whose items are watched: planner's, billing's (no limited key of planner's may touch it), shared, and others. */
const MEMORY_NAMESPACES = [
  ['agents', 'planner', 'notes'],
  ['agents', 'billing', 'notes'],
  ['shared', 'x'],
  ['users', 'u1'],
];
/** Sessions whose every change is watched; fuzzed ids are usually invalid, so these are mixed in. */
const TRACKED = ['seeded', 'fresh', 'spare'];
const TRACKED_SCOPES = [TENANT, OTHER].flatMap((tenant) => TRACKED.map((sessionId) => ({ tenant, sessionId })));

let service: SessionService;
let client: DynamoDBClient;
let tableName: string;
const prototypeKeysBefore = {
  object: Object.getOwnPropertyNames(Object.prototype).sort(),
  array: Object.getOwnPropertyNames(Array.prototype).sort(),
  function: Object.getOwnPropertyNames(Function.prototype).sort(),
};

beforeAll(async () => {
  tableName = await createTestTable('fuzz');
  client = localDynamoDbClient(dynamoEndpoint());
  const deps = dependenciesFor(createStores(client, tableName), {
    // No change hook runs here to close an erasure, so a `DELETE /v1/users/{id}` would wait its
    // whole 12 s for nothing; at 0 it answers its documented `409` (erasure still closing) at once.
    env: { ...process.env, AGENTSTATE_ERASURE_WAIT_MS: '0' },
    resolveKey,
    invokeWorker: async () => workerAnswers[workerCalls++ % workerAnswers.length],
  });
  useDependencies(deps);
  service = deps.sessions;

  // The registry a limited key must not cross: planner (its own) and billing (another agent,
  // with a secret and a private field), and a webhook of billing's.
  await deps.agents.putAgent(TENANT, 'planner', { config: { role: 'plans' } });
  await deps.agents.putAgent(TENANT, 'billing', {
    worker: { url: 'https://billing.example.com/decide', secret: 'billing-secret' },
    stateFields: { card: { type: 'string', read: 'private', write: 'private' } },
  });

  // A memory item of billing's, which holds what its agent alone may read.
  const seededMemory = await invoke(handlers, {
    method: 'PUT',
    url: '/v1/memory/agents/billing/notes/k',
    headers: [
      ['authorization', 'Bearer fuzz-key'],
      ['content-type', 'application/json'],
    ],
    body: JSON.stringify({ value: { memo: 'billing-memo' } }),
  });
  expect(seededMemory.status).toBe(201);

  // A session with a small tree, a branch and some history for the fuzzer to poke at.
  const seeded = { tenant: TENANT, sessionId: 'seeded' };
  await service.replaceState(seeded, { turns: 0 });
  await service.appendMessages(seeded, {
    messages: [
      { id: 'u1', role: 'user', content: 'hi' },
      { id: 'a1', role: 'assistant', content: 'hello' },
    ],
  });
  await service.patchState(seeded, { turns: 1 });
  await service.appendMessages(seeded, { parentId: 'u1', messages: [{ id: 'a2', role: 'assistant', content: 'hey' }] });
  await service.replaceState({ tenant: OTHER, sessionId: 'seeded' }, { other: true });
});

afterAll(() => {
  useDependencies(undefined);
  client.destroy();
});

// ---- arbitraries --------------------------------------------------------------------------

const idChars = fc.constantFrom(...'ABCXYZabcxyz0189._:~@-'.split(''));
const validId = fc.string({ unit: idChars, minLength: 1, maxLength: 12 });
const nastyStrings = fc.constantFrom(
  '',
  'root',
  '__proto__',
  'constructor',
  'prototype',
  'toString',
  'hasOwnProperty',
  'a'.repeat(128),
  'a'.repeat(129),
  '..',
  '%',
  '%zz',
  '%2F',
  'a/b',
  'a#b',
  'a b',
  '\u0000',
  '\ud800',
  '\udfff\ud800',
  '😀',
  '\u202e',
  'é',
  '0',
  '-1',
  '1e3',
  '9007199254740993',
  '999999999999999',
  '1000000000000',
  'null',
  'true',
);
const idLike = fc.oneof(
  { weight: 8, arbitrary: fc.constantFrom(...TRACKED, 'u1', 'a1', 'a2', 'root', 'missing') },
  { weight: 2, arbitrary: validId },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 20 }) },
  { weight: 1, arbitrary: nastyStrings },
);
const numberLike = fc.oneof(fc.nat({ max: 12 }).map(String), fc.integer().map(String), nastyStrings, fc.string({ maxLength: 6 }));

/** Header values as HTTP can carry them: no CR, LF or NUL. */
const headerValue = (arbitrary: fc.Arbitrary<string>) => arbitrary.map((value) => value.replace(/[\r\n\0]/g, ''));

/** Mostly absent, sometimes one of `values`. */
const sometimes = (presentWeight: number, values: fc.Arbitrary<string>) =>
  fc.oneof({ weight: 10 - presentWeight, arbitrary: fc.constant(undefined) }, { weight: presentWeight, arbitrary: values });

const headersArb = fc
  .record({
    authorization: fc.oneof(
      { weight: 10, arbitrary: fc.constant('Bearer fuzz-key') },
      { weight: 2, arbitrary: fc.constant('Bearer other-key') },
      { weight: 4, arbitrary: fc.constant(`Bearer ${LIMITED_KEY}`) },
      {
        weight: 1,
        arbitrary: fc.constantFrom('bearer fuzz-key', 'Bearer  fuzz-key ', 'Bearer', 'Basic Zm9vOmJhcg==', 'Bearer fuzz-key, Bearer x'),
      },
      { weight: 1, arbitrary: headerValue(fc.string({ maxLength: 30 })) },
      { weight: 1, arbitrary: fc.constant(undefined) },
    ),
    'content-type': fc.oneof(
      { weight: 12, arbitrary: fc.constantFrom('application/json', 'application/merge-patch+json', 'application/json; charset=utf-8') },
      {
        weight: 1,
        arbitrary: fc.constantFrom(
          'text/plain',
          'application/x-www-form-urlencoded',
          'application/jsonx',
          'APPLICATION/JSON',
          'application/vnd.api+json',
          ';',
          'application/json; charset=latin1',
        ),
      },
      { weight: 1, arbitrary: headerValue(fc.string({ maxLength: 30 })) },
      { weight: 1, arbitrary: fc.constant(undefined) },
    ),
    'if-match': sometimes(
      3,
      fc.oneof(
        fc.constantFrom('"0"', '"1"', '"2"', 'W/"2"', '3', '*', '"1", "2"', '""', '"-1"', '"99999999999999999999"'),
        headerValue(fc.string({ maxLength: 12 })),
      ),
    ),
    'idempotency-key': sometimes(
      3,
      fc.oneof(fc.constantFrom('key-1', 'key-2', 'key-3'), headerValue(fc.string({ maxLength: 20 })), fc.constant('x'.repeat(256))),
    ),
    'x-agent-id': sometimes(
      4,
      fc.oneof(
        { weight: 3, arbitrary: fc.constantFrom('planner', 'billing', 'helper') },
        validId,
        headerValue(fc.string({ maxLength: 12 })),
        nastyStrings.map((value) => value.replace(/[\r\n\0]/g, '')),
      ),
    ),
    __proto__: sometimes(1, fc.constantFrom('{"polluted":true}', 'x')),
    constructor: sometimes(1, fc.constant('x')),
    toString: sometimes(1, fc.constant('x')),
  })
  .map((headers) => Object.entries(headers).filter((entry): entry is [string, string] => entry[1] !== undefined));

const deep = (depth: number, kind: 'array' | 'object') =>
  kind === 'array' ? '['.repeat(depth) + ']'.repeat(depth) : `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;

const pollution = fc.constantFrom(
  '{"__proto__":{"polluted":true}}',
  '{"constructor":{"prototype":{"polluted":true}}}',
  '{"a":{"__proto__":{"polluted":true}},"__proto__":null}',
  '{"messages":[{"role":"user","__proto__":{"polluted":true},"constructor":{"prototype":{"polluted":true}}}]}',
  '{"metadata":{"__proto__":{"polluted":true}},"sessionId":"spare"}',
  '{"nodeId":"__proto__"}',
  '{"__proto__":{"nodeId":"u1"}}',
);

const agentName = fc.oneof({ weight: 4, arbitrary: fc.constantFrom('planner', 'billing', 'helper') }, { weight: 1, arbitrary: idLike });

/**
 * Bodies shaped as the writes of agents, decide, commits and webhooks take them, so that
 * those get past their schemas and reach the boundaries behind them (by route group).
 */
const shapedBodyArbs: Record<string, fc.Arbitrary<unknown>> = {
  // PUT /v1/agents/{agentId}
  agents: fc.record(
    {
      parentId: fc.oneof(agentName, fc.constant(null)),
      config: fc.jsonValue({ maxDepth: 2 }),
      worker: fc.oneof(
        fc.constant(null),
        fc.record({
          url: fc.constantFrom('https://worker.example.com/d', 'module:/etc/passwd', 'http://127.0.0.1:9/w'),
          secret: fc.string({ maxLength: 8 }),
        }),
      ),
      stateFields: fc.constantFrom({ card: { type: 'string', read: 'public', write: 'public' } }, { plan: { type: 'string' } }),
    },
    { requiredKeys: [] },
  ),
  // POST …/decide
  decide: fc.record(
    {
      trigger: fc.constantFrom({ type: 'session.start' }, { type: 'client.messages', messages: [{ role: 'user', content: 'hi' }] }),
      agentId: agentName,
    },
    { requiredKeys: ['trigger'] },
  ),
  // POST …/commits
  commits: fc.record(
    {
      commands: fc.array(
        fc.record({
          key: fc.constantFrom('card', 'plan', 'notes'),
          scope: fc.constantFrom('thread', 'run', 'profile', 'shared'),
          merge: fc.constantFrom('disjoint', 'commutative', 'exclusive'),
          set: fc.oneof(fc.string({ maxLength: 6 }), fc.integer()),
        }),
        { minLength: 1, maxLength: 3 },
      ),
      runId: fc.constantFrom('r1', 'r2'),
      userId: fc.constantFrom('u1', 'u2'),
    },
    { requiredKeys: ['commands'] },
  ),
  // PUT /v1/memory/{path+} and POST /v1/memory/search
  memory: fc.oneof(
    fc.record(
      { value: fc.record({ memo: fc.string({ maxLength: 6 }), n: fc.integer() }), ttlSeconds: fc.integer({ min: -1, max: 100 }) },
      { requiredKeys: ['value'] },
    ),
    fc.record(
      {
        namespacePrefix: fc.constantFrom(...MEMORY_NAMESPACES, ['agents'], []),
        filter: fc.constantFrom({}, { memo: 'billing-memo' }),
        limit: fc.integer({ min: 0, max: 3 }),
      },
      { requiredKeys: ['namespacePrefix'] },
    ),
  ),
  // POST /v1/webhooks
  webhooks: fc.record(
    {
      url: fc.constantFrom('http://127.0.0.1:9/hook', 'https://hooks.example.com/h', 'http://10.0.0.1/'),
      secret: fc.string({ minLength: 1, maxLength: 8 }),
      sessionId: fc.constantFrom(...TRACKED),
      agentId: agentName,
    },
    { requiredKeys: ['url'] },
  ),
};
const shapedBodyArb = fc.record(shapedBodyArbs);

const bodyArb: fc.Arbitrary<string | undefined> = fc.oneof(
  { weight: 2, arbitrary: fc.constant(undefined) },
  { weight: 4, arbitrary: fc.jsonValue({ maxDepth: 4, stringUnit: 'binary' }).map((value) => JSON.stringify(value)) },
  {
    weight: 3,
    arbitrary: fc
      .record(
        {
          messages: fc.array(
            fc.record(
              { role: fc.oneof(fc.constantFrom('user', 'assistant', ''), fc.string()), id: idLike, content: fc.jsonValue({ maxDepth: 2 }) },
              { requiredKeys: [] },
            ),
            { maxLength: 4 },
          ),
          parentId: idLike,
          nodeId: idLike,
          sessionId: idLike,
          agentId: fc.oneof(idLike, fc.constant(null)),
          metadata: fc.oneof(fc.dictionary(fc.string(), fc.jsonValue({ maxDepth: 2 })), fc.jsonValue({ maxDepth: 1 })),
        },
        { requiredKeys: [] },
      )
      .map((value) => JSON.stringify(value)),
  },
  // Agents, decide, commits and webhooks: bodies of their own shape, aimed at the seeded registry.
  {
    weight: 3,
    arbitrary: fc
      .record(
        {
          parentId: fc.oneof(fc.constantFrom('planner', 'billing', 'helper', null), idLike),
          worker: fc.oneof(
            fc.constant(null),
            fc.record(
              {
                url: fc.constantFrom(
                  'https://worker.example.com/d',
                  'module:examples/worker.ts',
                  'module:/etc/passwd',
                  'http://10.0.0.1/',
                  '',
                ),
                secret: fc.oneof(fc.string({ maxLength: 8 }), fc.constant(null)),
                timeoutMs: fc.oneof(fc.integer(), fc.constant(null)),
              },
              { requiredKeys: ['url'] },
            ),
          ),
          config: fc.jsonValue({ maxDepth: 2 }),
          stateFields: fc.oneof(
            fc.constant(null),
            fc.constant({ card: { type: 'string', read: 'public', write: 'public' } }),
            fc.dictionary(
              fc.string({ maxLength: 6 }),
              fc.record({ type: fc.constantFrom('string', 'number', 'x'), read: fc.constantFrom('public', 'private') }),
            ),
          ),
          trigger: fc.oneof(
            fc.record({ type: fc.constantFrom('session.start', 'client.messages', '') }),
            fc.record({
              type: fc.constant('client.messages'),
              messages: fc.array(fc.record({ role: fc.constantFrom('user', '') }), { maxLength: 3 }),
            }),
          ),
          agentId: fc.oneof(fc.constantFrom('planner', 'billing', 'helper'), idLike),
          decisionId: idLike,
          proposed: fc.dictionary(fc.string({ maxLength: 5 }), fc.jsonValue({ maxDepth: 2 })),
          commands: fc.array(
            fc.record(
              {
                key: fc.oneof(fc.constantFrom('card', 'plan'), fc.string({ maxLength: 6 })),
                scope: fc.constantFrom('thread', 'run', 'profile', 'shared', 'x'),
                merge: fc.constantFrom('disjoint', 'commutative', 'exclusive', 'x'),
                set: fc.jsonValue({ maxDepth: 2 }),
              },
              { requiredKeys: [] },
            ),
            { maxLength: 4 },
          ),
          runId: idLike,
          url: fc.constantFrom('http://127.0.0.1:9/hook', 'https://hooks.example.com/h', 'http://10.0.0.1/', 'ftp://x', ''),
          secret: fc.string({ maxLength: 8 }),
        },
        { requiredKeys: [] },
      )
      .map((value) => JSON.stringify(value)),
  },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 40 }) },
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.integer({ min: 1, max: 2000 }), fc.constantFrom('array' as const, 'object' as const))
      .map(([depth, kind]) => deep(depth, kind)),
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      '1e400',
      '-1e400',
      '{"n":1e309}',
      '123456789012345678901234567890',
      '{"n":-0}',
      '0.1e-400',
      '[1e308,2e308]',
      '"\\ud800"',
      '{"\\udc00":"\\ud800"}',
      '\ufeff{}',
      '{"a":1,"a":2}',
    ),
  },
  { weight: 1, arbitrary: pollution },
);

const queryArb = fc.oneof(
  fc
    .array(
      fc.tuple(
        fc.oneof(
          { weight: 4, arbitrary: fc.constantFrom('limit', 'cursor', 'node', 'version') },
          { weight: 1, arbitrary: fc.constantFrom('__proto__', 'constructor', 'toString') },
          { weight: 1, arbitrary: fc.string({ maxLength: 6 }) },
        ),
        fc.oneof(numberLike, idLike, fc.constantFrom('eyJsIjoxfQ', 'eyJwayI6IngiLCJzayI6InkifQ', 'e30', '')),
      ),
      { maxLength: 3 },
    )
    .map((pairs) => new URLSearchParams(pairs).toString()),
  // Not encoded by anyone: what a careless client sends.
  fc.string({ maxLength: 16 }).map((raw) => raw.replace(/[#\s]/g, '')),
);

/** Percent-encodes the UTF-8 bytes of `value`, as a client would put it on the wire (a lone surrogate becomes U+FFFD). */
function encodeSegment(value: string): string {
  return [...Buffer.from(value, 'utf8')]
    .map((byte) =>
      /[A-Za-z0-9._~-]/.test(String.fromCharCode(byte))
        ? String.fromCharCode(byte)
        : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`,
    )
    .join('');
}
const rawSegmentArb = fc.string({ maxLength: 10 }).map((value) => value.replace(/[/?#\s]/g, ''));

/**
 * One request in five is well formed: the tenant's key, JSON, a tracked session and a body
 * its route accepts. The rest of the generator mostly meets the first checks (key, media type,
 * ids, body shape); these reach the operations themselves (answers, lost preconditions, missing
 * sessions), so every run covers them rather than only a lucky one.
 */
const WELL_FORMED_BODIES: Record<string, fc.Arbitrary<string | undefined>> = {
  'POST /v1/sessions/{sid}/messages': fc.constantFrom(
    '{"messages":[{"role":"user","content":"hi"}]}',
    '{"parentId":"u1","messages":[{"role":"assistant","content":"ok"}]}',
    '{"parentId":"missing","messages":[{"role":"user","content":"lost"}]}',
  ),
  'PATCH /v1/sessions/{sid}/state': fc.integer({ max: 9, min: 0 }).map((n) => JSON.stringify({ turns: n })),
  'PUT /v1/sessions/{sid}/state': fc.integer({ max: 9, min: 0 }).map((n) => JSON.stringify({ turns: n, replaced: true })),
  'PUT /v1/sessions/{sid}/head': fc.constantFrom('{"nodeId":"u1"}', '{"nodeId":"a2"}', '{"nodeId":"missing"}'),
  'POST /v1/sessions': fc.constantFrom('{"sessionId":"spare"}', '{"sessionId":"fresh","metadata":{"k":1}}'),
  'POST /v1/sessions/{sid}/commits': fc.constantFrom(
    '{"commands":[{"key":"plan","scope":"thread","merge":"disjoint","set":"a"}]}',
    '{"commands":[{"key":"tally","scope":"thread","merge":"commutative","set":{"n":1}}]}',
  ),
  'POST /v1/sessions/{sid}/decide': fc.constantFrom(
    '{"trigger":{"type":"tick"},"agentId":"planner"}',
    '{"trigger":{"type":"session.start"}}',
  ),
};
const wellFormedArb = fc.record({
  sid: fc.constantFrom(...TRACKED, 'missing'),
  ifMatch: sometimes(3, fc.constantFrom('"1"', '"2"', '"99"')),
  bodies: fc.record(WELL_FORMED_BODIES),
});

const requestArb: fc.Arbitrary<{ route: Route; request: InProcessRequest }> = fc
  .record({
    wellFormed: fc.oneof({ weight: 4, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: wellFormedArb }),
    route: fc.constantFrom(...fuzzedRoutes),
    sid: idLike,
    nid: idLike,
    v: numberLike,
    other: fc.oneof({ weight: 3, arbitrary: fc.constantFrom('planner', 'billing', 'helper') }, { weight: 2, arbitrary: idLike }),
    memoryPath: fc.oneof(
      { weight: 4, arbitrary: fc.constantFrom(...MEMORY_NAMESPACES).map((namespace) => `${namespace.join('/')}/k`) },
      { weight: 1, arbitrary: fc.array(idLike, { maxLength: 10 }).map((segments) => segments.map(encodeSegment).join('/')) },
    ),
    raw: fc.boolean(),
    rawSegment: rawSegmentArb,
    query: fc.option(queryArb, { nil: undefined }),
    headers: headersArb,
    body: bodyArb,
    // Half the writes of agents, decide, commits and webhooks get a body of their own shape.
    shaped: fc.boolean(),
    shapedBodies: shapedBodyArb,
  })
  .map(({ wellFormed, route, sid, nid, v, other, memoryPath, raw, rawSegment, query, headers, body: anyBody, shaped, shapedBodies }) => {
    const wellFormedBody = wellFormed?.bodies[`${route.method} ${route.path}`];
    if (wellFormed && (route.method === 'GET' || route.method === 'DELETE' || wellFormedBody !== undefined)) {
      const path = route.path.replace('{sid}', wellFormed.sid).replace('{nid}', 'u1').replace('{v}', '1');
      if (!/\{/.test(path)) {
        const ifMatch: Array<[string, string]> = wellFormed.ifMatch ? [['if-match', wellFormed.ifMatch]] : [];
        const request: InProcessRequest = {
          method: route.method,
          url: path,
          headers: [['authorization', 'Bearer fuzz-key'], ['content-type', 'application/json'], ...ifMatch],
          ...(wellFormedBody === undefined ? {} : { body: wellFormedBody }),
        };
        return { route, request };
      }
    }
    const ownShape = shaped && route.method !== 'GET' && route.method !== 'DELETE' ? shapedBodies[route.group] : undefined;
    const body = ownShape === undefined ? anyBody : JSON.stringify(ownShape);
    let path = route.path
      .replace('{sid}', encodeSegment(sid))
      .replace('{nid}', encodeSegment(nid))
      .replace('{v}', encodeSegment(v))
      .replace(/\{(agentId|webhookId|runId|userId)\}/g, encodeSegment(other))
      .replace('{path+}', memoryPath);
    // Sometimes one parameter as sent without encoding (a lone `%` is malformed).
    if (raw && route.path.includes('{sid}'))
      path = route.path
        .replace('{sid}', rawSegment || 'x')
        .replace('{nid}', 'a1')
        .replace('{v}', '1')
        .replace(/\{[^}]+\}/g, 'x');
    return {
      route,
      request: { method: route.method, url: query ? `${path}?${query}` : path, headers, ...(body === undefined ? {} : { body }) },
    };
  });

// ---- what every answer must be ------------------------------------------------------------

function assertDocumented(request: InProcessRequest, response: InProcessResponse): void {
  const where = `${request.method} ${request.url} → ${response.status} ${response.text.slice(0, 300)}`;
  expect(DOCUMENTED_STATUSES.has(response.status), `undocumented status: ${where}`).toBe(true);
  if (response.status >= 400) {
    expect(response.headers['content-type'], where).toBe('application/problem+json');
    const problem = response.json as Record<string, unknown> | undefined;
    expect(problem, `not JSON: ${where}`).toBeTypeOf('object');
    const code = String(problem?.code);
    expect(CONTRACT_CODES[code], `code not in API.md section 10: ${where}`).toBe(response.status);
    expect(errorStatus[code as keyof typeof errorStatus]).toBe(response.status);
    expect(problem?.status, where).toBe(response.status);
    expect(typeof problem?.title === 'string' && typeof problem?.detail === 'string' && typeof problem?.type === 'string', where).toBe(
      true,
    );
  } else if (response.status !== 204) {
    expect(response.headers['content-type'], where).toMatch(/^application\/json/);
    expect(response.json, `not JSON: ${where}`).not.toBeUndefined();
  }
}

/** One partition as read raw: its key, and its items by sort key (DynamoDB's JSON of each). */
interface Partition {
  pk: string;
  items: Map<string, Record<string, AttributeValue>>;
}

/**
 * Every stored item of the tracked sessions of both tenants (their whole item collections,
 * read straight from the table): stricter than what the API shows, and one Query each.
 */
async function snapshot(): Promise<Partition[]> {
  const partitions = [
    ...[TENANT, OTHER].flatMap((tenant) => TRACKED.map((sessionId) => keys.session({ tenant, sessionId }))),
    // The registries and webhooks of both tenants.
    ...[TENANT, OTHER].flatMap((tenant) => [keys.agents(tenant), keys.webhooks(tenant)]),
    // Their watched memory namespaces.
    ...[TENANT, OTHER].flatMap((tenant) => MEMORY_NAMESPACES.map((namespace) => keys.memoryNamespace(tenant, namespace))),
  ];
  return Promise.all(
    partitions.map(async (pk) => {
      const { Items = [] } = await client.send(
        new QueryCommand({
          TableName: tableName,
          KeyConditionExpression: 'pk = :pk',
          ExpressionAttributeValues: { ':pk': { S: pk } },
          ConsistentRead: true,
        }),
      );
      return { pk, items: new Map(Items.map((item) => [String(item.sk?.S), item])) };
    }),
  );
}

/**
 * The one thing a refused request may write: the index of the nodes the session's newest change
 * made, which that change owes its successor. An append by the process that made that change
 * puts it beside its first read, before it knows whether it will be refused (log-writer.ts,
 * `writeAhead`; docs/architecture.md). So the items allowed are exactly those the successor of
 * the newest change puts (`departure`), as it puts them; anything else is a refused request's
 * own write.
 */
function owedByNewestChange(partition: Partition): Map<string, string> {
  const session = TRACKED_SCOPES.find((scope) => keys.session(scope) === partition.pk);
  const newest = [...partition.items.keys()]
    .filter((sk) => sk.startsWith(keys.logPrefix))
    .sort()
    .at(-1);
  if (!session || newest === undefined) return new Map();
  const entry = readLogItem(unmarshall(partition.items.get(newest) as Record<string, AttributeValue>));
  if (!entry || isFence(entry)) return new Map();
  const { puts } = departure(session, tipOf(entry, { withState: false }), true);
  return new Map(puts.map((item) => [String(item.sk), canonicalJson(item as Json)]));
}

/** What a refused request changed in the table, beyond the index the newest change owed (`owedByNewestChange`). */
function changedBy(before: Partition[], after: Partition[]): string[] {
  const changes: string[] = [];
  before.forEach((was, index) => {
    const now = after[index] as Partition;
    const owed = owedByNewestChange(was);
    for (const [sk, item] of was.items) {
      if (JSON.stringify(now.items.get(sk)) !== JSON.stringify(item)) changes.push(`${was.pk} ${sk}: changed or removed`);
    }
    for (const [sk, item] of now.items) {
      if (was.items.has(sk)) continue;
      if (owed.get(sk) !== canonicalJson(unmarshall(item) as Json))
        changes.push(`${was.pk} ${sk}: added ${JSON.stringify(item).slice(0, 300)}`);
    }
  });
  return changes;
}

/**
 * The stored registration of billing, the agent no limited key and no other tenant may touch,
 * and whether it is still outside planner's subtree (the tenant's own key may move it under
 * planner, and then planner's key may see and change it).
 */
async function billing(): Promise<{ stored: string; outsidePlanner: boolean }> {
  const { Items = [] } = await client.send(
    new QueryCommand({
      TableName: tableName,
      KeyConditionExpression: 'pk = :pk AND sk = :sk',
      ExpressionAttributeValues: { ':pk': { S: keys.agents(TENANT) }, ':sk': { S: keys.agent('billing') } },
      ConsistentRead: true,
    }),
  );
  const parentId = Items[0]?.parentId;
  return { stored: JSON.stringify(Items), outsidePlanner: parentId === undefined || parentId.NULL === true };
}

/** The caller a fuzzed request authenticates as, when it does. */
function callerOf(request: InProcessRequest): 'tenant' | 'limited' | 'other' | 'none' {
  const header = Object.fromEntries(request.headers as Array<[string, string]>).authorization;
  if (header === 'Bearer fuzz-key') return 'tenant';
  if (header === `Bearer ${LIMITED_KEY}`) return 'limited';
  if (header === 'Bearer other-key') return 'other';
  return 'none';
}

/** What the fuzzed requests were answered, to see that they reach past the first checks. */
const seen = new Map<string, number>();

describe('arbitrary requests', () => {
  it('answer a documented status, problem+json on errors, never 500, and write nothing when refused', async () => {
    await fc.assert(
      fc.asyncProperty(requestArb, async ({ request }) => {
        const before = await snapshot();
        const billingBefore = await billing();
        const caller = callerOf(request);

        const response = await invoke(handlers, request);
        const seenAs = response.status >= 400 ? `${response.status} ${response.json?.code}` : String(response.status);
        seen.set(seenAs, (seen.get(seenAs) ?? 0) + 1);

        assertDocumented(request, response);
        if (response.status >= 400) {
          const changes = changedBy(before, await snapshot());
          expect(changes, `a refused request changed something: ${request.method} ${request.url} ${response.status}`).toEqual([]);
        }
        // A limited key and another tenant never change billing, nor read its registration.
        if (caller === 'other' || (caller === 'limited' && billingBefore.outsidePlanner)) {
          const where = `${caller}: ${request.method} ${request.url} → ${response.status}`;
          expect((await billing()).stored, `billing changed: ${where}`).toBe(billingBefore.stored);
          expect(response.text, `billing's registration shown: ${where}`).not.toContain('billing.example.com');
        }
        // Billing's memory is agents/billing: never the planner key's, nor the other tenant's.
        if (caller === 'limited' || caller === 'other') {
          expect(response.text, `billing's memory shown: ${caller}: ${request.method} ${request.url}`).not.toContain('billing-memo');
        }
        expect(response.text, `a secret shown: ${request.method} ${request.url}`).not.toContain('billing-secret');
      }),
      {
        numRuns: Number(process.env.FUZZ_RUNS ?? 400),
        endOnFailure: true,
        // A failure prints its seed; FUZZ_SEED runs that sequence again.
        ...(process.env.FUZZ_SEED ? { seed: Number(process.env.FUZZ_SEED) } : {}),
      },
    );
    // The generator must get past authentication, media type and id checks often enough to
    // reach the operations: successes and the route's own refusals must both show up.
    if (process.env.FUZZ_VERBOSE) console.log([...seen].sort());
    const answered = [...seen.keys()];
    expect(answered.some((status) => status === '200')).toBe(true);
    expect(
      answered.filter((status) => /^(201|204|404 (session|node|version)_not_found|409|412)/.test(status)).length,
    ).toBeGreaterThanOrEqual(3);
  }, 90_000);

  it('store any JSON state verbatim and read it back, whatever its strings and keys', async () => {
    await fc.assert(
      fc.asyncProperty(fc.jsonValue({ maxDepth: 5, stringUnit: 'binary' }), fc.boolean(), async (state, patch) => {
        const url = '/v1/sessions/verbatim/state';
        const headers = { authorization: 'Bearer fuzz-key', 'content-type': patch ? 'application/merge-patch+json' : 'application/json' };
        // A PUT stores the value itself; a PATCH of a non-object replaces the whole state too.
        const body = JSON.stringify(patch ? [state] : state);
        const write = await invoke(handlers, { method: patch ? 'PATCH' : 'PUT', url, headers, body });
        const read = await invoke(handlers, { method: 'GET', url, headers: { authorization: headers.authorization } });

        assertDocumented({ method: 'PUT', url }, write);
        expect(write.status).toBe(200);
        const sent = JSON.parse(body) as Json;
        expect(canonicalJson(write.json.state)).toBe(canonicalJson(sent));
        expect(canonicalJson(read.json.state)).toBe(canonicalJson(sent));
        expect(read.headers.etag).toBe(write.headers.etag);
      }),
      { numRuns: Number(process.env.FUZZ_RUNS ?? 250) / 2 },
    );
  }, 60_000);

  it('accept JSON nested up to 2000 deep in state, patches and messages', async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 2000 }), fc.constantFrom('array' as const, 'object' as const), async (depth, kind) => {
        const headers = { authorization: 'Bearer fuzz-key', 'content-type': 'application/json' };
        const put = await invoke(handlers, { method: 'PUT', url: '/v1/sessions/deep/state', headers, body: deep(depth, kind) });
        const patched = await invoke(handlers, { method: 'PATCH', url: '/v1/sessions/deep/state', headers, body: deep(depth, 'object') });
        const appended = await invoke(handlers, {
          method: 'POST',
          url: '/v1/sessions/deep/messages',
          headers,
          // The limit is on the whole body: the content sits 3 levels down.
          body: `{"messages":[{"role":"user","content":${deep(Math.min(depth, MAX_JSON_DEPTH - 3), kind)}}]}`,
        });

        expect([put.status, patched.status, appended.status]).toEqual([200, 200, 201]);
        const read = await invoke(handlers, { method: 'GET', url: '/v1/sessions/deep/state', headers });
        expect(read.text).toContain(deep(Math.min(depth, 50), 'object').slice(0, 5 * Math.min(depth, 50)));
      }),
      { numRuns: 25 },
    );
  }, 60_000);
});

describe('prototype pollution', () => {
  const headers = { authorization: 'Bearer fuzz-key', 'content-type': 'application/json' };
  const poisoned = '{"__proto__":{"polluted":true},"constructor":{"prototype":{"polluted":true}},"a":{"__proto__":{"x":1}}}';

  it('stores __proto__ and constructor keys as plain data and reads them back verbatim', async () => {
    // Act
    const put = await invoke(handlers, { method: 'PUT', url: '/v1/sessions/proto/state', headers, body: poisoned });
    const patched = await invoke(handlers, {
      method: 'PATCH',
      url: '/v1/sessions/proto/state',
      headers,
      body: '{"__proto__":{"more":1},"a":{"__proto__":null}}',
    });
    const read = await invoke(handlers, { method: 'GET', url: '/v1/sessions/proto/state', headers });
    const version = await invoke(handlers, { method: 'GET', url: '/v1/sessions/proto/versions/1', headers });
    const appended = await invoke(handlers, {
      method: 'POST',
      url: '/v1/sessions/proto/messages',
      headers,
      body: '{"messages":[{"id":"p1","role":"user","__proto__":{"polluted":true}}]}',
    });
    const path = await invoke(handlers, { method: 'GET', url: '/v1/sessions/proto/messages', headers });

    // Assess
    expect([put.status, patched.status, read.status, version.status, appended.status, path.status]).toEqual([200, 200, 200, 200, 201, 200]);
    expect(version.text).toContain(
      '"state":{"__proto__":{"polluted":true},"constructor":{"prototype":{"polluted":true}},"a":{"__proto__":{"x":1}}}',
    );
    expect(read.text).toContain('"state":{"__proto__":{"polluted":true,"more":1},"constructor":{"prototype":{"polluted":true}},"a":{}}');
    expect(Object.hasOwn(read.json.state, '__proto__')).toBe(true);
    expect(path.text).toContain('"__proto__":{"polluted":true}');
  });

  it('left every built-in prototype as it was, after all of the above and the fuzzing', () => {
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(([] as unknown as Record<string, unknown>).polluted).toBeUndefined();
    expect(Object.getOwnPropertyNames(Object.prototype).sort()).toEqual(prototypeKeysBefore.object);
    expect(Object.getOwnPropertyNames(Array.prototype).sort()).toEqual(prototypeKeysBefore.array);
    expect(Object.getOwnPropertyNames(Function.prototype).sort()).toEqual(prototypeKeysBefore.function);
  });
});

describe('gaps found by fuzzing, now closed', () => {
  const headers = { authorization: 'Bearer fuzz-key', 'content-type': 'application/json' };
  // The 500s below are logged by the handlers; the log is expected here.
  beforeAll(() => void vi.spyOn(console, 'error').mockImplementation(() => {}));
  afterAll(() => vi.restoreAllMocks());

  // Was a bug: JSON nested ~10,000 deep parses fine (V8's JSON.parse is iterative) but every later
  // recursive walk overflows the stack: JSON.stringify in encodedSize / canonicalJson, mergePatch,
  // zod. The RangeError becomes `500 internal`. Expected: a 4xx (e.g. 400 invalid_request,
  // "nested too deep"), refused before anything recursive runs.
  it.each([
    ['PUT state', 'PUT', '/v1/sessions/too-deep/state', deep(10_000, 'array')],
    ['PATCH state', 'PATCH', '/v1/sessions/too-deep/state', deep(10_000, 'object')],
    ['append', 'POST', '/v1/sessions/too-deep/messages', `{"messages":[{"role":"user","content":${deep(10_000, 'array')}}]}`],
    ['create session', 'POST', '/v1/sessions', `{"metadata":{"a":${deep(10_000, 'array')}}}`],
  ])('answers a 4xx, not 500, to a body nested 10,000 deep (%s)', async (_name, method, url, body) => {
    const response = await invoke(handlers, { method, url, headers, body });

    expect(response.status).toBeGreaterThanOrEqual(400);
    expect(response.status).toBeLessThan(500);
  });

  it('takes a body exactly MAX_JSON_DEPTH deep and refuses one level more with 400 invalid_json', async () => {
    const atLimit = await invoke(handlers, {
      method: 'PUT',
      url: '/v1/sessions/depth-limit/state',
      headers,
      body: deep(MAX_JSON_DEPTH, 'array'),
    });
    const beyond = await invoke(handlers, {
      method: 'PUT',
      url: '/v1/sessions/depth-limit/state',
      headers,
      body: deep(MAX_JSON_DEPTH + 1, 'array'),
    });

    expect(atLimit.status, atLimit.text).toBe(200);
    expect(beyond.status, beyond.text).toBe(400);
    expect(beyond.json.code).toBe('invalid_json');
  });

  // Was a bug: session metadata is "stored as given", but a `__proto__` key is dropped: sessions.ts
  // stores zod's parsed copy (`request.metadata`), and zod's record parser assigns each key, so
  // `__proto__` sets that copy's prototype instead of becoming a key. (Nothing global is
  // polluted.) Expected: the metadata reads back exactly as sent, as state and messages do.
  it('keeps a __proto__ key of session metadata', async () => {
    const created = await invoke(handlers, {
      method: 'POST',
      url: '/v1/sessions',
      headers,
      body: '{"sessionId":"proto-meta","metadata":{"__proto__":{"polluted":true},"a":1}}',
    });
    const session = await invoke(handlers, { method: 'GET', url: '/v1/sessions/proto-meta', headers });

    expect(created.status).toBe(201);
    expect(session.text).toContain('"metadata":{"__proto__":{"polluted":true},"a":1}');
  });

  // Was a bug (contract): state is "stored verbatim", but a number beyond a double's range is stored
  // as null without a word: JSON.parse makes it Infinity and JSON.stringify writes null.
  // Expected: refused (400) or kept; never silently changed.
  it('refuses, or keeps, a number beyond the double range instead of storing null', async () => {
    const write = await invoke(handlers, { method: 'PUT', url: '/v1/sessions/huge-number/state', headers, body: '{"n":1e400}' });

    if (write.status === 200) expect(write.json.state.n).not.toBeNull();
    else expect(write.status).toBe(400);
  });
});
