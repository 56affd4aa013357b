import { randomBytes } from 'node:crypto';
import { DeleteItemCommand, UpdateItemCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KEY_RECHECK_MS } from '../../functions/core/fanout/key-liveness.js';
import { TENANT_READ_MAX_AGE_MS } from '../../functions/core/kernel/tenant-cache.js';
import { routeGroups, routes } from '../../functions/http/contract/routes.js';
import { DEPLOYED_WORKER_ARN } from '../helpers/synth.js';
import type { GatewayResponse } from './support/api-gateway.js';
import type { DeployedFunction } from './support/deployment.js';
import type { Grant } from './support/iam.js';
import { type DeployedStack, deployStack } from './support/world.js';

/**
 * Least privilege, proven on what is deployed: every function of the synthesized stack runs
 * from its bundle with its own role, and every AWS call it makes goes through a stand-in that
 * refuses what the template does not grant that role (test/deployed/support/aws-stand-in.ts).
 * The calls are whatever the code sends; no list of expected actions exists anywhere. Each
 * route group is driven through its operations, recovery paths included (a delete that died
 * halfway, a write whose answer was lost, a request that failed under an Idempotency-Key), and
 * so are the authorizer, the WebSocket routes and the change hook. Then no call may have been
 * refused, and every grant must have been used by some call.
 */

let stack: DeployedStack;
let key: string;
/** How far ahead a function's clock runs to find a delete "abandoned" (its tombstone over a minute old). */
const LATER_MS = 5 * 60_000;

beforeAll(async () => {
  stack = await deployStack();
  key = await stack.createKey('acme');
}, 180_000);

afterAll(async () => stack?.close());

function fn(description: RegExp): DeployedFunction {
  return stack.deployment.functionNamed(description);
}

function call(method: string, path: string, body?: unknown, options: { headers?: Record<string, string>; clockOffsetMs?: number } = {}) {
  return stack.http.request(method, path, {
    headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...options.headers },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    ...(options.clockOffsetMs ? { clockOffsetMs: options.clockOffsetMs } : {}),
  });
}

/** The status, with what explains a surprise: the body, refused calls, the function's log. */
function expectStatus(response: GatewayResponse, status: number): void {
  if (response.status === status) return;
  const refused = stack.deployment.functions().flatMap((candidate) => stack.iam.refusedCalls(candidate.logicalId));
  expect.fail(
    `expected ${status}, got ${response.status} ${response.body}\nrefused calls: ${JSON.stringify(refused)}\n` +
      `log: ${(response.invocation?.logs ?? []).join('\n')}`,
  );
}

const WRITES = new Set(['PutItem', 'UpdateItem', 'DeleteItem', 'BatchWriteItem', 'TransactWriteItems']);

/** The next write request of a function meets `fault` once; every other request passes. */
function onNextWrite(functionId: string, fault: 'lose-answer' | 'crash'): () => boolean {
  let fired = false;
  stack.aws.fault = (request) => {
    if (fired || request.functionId !== functionId || !WRITES.has(request.operation)) return 'pass';
    fired = true;
    return fault;
  };
  return () => {
    stack.aws.fault = () => 'pass';
    return fired;
  };
}

/**
 * A delete that died halfway, as a function past its timeout leaves it: the sessions function
 * is stopped right after the delete's first write (the one that closes the session) lands.
 */
async function abandonDelete(sessionId: string): Promise<void> {
  const sessions = fn(/the sessions routes$/);
  const done = onNextWrite(sessions.logicalId, 'crash');
  const deleting = await call('DELETE', `/v1/sessions/${sessionId}`);
  expect(done(), 'the delete wrote something before it died').toBe(true);
  expect(deleting.status).toBe(500);
}

/** A write whose first DynamoDB write lands but whose answer is lost: the SDK retries it. */
async function withLostAnswer(functionId: string, request: () => Promise<GatewayResponse>): Promise<GatewayResponse> {
  const done = onNextWrite(functionId, 'lose-answer');
  const response = await request();
  expect(done(), 'the request wrote something').toBe(true);
  return response;
}

describe('each route group, through its paths, within its role', () => {
  it('health and the inspector page, with no table access at all', async () => {
    expectStatus(await stack.http.request('GET', '/health'), 200);
    expectStatus(await stack.http.request('GET', '/'), 200);
    expectStatus(await stack.http.request('GET', '/inspector/config.json'), 200);
  });

  it('the authorizer: a known key, an unknown key', async () => {
    expectStatus(await call('GET', '/v1/sessions'), 200);
    const unknown = await stack.http.request('GET', '/v1/sessions', { headers: { authorization: 'Bearer as_unknown' } });
    expectStatus(unknown, 401);
  });

  it('sessions: create, conflict, read, list, delete, and a create over an abandoned delete', async () => {
    expectStatus(
      await call('POST', '/v1/sessions', { sessionId: 'lp-s', userId: 'u1' }, { headers: { 'idempotency-key': 'lp-s-1' } }),
      201,
    );
    expectStatus(
      await call('POST', '/v1/sessions', { sessionId: 'lp-s', userId: 'u1' }, { headers: { 'idempotency-key': 'lp-s-1' } }),
      201,
    );
    // A refused request under a key releases its claim.
    expectStatus(await call('POST', '/v1/sessions', { sessionId: 'lp-s' }, { headers: { 'idempotency-key': 'lp-s-2' } }), 409);
    expectStatus(await call('GET', '/v1/sessions/lp-s'), 200);
    expectStatus(await call('GET', '/v1/sessions?limit=1'), 200);
    // A PATCH of the user, agent and metadata: the session item, the log's place and the list
    // entries in one transaction (Put, Update, Put), listed under the new user at once.
    expectStatus(await call('PATCH', '/v1/sessions/lp-s', { userId: 'u2', agentId: 'lp-a', metadata: { channel: 'web' } }), 200);
    expect((await call('GET', '/v1/sessions?userId=u2')).json.sessions).toMatchObject([{ sessionId: 'lp-s', agentId: 'lp-a' }]);
    expect((await call('GET', '/v1/sessions?userId=u1')).json.sessions).toEqual([]);
    expectStatus(await call('PATCH', '/v1/sessions/lp-s/state', { a: 1 }), 200);
    expectStatus(await call('DELETE', '/v1/sessions/lp-s'), 204);

    expectStatus(await call('PATCH', '/v1/sessions/lp-s2/state', { a: 1 }), 200);
    await abandonDelete('lp-s2');
    expectStatus(await call('POST', '/v1/sessions', { sessionId: 'lp-s2' }, { clockOffsetMs: LATER_MS }), 201);
  });

  it('state: write, replace, read, history, a write off the head, 412, a lost answer, and a write over an abandoned delete', async () => {
    const state = fn(/the state routes$/);
    expectStatus(
      await call('POST', '/v1/sessions/lp-st/messages', {
        messages: [
          { id: 'm1', role: 'user' },
          { id: 'm2', role: 'assistant' },
        ],
      }),
      201,
    );
    expectStatus(await call('PATCH', '/v1/sessions/lp-st/state', { a: 1 }, { headers: { 'idempotency-key': 'lp-st-1' } }), 200);
    expectStatus(await call('PUT', '/v1/sessions/lp-st/state', { b: 2 }), 200);
    expectStatus(await call('PATCH', '/v1/sessions/lp-st/state?node=m1', { c: 3 }), 200);
    expectStatus(await call('PUT', '/v1/sessions/lp-st/state', { d: 4 }, { headers: { 'if-match': '"1"' } }), 412);
    expectStatus(await call('GET', '/v1/sessions/lp-st/state'), 200);
    expectStatus(await call('GET', '/v1/sessions/lp-st/state?node=m1'), 200);
    expectStatus(await call('GET', '/v1/sessions/lp-st/state?version=1'), 200);
    expectStatus(await call('GET', '/v1/sessions/lp-st/versions'), 200);
    expectStatus(await call('GET', '/v1/sessions/lp-st/versions?node=m2'), 200);
    expectStatus(await call('PUT', '/v1/sessions/lp-st/state?node=nowhere', { g: 7 }, { headers: { 'idempotency-key': 'lp-st-2' } }), 404);
    expectStatus(await call('GET', '/v1/sessions/lp-st/versions/1'), 200);
    expectStatus(await withLostAnswer(state.logicalId, () => call('PATCH', '/v1/sessions/lp-st/state', { e: 5 })), 200);
    expectStatus(await withLostAnswer(state.logicalId, () => call('PATCH', '/v1/sessions/lp-st/state?node=m1', { f: 6 })), 200);

    await abandonDelete('lp-st');
    expectStatus(await call('PATCH', '/v1/sessions/lp-st/state', { after: true }, { clockOffsetMs: LATER_MS }), 200);
  });

  it('tree: append, paths, nodes, the tree, a page of nodes by id, switching the head, a lost answer, and an append over an abandoned delete', async () => {
    const tree = fn(/the tree routes$/);
    const messages = Array.from({ length: 40 }, (_, index) => ({ id: `t${index}`, role: index % 2 ? 'assistant' : 'user' }));
    expectStatus(await call('POST', '/v1/sessions/lp-t/messages', { messages }, { headers: { 'idempotency-key': 'lp-t-1' } }), 201);
    expectStatus(await call('POST', '/v1/sessions/lp-t/messages', { parentId: 't1', messages: [{ id: 'fork', role: 'user' }] }), 201);
    expectStatus(
      await call(
        'POST',
        '/v1/sessions/lp-t/messages',
        { parentId: 'nowhere', messages: [{ role: 'user' }] },
        { headers: { 'idempotency-key': 'lp-t-2' } },
      ),
      404,
    );
    expectStatus(await call('GET', '/v1/sessions/lp-t/messages'), 200);
    expectStatus(await call('GET', '/v1/sessions/lp-t/messages?node=t39'), 200);
    expectStatus(await call('GET', '/v1/sessions/lp-t/nodes/t5'), 200);
    expectStatus(await call('GET', '/v1/sessions/lp-t/tree'), 200);
    expectStatus(await call('GET', '/v1/sessions/lp-t/nodes?limit=5&before=t30'), 200);
    expectStatus(await call('PUT', '/v1/sessions/lp-t/head', { nodeId: 't39' }), 200);
    expectStatus(
      await withLostAnswer(tree.logicalId, () => call('POST', '/v1/sessions/lp-t/messages', { messages: [{ id: 'lost', role: 'user' }] })),
      201,
    );
    expectStatus(await withLostAnswer(tree.logicalId, () => call('PUT', '/v1/sessions/lp-t/head', { nodeId: 'fork' })), 200);

    await abandonDelete('lp-t');
    expectStatus(
      await call('POST', '/v1/sessions/lp-t/messages', { messages: [{ id: 'again', role: 'user' }] }, { clockOffsetMs: LATER_MS }),
      201,
    );
  });

  it('agents: register with a parent and typed fields, read, list, and a type change checked against stored states', async () => {
    expectStatus(await call('PUT', '/v1/agents/lp-root', { config: { model: 'm' } }, { headers: { 'idempotency-key': 'lp-a-1' } }), 201);
    const fields = { topic: { type: 'string', description: 'what it is about', read: 'public', write: 'public' } };
    expectStatus(await call('PUT', '/v1/agents/lp-child', { parentId: 'lp-root', stateFields: fields }), 201);
    expectStatus(await call('PUT', '/v1/agents/lp-child', { parentId: 'lp-missing' }, { headers: { 'idempotency-key': 'lp-a-2' } }), 404);
    expectStatus(await call('GET', '/v1/agents/lp-child'), 200);
    expectStatus(await call('GET', '/v1/agents'), 200);
    // A move: the agent put beside the registry's version, read first (a transaction of two Puts);
    // the cycle it would make refused.
    expectStatus(await call('PUT', '/v1/agents/lp-mover', {}), 201);
    expectStatus(await call('PUT', '/v1/agents/lp-mover', { parentId: 'lp-child' }), 200);
    expectStatus(await call('PUT', '/v1/agents/lp-root', { parentId: 'lp-mover' }), 400);
    // A move that loses its race for the registry's version (another registration lands between
    // its reads and its transaction) waits its turn in the tenant's write queue: a ticket put,
    // the queue read, the ticket deleted, and the move tried again.
    const agents = fn(/the agents routes$/);
    let raced = false;
    stack.aws.beforeForward = async (request) => {
      const version = (request.input.TransactItems ?? []).find((item: any) => item.Put?.Item?.registryVersion);
      if (raced || request.functionId !== agents.logicalId || !version) return;
      raced = true;
      await stack.admin.send(
        new UpdateItemCommand({
          TableName: stack.deployment.tableName,
          Key: { pk: version.Put.Item.pk, sk: version.Put.Item.sk },
          UpdateExpression: 'SET registryVersion = registryVersion + :one',
          ExpressionAttributeValues: { ':one': { N: '1' } },
        }),
      );
    };
    const before = stack.aws.dynamoDbRequests.length;
    try {
      expectStatus(await call('PUT', '/v1/agents/lp-mover', { parentId: 'lp-root' }), 200);
    } finally {
      stack.aws.beforeForward = async () => {};
    }
    const made = stack.aws.dynamoDbRequests.slice(before).filter((request) => request.functionId === agents.logicalId);
    expect(raced).toBe(true);
    expect(made.filter((request) => request.operation === 'TransactWriteItems').length).toBeGreaterThanOrEqual(2);
    expect(made.map((request) => request.operation)).toEqual(expect.arrayContaining(['PutItem', 'Query', 'DeleteItem']));
    expect(JSON.parse((await call('GET', '/v1/agents/lp-mover')).body).parentId).toBe('lp-root');

    // A type change that stored values do not fit: the sessions of the agent are found on the
    // sessions index and their states read (a large one in pieces): 409, then cleared.
    const typed = { blob: { type: 'json', read: 'public', write: 'public' }, count: { type: 'number', read: 'public', write: 'public' } };
    expectStatus(await call('PUT', '/v1/agents/lp-typed', { stateFields: typed }), 201);
    expectStatus(await call('POST', '/v1/sessions', { sessionId: 'lp-typed-s', agentId: 'lp-typed' }), 201);
    const blob = Array.from({ length: 40 }, () => randomBytes(768).toString('base64'));
    expectStatus(await call('PUT', '/v1/sessions/lp-typed-s/state', { blob, count: 3 }), 200);
    const retyped = { ...typed, count: { ...typed.count, type: 'string' } };
    expectStatus(await call('PUT', '/v1/agents/lp-typed', { stateFields: retyped }), 409);
    const cleared = { ...typed, count: { ...typed.count, type: 'string', migrate: 'clear' } };
    expectStatus(await call('PUT', '/v1/agents/lp-typed', { stateFields: cleared }), 200);
  });

  it('decide: a proposed decision, its replay, messages, a failing worker, a lambda: worker, a lost answer, and a decision over an abandoned delete', async () => {
    const decide = fn(/the decide routes$/);
    expectStatus(await call('POST', '/v1/sessions', { sessionId: 'lp-d', agentId: 'lp-child' }), 201);
    const first = {
      decisionId: 'lp-d-1',
      trigger: { type: 'client.messages', messages: [{ id: 'q1', role: 'user' }] },
      proposed: { state: { topic: 'x' } },
    };
    expectStatus(await call('POST', '/v1/sessions/lp-d/decide', first, { headers: { 'idempotency-key': 'lp-d-k' } }), 200);
    expectStatus(await call('POST', '/v1/sessions/lp-d/decide', first), 200);
    expectStatus(
      await withLostAnswer(decide.logicalId, () => call('POST', '/v1/sessions/lp-d/decide', { trigger: { type: 'tick' } })),
      200,
    );
    // Messages with ids of their own: the decision looks them up (several at once) before it writes.
    const named = [
      { id: 'q2', role: 'user' },
      { id: 'q3', role: 'user' },
    ];
    expectStatus(await call('POST', '/v1/sessions/lp-d/decide', { trigger: { type: 'client.messages', messages: named } }), 200);

    // A worker that cannot be reached: 502, the lease freed, the attempt recorded.
    expectStatus(await call('PUT', '/v1/agents/lp-worker', { worker: { url: 'https://worker.invalid/decide' } }), 201);
    expectStatus(await call('POST', '/v1/sessions', { sessionId: 'lp-dw', agentId: 'lp-worker' }), 201);
    expectStatus(
      await call(
        'POST',
        '/v1/sessions/lp-dw/decide',
        { decisionId: 'lp-dw-1', trigger: { type: 'tick' } },
        { headers: { 'idempotency-key': 'lp-dw-k' } },
      ),
      502,
    );

    // A lambda: worker, the one the stack allows: decide invokes it (lambda:InvokeFunction).
    stack.aws.lambdaWorkers.set(DEPLOYED_WORKER_ARN, () => ({ state: { by: 'lambda' } }));
    expectStatus(await call('PUT', '/v1/agents/lp-lambda', { worker: { url: `lambda:${DEPLOYED_WORKER_ARN}` } }), 201);
    expectStatus(await call('POST', '/v1/sessions', { sessionId: 'lp-dl', agentId: 'lp-lambda' }), 201);
    expectStatus(await call('POST', '/v1/sessions/lp-dl/decide', { trigger: { type: 'tick' } }), 200);

    await abandonDelete('lp-d');
    expectStatus(
      await call(
        'POST',
        '/v1/sessions/lp-d/decide',
        { trigger: { type: 'client.messages', messages: [{ id: 'after', role: 'user' }] } },
        { clockOffsetMs: LATER_MS },
      ),
      200,
    );
  });

  it('commits: every scope, reads of each document, expectedVersion, a lost answer, a large state, and a commit over an abandoned delete', async () => {
    const commits = fn(/the commits routes$/);
    expectStatus(await call('POST', '/v1/sessions', { sessionId: 'lp-c', userId: 'lp-user' }), 201);
    const commands = [
      { key: 'k', scope: 'thread', merge: 'disjoint', set: 1 },
      { key: 'k', scope: 'run', merge: 'disjoint', set: 2 },
      { key: 'k', scope: 'profile', merge: 'commutative', set: { a: 1 } },
      { key: 'k', scope: 'shared', merge: 'disjoint', set: 3 },
    ];
    expectStatus(
      await call('POST', '/v1/sessions/lp-c/commits', { runId: 'r1', commands }, { headers: { 'idempotency-key': 'lp-c-k' } }),
      200,
    );
    expectStatus(
      await call('POST', '/v1/sessions/lp-c/commits', {
        runId: 'r1',
        expectedVersion: 1,
        commands: [{ key: 'k', scope: 'run', merge: 'disjoint', set: 4 }],
      }),
      200,
    );
    expectStatus(
      await call(
        'POST',
        '/v1/sessions/lp-c/commits',
        { expectedVersion: 0, commands: [{ key: 'j', scope: 'shared', merge: 'disjoint', set: 5 }] },
        { headers: { 'idempotency-key': 'lp-c-k2' } },
      ),
      412,
    );
    expectStatus(await call('GET', '/v1/sessions/lp-c/runs/r1/state'), 200);
    expectStatus(await call('GET', '/v1/profiles/lp-user/state'), 200);
    expectStatus(await call('GET', '/v1/shared/state'), 200);
    expectStatus(
      await withLostAnswer(commits.logicalId, () =>
        call('POST', '/v1/sessions/lp-c/commits', { commands: [{ key: 'x', scope: 'thread', merge: 'disjoint', set: 1 }] }),
      ),
      200,
    );
    expectStatus(
      await withLostAnswer(commits.logicalId, () =>
        call('POST', '/v1/sessions/lp-c/commits', { commands: [{ key: 'x', scope: 'shared', merge: 'disjoint', set: 9 }] }),
      ),
      200,
    );

    // A state stored in pieces (over ~4 KiB compressed; random text does not compress): the
    // commit reads them (BatchGetItem).
    const large = { log: Array.from({ length: 40 }, () => randomBytes(768).toString('base64')) };
    expectStatus(await call('PUT', '/v1/sessions/lp-cl/state', large), 200);
    const onLarge = await call('POST', '/v1/sessions/lp-cl/commits', {
      commands: [{ key: 'notes', scope: 'thread', merge: 'disjoint', set: { a: 1 } }],
    });
    expectStatus(onLarge, 200);
    expect(onLarge.json.state).toEqual({ ...large, notes: { a: 1 } });

    await abandonDelete('lp-c');
    expectStatus(
      await call(
        'POST',
        '/v1/sessions/lp-c/commits',
        { commands: [{ key: 'after', scope: 'thread', merge: 'disjoint', set: true }] },
        { clockOffsetMs: LATER_MS },
      ),
      200,
    );
  });
});

describe('memory, and the change hook that keeps its namespace list and versions, within their roles', () => {
  it('memory: put (created, replaced, refused under a key, over an expired item), get, search, namespaces, versions, delete', async () => {
    const item = '/v1/memory/lp/notes/k';
    await stack.stream.read(0, 200);
    // With embeddings: the put writes its code into the namespace's pages, the delete removes it.
    expectStatus(
      await call('PUT', item, { value: { topic: 'a', n: 1 }, embedding: [1, 0, 0] }, { headers: { 'idempotency-key': 'lp-m-1' } }),
      201,
    );
    // A refused put under a key releases its claim.
    expectStatus(await call('PUT', item, { value: { n: 9 } }, { headers: { 'idempotency-key': 'lp-m-2', 'if-match': '"7"' } }), 412);
    expectStatus(await call('PUT', item, { value: { topic: 'a', n: 2 }, embedding: [0, 1, 0] }, { headers: { 'if-match': '"1"' } }), 200);
    expectStatus(await call('PUT', '/v1/memory/lp/notes/t', { value: { topic: 'b' }, ttlSeconds: 1 }), 201);
    // Later, the item has expired: a put replaces it (the second UpdateItem of that case).
    expectStatus(await call('PUT', '/v1/memory/lp/notes/t', { value: { topic: 'b' } }, { clockOffsetMs: LATER_MS }), 201);
    expectStatus(await call('PUT', '/v1/memory/lp/gone/k', { value: { topic: 'c' } }), 201);
    const written = await stack.stream.deliver(stack.stream.eventRecords(await stack.stream.read(6)));

    expectStatus(await call('GET', item), 200);
    const found = await call('POST', '/v1/memory/search', { namespacePrefix: ['lp'], filter: { topic: 'a' } });
    expectStatus(found, 200);
    expect(found.json.items).toHaveLength(1);
    const ranked = await call('POST', '/v1/memory/search', { namespacePrefix: ['lp'], vector: [0, 1, 0.1] });
    expectStatus(ranked, 200);
    expect(ranked.json.items.map((entry: { key: string }) => entry.key)).toEqual(['k']);
    expectStatus(await call('GET', '/v1/memory?prefix=lp'), 200);
    const versions = await call('GET', '/v1/memory/versions?namespace=lp/notes&key=k');
    expectStatus(versions, 200);
    expect(versions.json.versions).toHaveLength(2);

    // A delete erases the item's versions; the last item of a namespace takes it off the list.
    expectStatus(await call('DELETE', item), 204);
    expectStatus(await call('DELETE', '/v1/memory/lp/gone/k'), 204);
    const deleted = await stack.stream.deliver(stack.stream.eventRecords(await stack.stream.read(2)));

    for (const { invocation } of [...written, ...deleted])
      expect(invocation.result, invocation.logs.join('\n')).toEqual({ batchItemFailures: [] });
    const listed = await call('GET', '/v1/memory?prefix=lp');
    expect(listed.json.namespaces).toEqual([['lp', 'notes']]);
  });
});

describe('change events and live sync, within their roles', () => {
  it('WebSocket: connect, subscribe, a message it does not know, unsubscribe, a namespace followed and left, disconnect, a refused key', async () => {
    const connected = await stack.webSocket.connect('lp-conn-1', { token: key });
    expect(connected.result).toMatchObject({ statusCode: 200 });
    expect((await stack.webSocket.send('lp-conn-1', JSON.stringify({ action: 'subscribe', sessionId: 'lp-ev' }))).result).toMatchObject({
      statusCode: 200,
    });
    expect((await stack.webSocket.send('lp-conn-1', JSON.stringify({ action: 'dance' }))).result).toMatchObject({ statusCode: 400 });
    expect((await stack.webSocket.send('lp-conn-1', JSON.stringify({ action: 'unsubscribe', sessionId: 'lp-ev' }))).result).toMatchObject({
      statusCode: 200,
    });
    // A namespace as a session: the connection's list and the follower in one transaction each way.
    for (const action of ['subscribe', 'unsubscribe']) {
      const answer = (await stack.webSocket.send('lp-conn-1', JSON.stringify({ action, namespace: ['lp', 'ns'] }))).result;
      expect(answer).toMatchObject({ statusCode: 200 });
      expect(JSON.parse(String((answer as { body?: string }).body))).toEqual({ type: `${action}d`, namespace: ['lp', 'ns'] });
    }
    expect((await stack.webSocket.disconnect('lp-conn-1')).result).toMatchObject({ statusCode: 200 });
    expect((await stack.webSocket.connect('lp-conn-2', { token: 'as_unknown' })).result).toMatchObject({ statusCode: 401 });
  });

  it('WebSocket: a follow after an append (its index owed), a follow over an abandoned delete, and one before the first write', async () => {
    expectStatus(await call('POST', '/v1/sessions/lp-ws/messages', { messages: [{ id: 'm1', role: 'user' }] }), 201);
    await stack.webSocket.connect('lp-conn-3', { token: key });
    const subscribe = JSON.stringify({ action: 'subscribe', sessionId: 'lp-ws' });
    expect((await stack.webSocket.send('lp-conn-3', subscribe)).result).toMatchObject({ statusCode: 200 });

    await abandonDelete('lp-ws');
    const later = await stack.webSocket.send('lp-conn-3', subscribe, { clockOffsetMs: LATER_MS });
    expect(later.result, later.logs.join('\n')).toMatchObject({ statusCode: 200 });
    expectStatus(await call('GET', '/v1/sessions/lp-ws/messages'), 404);

    // A follow of a session never written puts a lone mark (with the table's TTL); the first
    // append takes it into the life in its transaction (an Update of the mark, the tree's role).
    const unwritten = await stack.webSocket.send('lp-conn-3', JSON.stringify({ action: 'subscribe', sessionId: 'lp-ws-new' }));
    expect(unwritten.result, unwritten.logs.join('\n')).toMatchObject({ statusCode: 200 });
    expectStatus(await call('POST', '/v1/sessions/lp-ws-new/messages', { messages: [{ id: 'm1', role: 'user' }] }), 201);
  });

  it('the change hook: webhooks (queued, then one failing into dead letters), followers (one gone), EventBridge, activity', async () => {
    // Prepare: a webhook that cannot be reached, a follower as an agent, and one that is gone.
    expectStatus(await call('PUT', '/v1/agents/lp-watcher', { parentId: 'lp-root' }), 201);
    const hook = await call('POST', '/v1/webhooks', { url: 'https://hooks.invalid/receive', secret: 's3cret', sessionId: 'lp-ev' });
    expectStatus(hook, 201);
    const typedHook = await call('POST', '/v1/webhooks', { url: 'https://typed.invalid/receive', agentId: 'lp-child' });
    expectStatus(typedHook, 201);
    await stack.webSocket.connect('lp-follower', { token: key });
    await stack.webSocket.send('lp-follower', JSON.stringify({ action: 'subscribe', sessionId: 'lp-ev', agentId: 'lp-child' }));
    await stack.webSocket.connect('lp-gone', { token: key });
    await stack.webSocket.send('lp-gone', JSON.stringify({ action: 'subscribe', sessionId: 'lp-ev' }));
    stack.aws.goneConnections.add('lp-gone');
    expectStatus(await call('POST', '/v1/sessions', { sessionId: 'lp-ev', agentId: 'lp-child' }), 201);
    await stack.stream.read(0, 200);
    // The webhook hook read the tenant's webhooks for earlier tests a moment ago: the two new
    // ones reach its instance within a second (API.md section 14, core/kernel/tenant-cache.ts).
    await new Promise((resolve) => setTimeout(resolve, TENANT_READ_MAX_AGE_MS + 50));

    // Act: writes of every kind of change, then the stream into the hook.
    // (Two batches: the second version's `prev` is then read from the table, not the batch.)
    expectStatus(await call('PATCH', '/v1/sessions/lp-ev/state', { topic: 'one' }), 200);
    const deliveries = await stack.stream.deliver(stack.stream.eventRecords(await stack.stream.read(1)));
    expectStatus(await call('PATCH', '/v1/sessions/lp-ev/state', { topic: 'two' }), 200);
    expectStatus(
      await call('POST', '/v1/sessions/lp-ev/commits', { runId: 'r', commands: [{ key: 'k', scope: 'run', merge: 'disjoint', set: 1 }] }),
      200,
    );
    deliveries.push(...(await stack.stream.deliver(stack.stream.eventRecords(await stack.stream.read(2)))));

    // … and the webhook queue into the delivery hook, one message at a time.
    const sent = await stack.queue.deliver();

    // Assess
    for (const { invocation } of [...deliveries, ...sent]) {
      expect(invocation.result, invocation.logs.join('\n')).toEqual({ batchItemFailures: [] });
    }
    expect(sent.length).toBeGreaterThan(0);
    expect(sent.every(({ records }) => records.length === 1)).toBe(true);
    expect(stack.queue.waiting(fn(/delivery hook/))).toEqual([]);
    expect(stack.aws.posted.get('lp-follower')?.length).toBeGreaterThan(0);
    expect(stack.aws.eventBridgeEntries.length).toBeGreaterThan(0);

    // The sweep of a session whose item TTL removed (API.md section 12): DynamoDB Local runs no
    // TTL, so the test removes the item, and the record names DynamoDB's principal, as TTL's does.
    expectStatus(await call('PATCH', '/v1/sessions/lp-ttl/state', { v: 1 }), 200);
    expectStatus(await call('PATCH', '/v1/sessions/lp-ttl', { ttlSeconds: 1, metadata: { topic: 'lp' } }), 200);
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    await stack.stream.read(0, 200);
    await stack.admin.send(
      new DeleteItemCommand({ TableName: stack.deployment.tableName, Key: { pk: { S: 'S#acme#lp-ttl' }, sk: { S: 'S' } } }),
    );
    const removed = (await stack.stream.read(1)).map((record) => ({
      ...record,
      userIdentity: { Type: 'Service', PrincipalId: 'dynamodb.amazonaws.com' },
    }));
    for (const { invocation } of await stack.stream.deliver(stack.stream.eventRecords(removed))) {
      expect(invocation.result, invocation.logs.join('\n')).toEqual({ batchItemFailures: [] });
    }

    // Its schedule (an EventBridge rule, every minute): retention due without a write, found on
    // the index of sessions due (its role: Query on that one index), run as the stream's runs are;
    // and on the same index the fence of a delete that died holding it, whose erase it finishes
    // as a DELETE would (the session item read, the fence claimed, the items erased).
    expectStatus(await call('PATCH', '/v1/sessions/lp-ev', { retention: { keepVersions: 1 } }), 200);
    expectStatus(await call('PATCH', '/v1/sessions/lp-swept/state', { v: 1 }), 200);
    await abandonDelete('lp-swept');
    const sweep = await stack.lambda.invoke(
      fn(/change hook/),
      { version: '0', id: 'lp-sweep', 'detail-type': 'Scheduled Event', source: 'aws.events', time: new Date().toISOString(), detail: {} },
      { clockOffsetMs: LATER_MS },
    );
    expect(sweep.error, sweep.logs.join('\n')).toBeUndefined();
    const swept = sweep.logs.map((line) => JSON.parse(line)).find((line) => line.message === 'prune sweep');
    expect(swept?.sessions).toBeGreaterThan(0);
    expect(swept?.erased).toBeGreaterThan(0);

    // A user's erasure: the sessions function starts it and waits (its role) while the change
    // hook closes it, the stream bringing it the erasure's records meanwhile; then the hook
    // erases it (its role: the user's list once more, which names a session made after the 202, kept).
    expectStatus(await call('POST', '/v1/sessions', { sessionId: 'lp-erased', userId: 'lp-user' }), 201);
    expectStatus(await call('PATCH', '/v1/sessions/lp-erased/state', { v: 1 }), 200);
    // One session given to the user by a PATCH (erased with the user's), one given away (kept):
    // the hook closes a session in a transaction (Put the fence, Delete the item if still the user's).
    for (const [sessionId, from, to] of [
      ['lp-given', 'lp-other', 'lp-user'],
      ['lp-taken', 'lp-user', 'lp-other'],
    ] as const) {
      expectStatus(await call('POST', '/v1/sessions', { sessionId, userId: from }), 201);
      expectStatus(await call('PATCH', `/v1/sessions/${sessionId}/state`, { v: 1 }), 200);
      expectStatus(await call('PATCH', `/v1/sessions/${sessionId}`, { userId: to }), 200);
    }
    expectStatus(await call('PUT', '/v1/memory/users/lp-user/k', { value: { v: 1 }, embedding: [0.5, 0.5] }), 201);
    await stack.stream.read(0, 200);
    let erasure: GatewayResponse | undefined;
    const erasing = call('DELETE', '/v1/users/lp-user').then((response) => {
      erasure = response;
    });
    const runs: Awaited<ReturnType<typeof stack.stream.deliver>> = [];
    while (erasure === undefined) runs.push(...(await stack.stream.deliver(stack.stream.eventRecords(await stack.stream.read(1, 500)))));
    await erasing;
    expectStatus(erasure, 202);
    expectStatus(await call('POST', '/v1/sessions', { sessionId: 'lp-after', userId: 'lp-user' }), 201);
    for (let round = 0; round < 3; round++) {
      runs.push(...(await stack.stream.deliver(stack.stream.eventRecords(await stack.stream.read(1, 1_000)))));
    }
    for (const { invocation } of runs) expect(invocation.result, invocation.logs.join('\n')).toEqual({ batchItemFailures: [] });
    const erased = await call('GET', `/v1/erasures/${erasure.json.erasureId as string}`);
    expect(erased.json).toMatchObject({ status: 'done', sessions: 2, memoryItems: 1 });
    expectStatus(await call('GET', '/v1/sessions/lp-given'), 404);
    expectStatus(await call('GET', '/v1/sessions/lp-taken'), 200);

    // And the webhooks group over what the hook left: dead letters listed, replayed, a webhook deleted.
    const hookId = hook.json.id as string;
    const letters = await call('GET', `/v1/webhooks/${hookId}/dead-letters`);
    expectStatus(letters, 200);
    expect(letters.json.deadLetters?.length ?? letters.json.items?.length).toBeGreaterThan(0);
    expectStatus(await call('POST', `/v1/webhooks/${hookId}/dead-letters/replay`, {}, { headers: { 'idempotency-key': 'lp-w-k' } }), 200);
    expectStatus(await call('GET', '/v1/webhooks'), 200);
    expectStatus(await call('GET', `/v1/webhooks/${hookId}`), 200);
    expectStatus(await call('DELETE', `/v1/webhooks/${typedHook.json.id as string}`), 204);
  });
});

describe('the roles themselves', () => {
  it('a revoked key: the change hook closes its follower (DeleteConnection), the WebSocket function answers its message and closes it', async () => {
    // Prepare: a key's follower and idle connection, a version recorded, then the revoke.
    const revocable = await stack.revocableKey('acme');
    await stack.webSocket.connect('lp-revoked-following', { token: revocable.apiKey });
    await stack.webSocket.connect('lp-revoked-idle', { token: revocable.apiKey });
    await stack.webSocket.send('lp-revoked-following', JSON.stringify({ action: 'subscribe', sessionId: 'lp-revoked' }));
    await stack.stream.read(0, 200);
    expectStatus(await call('PATCH', '/v1/sessions/lp-revoked/state', { v: 1 }), 200);
    await revocable.revoke();
    // What an instance knows of a key is at most KEY_RECHECK_MS old.
    await new Promise((resolve) => setTimeout(resolve, KEY_RECHECK_MS + 50));

    // Act
    const deliveries = await stack.stream.deliver(stack.stream.eventRecords(await stack.stream.read(1)));
    const answer = await stack.webSocket.send('lp-revoked-idle', JSON.stringify({ action: 'subscribe', sessionId: 'lp-revoked' }));

    // Assess
    for (const { invocation } of deliveries) expect(invocation.result, invocation.logs.join('\n')).toEqual({ batchItemFailures: [] });
    expect(answer.result, answer.logs.join('\n')).toEqual({ statusCode: 401 });
    expect(stack.aws.closedConnections).toEqual(expect.arrayContaining(['lp-revoked-following', 'lp-revoked-idle']));
  });

  it('the sealing key: each keyed route group makes it when the table has none (kms:GenerateDataKey), and opens it after', async () => {
    // Whichever function first finds no key ring makes it (functions/store/access/key-ring.ts), so
    // each one may: here each does, in a fresh environment, over a table without one.
    const keyed = routeGroups.filter((group) => !['health', 'inspector'].includes(group));
    for (const group of keyed) {
      await stack.admin.send(
        new DeleteItemCommand({ TableName: stack.deployment.tableName, Key: { pk: { S: 'Z#keyring' }, sk: { S: 'Z' } } }),
      );
      const route = routes.find((candidate) => candidate.group === group) as (typeof routes)[number];
      const body = route.method === 'GET' || route.method === 'DELETE' ? undefined : {};
      // A clock a few ms ahead runs the function in an environment of its own: a fresh process.
      const response = await call(route.method, route.path.replace(/\{[^}]+\}/g, 'sealing'), body, {
        clockOffsetMs: 1 + keyed.indexOf(group),
      });
      expect(response.status, `${group}: ${response.body} ${(response.invocation?.logs ?? []).join('\n')}`).toBeLessThan(500);
    }
  });

  it('refused no function any call', () => {
    const refused = Object.fromEntries(
      stack.deployment.functions().map((candidate) => [candidate.description, stack.iam.refusedCalls(candidate.logicalId)]),
    );
    expect(Object.entries(refused).filter(([, calls]) => calls.length > 0)).toEqual([]);
  });

  it('grants nothing that no call used, besides what Lambda itself uses on the function’s behalf', () => {
    const unused: Array<{ fn: string } & Grant> = [];
    for (const candidate of stack.deployment.functions()) {
      for (const grant of stack.iam.grantsOf(candidate.logicalId)) {
        if (usedByLambdaItself(candidate, grant)) continue;
        if (!stack.iam.used(candidate.logicalId, grant)) unused.push({ fn: candidate.description, ...grant });
      }
    }
    expect(unused).toEqual([]);
  });
});

/**
 * Grants Lambda uses for the function rather than the function's code: writing its log group
 * (and only its own), reading the stream its event source mapping reads and sending to that
 * mapping's on-failure destination, consuming the queue a queue mapping reads (and only those), and X-Ray's segment upload, which has no
 * resource to scope. Anything else must be used by the code.
 */
function usedByLambdaItself(candidate: DeployedFunction, grant: Grant): boolean {
  const { deployment } = stack;
  if (grant.action.startsWith('logs:')) {
    const logGroup = candidate.logGroupId ? deployment.getAtt(candidate.logGroupId, 'Arn') : undefined;
    return ['logs:CreateLogStream', 'logs:PutLogEvents'].includes(grant.action) && grant.resource === logGroup;
  }
  if (grant.action.startsWith('xray:')) {
    return (
      ['xray:PutTraceSegments', 'xray:PutTelemetryRecords'].includes(grant.action) &&
      grant.resource === '*' &&
      candidate.tracing === 'Active'
    );
  }
  const mapping = deployment
    .ofType('AWS::Lambda::EventSourceMapping')
    .find(([, resource]) => resource.Properties.FunctionName?.Ref === candidate.logicalId);
  if (!mapping) return false;
  const [, { Properties: properties }] = mapping;
  const streamActions = ['dynamodb:DescribeStream', 'dynamodb:GetRecords', 'dynamodb:GetShardIterator', 'dynamodb:ListStreams'];
  if (streamActions.includes(grant.action)) return grant.resource === deployment.resolve(properties.EventSourceArn);
  const queueActions = ['sqs:SendMessage', 'sqs:GetQueueAttributes', 'sqs:GetQueueUrl'];
  if (queueActions.includes(grant.action) && grant.resource === deployment.resolve(properties.DestinationConfig?.OnFailure?.Destination)) {
    return true;
  }
  // A queue's mapping receives, deletes and hides its messages itself.
  const consumeActions = [
    'sqs:ReceiveMessage',
    'sqs:DeleteMessage',
    'sqs:ChangeMessageVisibility',
    'sqs:GetQueueAttributes',
    'sqs:GetQueueUrl',
  ];
  if (consumeActions.includes(grant.action)) return grant.resource === deployment.resolve(properties.EventSourceArn);
  return false;
}
