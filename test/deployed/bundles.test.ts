import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DeleteItemCommand, QueryCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KEY_RECHECK_MS } from '../../functions/core/fanout/key-liveness.js';
import { TENANT_READ_MAX_AGE_MS } from '../../functions/core/kernel/tenant-cache.js';
import { PRUNE_GRACE_MS } from '../../functions/core/model/retention.js';
import { DEPLOYED_WORKER_ARN, synthesizedAssembly } from '../helpers/synth.js';
import type { QueuedMessage } from './support/aws-stand-in.js';
import { type DeployedStack, deployStack } from './support/world.js';

/**
 * A webhook registered through the webhooks function reaches the webhook hook's instances
 * within a second (API.md section 14: the list is read at most once a second per instance,
 * core/kernel/tenant-cache.ts); the hook here read it for earlier tests a moment ago.
 */
const webhookListsRenewed = () => new Promise((resolve) => setTimeout(resolve, TENANT_READ_MAX_AGE_MS));

/**
 * The deployed artifacts, as Lambda runs them: the bundles of the shared `cdk synth`, each in a
 * node process of its own with the template's environment and role, invoked with the event
 * shapes AWS documents (HTTP API payload 2.0 behind the REQUEST authorizer, WebSocket
 * `$connect` / message / `$disconnect`, DynamoDB Streams records through the mapping's filter)
 * against DynamoDB Local. What a client of the deployed API sees is what these tests assert.
 */

let stack: DeployedStack;
let key: string;

beforeAll(async () => {
  stack = await deployStack();
  key = await stack.createKey('acme');
}, 180_000);

afterAll(async () => stack?.close());

function call(method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
  return stack.http.request(method, path, {
    headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
}

describe('the HTTP API behind the authorizer', () => {
  it('answers /health without a key, and refuses a request without a key before any function runs', async () => {
    // Act
    const health = await stack.http.request('GET', '/health');
    const calls = stack.http.authorizerCalls;
    const keyless = await stack.http.request('GET', '/v1/sessions');

    // Assess: API Gateway itself answers a missing identity source (docs/deploy.md).
    expect(health).toMatchObject({ status: 200, json: { ok: true } });
    expect(keyless).toMatchObject({ status: 401, json: { message: 'Unauthorized' } });
    expect(stack.http.authorizerCalls).toBe(calls);
  });

  it('serves the OpenAPI document from the copy beside the health bundle, without a key', async () => {
    // Act: the health function as deployed, which reads the document lib/ copied into its folder.
    const response = await stack.http.request('GET', '/v1/openapi.json');

    // Assess
    expect(response.status).toBe(200);
    expect(response.json).toEqual(JSON.parse(readFileSync(new URL('../../docs/openapi.json', import.meta.url), 'utf8')));
  });

  it('answers an unknown key with the contract’s 401 problem document', async () => {
    const response = await stack.http.request('GET', '/v1/sessions', { headers: { authorization: 'Bearer as_nobody' } });
    expect(response.status).toBe(401);
    expect(response.headers['content-type']).toBe('application/problem+json');
    expect(response.headers['www-authenticate']).toMatch(/^Bearer/);
    expect(response.json).toMatchObject({ code: 'unauthorized', status: 401 });
  });

  it('serves a conversation through every route group: agents, sessions, tree, state, decide, commits, webhooks', async () => {
    // Act
    const agent = await call('PUT', '/v1/agents/planner', { config: { model: 'small' } });
    const session = await call('POST', '/v1/sessions', { sessionId: 'trip', agentId: 'planner', userId: 'ada' });
    const appended = await call('POST', '/v1/sessions/trip/messages', {
      messages: [
        { id: 'u1', role: 'user', content: 'Plan a trip' },
        { id: 'a1', role: 'assistant', content: 'Where to?' },
      ],
    });
    const patched = await call(
      'PATCH',
      '/v1/sessions/trip/state',
      { destination: 'Lisbon', nights: 3 },
      { 'content-type': 'application/merge-patch+json' },
    );
    const refused = await call('POST', '/v1/sessions/trip/messages', { messages: [{ id: 'u9', role: 7 }] });
    const branch = await call('POST', '/v1/sessions/trip/messages', { parentId: 'u1', messages: [{ id: 'a1b', role: 'assistant' }] });
    const atBranch = await call('GET', '/v1/sessions/trip/state');
    const atFirst = await call('GET', '/v1/sessions/trip/state?node=a1');
    const stale = await call('PUT', '/v1/sessions/trip/state?node=a1', { nights: 4 }, { 'if-match': '"0"' });
    const decided = await call('POST', '/v1/sessions/trip/decide', {
      trigger: { type: 'client.messages', messages: [{ id: 'u2', role: 'user' }] },
    });
    const committed = await call('POST', '/v1/sessions/trip/commits?node=a1', {
      commands: [
        { key: 'budget', scope: 'thread', merge: 'disjoint', set: 900 },
        { key: 'home', scope: 'profile', merge: 'disjoint', set: 'Porto' },
      ],
    });
    const profile = await call('GET', '/v1/profiles/ada/state');
    const webhook = await call('POST', '/v1/webhooks', { url: 'https://hooks.example.com/agentstate', sessionId: 'trip' });
    const loopback = await call('POST', '/v1/webhooks', { url: 'http://127.0.0.1:9/hook' });
    const tree = await call('GET', '/v1/sessions/trip/tree');

    // Assess
    expect(agent.status).toBe(201);
    expect(session).toMatchObject({ status: 201, json: { sessionId: 'trip', agentId: 'planner', userId: 'ada' } });
    expect(appended).toMatchObject({ status: 201, json: { head: 'a1' } });
    expect(patched).toMatchObject({ status: 200, json: { node: 'a1', version: 1, state: { destination: 'Lisbon', nights: 3 } } });
    expect(patched.headers.etag).toBe('"1"');
    // The function's first refused body: zod's English messages come from a chunk loaded then.
    expect(refused).toMatchObject({
      status: 400,
      json: { code: 'invalid_request', detail: 'messages.0.role: Invalid input: expected string, received number' },
    });
    expect(branch.status).toBe(201);
    expect(atBranch.json).toMatchObject({ node: 'a1b', version: 0, state: null });
    expect(atFirst.json).toMatchObject({ node: 'a1', version: 1, state: { nights: 3 } });
    expect(stale).toMatchObject({ status: 412, json: { code: 'version_mismatch', currentVersion: 1 } });
    expect(stale.headers['content-type']).toBe('application/problem+json');
    expect(decided).toMatchObject({ status: 200, json: { head: 'u2' } });
    expect(committed).toMatchObject({
      status: 200,
      json: { state: { destination: 'Lisbon', nights: 3, budget: 900 }, profile: { state: { home: 'Porto' } } },
    });
    expect(profile).toMatchObject({ status: 200, json: { state: { home: 'Porto' } } });
    expect(webhook.status).toBe(201);
    // In a Lambda, webhooks must be public https endpoints.
    expect(loopback).toMatchObject({ status: 400, json: { code: 'invalid_request' } });
    expect(tree.json.nodes.map((node: { id: string }) => node.id).sort()).toEqual(['a1', 'a1b', 'root', 'u1', 'u2']);
  });

  it('finishes a delete that died halfway on the next write, which starts the session afresh', async () => {
    // Prepare: a session, and its delete stopped (as at a function timeout) right after it closed the session.
    const sessions = stack.deployment.functionNamed(/the sessions routes$/);
    expect((await call('PATCH', '/v1/sessions/halfway/state', { old: true })).status).toBe(200);
    let stopped = false;
    stack.aws.fault = (request) => {
      if (stopped || request.functionId !== sessions.logicalId || request.operation === 'Query' || request.operation === 'GetItem')
        return 'pass';
      stopped = true;
      return 'crash';
    };
    const deleting = await call('DELETE', '/v1/sessions/halfway');
    stack.aws.fault = () => 'pass';

    // Act: five minutes later, a state write, a read and an append.
    const later = { headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, clockOffsetMs: 5 * 60_000 };
    const written = await stack.http.request('PATCH', '/v1/sessions/halfway/state', { ...later, body: '{"fresh":true}' });
    const read = await call('GET', '/v1/sessions/halfway/versions');

    // Assess: the deleted session's history is gone; the write is its new version 1.
    expect(deleting.status).toBe(500);
    expect(written).toMatchObject({ status: 200, json: { version: 1, prevVersion: 0, state: { fresh: true } } });
    expect(read.json.versions ?? read.json.items).toHaveLength(1);
  });

  it('answers a DELETE that cannot erase in its time with 204, and the change hook’s role erases the rest, through a run that died', async () => {
    // Prepare: a session of 150 messages (its versions, node index, item), and a sessions
    // function that may erase for no time at all (`AGENTSTATE_DELETE_ERASE_MS`), as one whose
    // session is larger than its 20 s would.
    for (let append = 0; append < 3; append++) {
      const messages = Array.from({ length: 50 }, (_, index) => ({ role: 'user', content: `m${append}-${index}` }));
      expect((await call('POST', '/v1/sessions/handed/messages', { messages, state: { append } })).status).toBe(201);
    }
    await stack.stream.read(0, 200);
    const hook = stack.deployment.functionNamed(/change hook/);
    const partition = async () =>
      (
        await stack.admin.send(
          new QueryCommand({
            TableName: stack.deployment.tableName,
            KeyConditionExpression: 'pk = :pk',
            ExpressionAttributeValues: { ':pk': { S: 'S#acme#handed' } },
          }),
        )
      ).Items ?? [];
    const headers = { authorization: `Bearer ${key}` };

    // Act: the DELETE; the change hook's run of its hand-off killed after a few writes (as at
    // its timeout); the stream's retry of the record a minute later.
    const deleted = await stack.http.request('DELETE', '/v1/sessions/handed', { headers, variables: { AGENTSTATE_DELETE_ERASE_MS: '0' } });
    const read = await call('GET', '/v1/sessions/handed');
    const handOff = stack.stream.eventRecords(await stack.stream.read(1)).filter((record) => record.eventName === 'MODIFY');
    let writes = 0;
    stack.aws.fault = (request) =>
      request.functionId === hook.logicalId && request.operation !== 'Query' && ++writes > 3 ? 'crash' : 'pass';
    const died = await stack.lambda.invoke(hook, { Records: handOff });
    stack.aws.fault = () => 'pass';
    const halfway = await partition();
    const retried = await stack.lambda.invoke(hook, { Records: handOff }, { clockOffsetMs: 60_000 });
    const after = await partition();
    const written = await call('PATCH', '/v1/sessions/handed/state', { fresh: true });

    // Assess: 204 and unknown at once; the killed run left work, the retry finished it (only
    // tombstones and the closed fence are left), and the id's next write is version 1.
    expect(deleted.status).toBe(204);
    expect(read.status).toBe(404);
    expect(handOff).toHaveLength(1);
    expect(died.error).toBeDefined();
    expect(halfway.filter((item) => item.kind?.S !== 'x').length).toBeGreaterThan(0);
    expect(retried.result, retried.logs.join('\n')).toEqual({ batchItemFailures: [] });
    expect(after.filter((item) => item.kind?.S !== 'x')).toEqual([]);
    expect(after.filter((item) => item.fence !== undefined).map((item) => item.fence?.S)).toEqual(['closed']);
    expect(written).toMatchObject({ status: 200, json: { version: 1, prevVersion: 0 } });
  });

  it('holds a key limited to agents to them', async () => {
    // Prepare
    const limited = await stack.createKey('acme', ['planner']);
    const as = (headers: Record<string, string>) =>
      stack.http.request('GET', '/v1/agents', { headers: { authorization: `Bearer ${limited}`, ...headers } });

    // Act
    const without = await as({});
    const asPlanner = await as({ 'x-agent-id': 'planner' });
    const asOther = await as({ 'x-agent-id': 'writer' });

    // Assess
    expect(without).toMatchObject({ status: 403, json: { code: 'forbidden' } });
    expect(asPlanner.status).toBe(200);
    expect(asOther).toMatchObject({ status: 403, json: { code: 'forbidden' } });
  });

  it('serves the inspector page from the inspector bundle, with the stack’s WebSocket URL', async () => {
    const page = await stack.http.request('GET', '/');
    const config = await stack.http.request('GET', '/inspector/config.json');
    expect(page.status).toBe(200);
    expect(page.headers['content-type']).toMatch(/^text\/html/);
    expect(page.body).toContain('<script');
    expect(config.json).toMatchObject({ webSocketUrl: expect.stringMatching(/\/v1$/) });
  });
});

describe('decide with a lambda: worker', () => {
  it('invokes the worker through the Lambda client, a chunk its bundle loads only then, and commits the answer', async () => {
    // Prepare: the worker the stack allows (test/helpers/synth.ts), and an agent that uses it.
    const decide = stack.deployment.functionNamed(/the decide routes$/);
    stack.aws.lambdaWorkers.set(DEPLOYED_WORKER_ARN, () => ({
      state: { planned: true },
      messages: [{ id: 'lw-a1', role: 'assistant', content: 'Lisbon it is' }],
    }));
    expect((await call('PUT', '/v1/agents/lw-planner', { worker: { url: `lambda:${DEPLOYED_WORKER_ARN}` } })).status).toBe(201);
    expect((await call('POST', '/v1/sessions', { sessionId: 'lw-trip', agentId: 'lw-planner' })).status).toBe(201);

    // Act
    const decided = await call('POST', '/v1/sessions/lw-trip/decide', { trigger: { type: 'tick' } });

    // Assess: the worker was invoked by decide's function with the DecisionRequest, and its
    // answer committed; the Lambda client is not in the file Lambda imports, but beside it.
    expect(decided).toMatchObject({ status: 200, json: { state: { planned: true }, head: 'lw-a1', changed: true } });
    expect(stack.aws.lambdaInvocations).toEqual([
      {
        functionId: decide.logicalId,
        arn: DEPLOYED_WORKER_ARN,
        payload: expect.objectContaining({ session_id: 'lw-trip', agent_id: 'lw-planner', trigger: { type: 'tick' } }),
      },
    ]);
    const lambdaClient = 'AWSGirApiService';
    const folder = join(await synthesizedAssembly(), decide.assetPath);
    expect(readFileSync(join(folder, 'index.mjs'), 'utf8')).not.toContain(lambdaClient);
    const chunks = readdirSync(join(folder, 'chunks')).filter((file) => file.endsWith('.mjs'));
    expect(chunks.filter((file) => readFileSync(join(folder, 'chunks', file), 'utf8').includes(lambdaClient))).toHaveLength(1);
  });
});

describe('what a function tells its operator', () => {
  it('logs each request as one JSON line with its Lambda request id, and a write’s metrics in the embedded metric format', async () => {
    // Act
    const written = await call('PATCH', '/v1/sessions/observed/state', { seen: true }, { 'x-agent-id': 'planner' });
    const refused = await call('PUT', '/v1/sessions/observed/state', { seen: false }, { 'if-match': '"7"' });

    // Assess: the request line
    const lines = (written.invocation?.logs ?? []).map((line) => JSON.parse(line));
    const request = lines.find((line) => line.message === 'request');
    expect(request).toMatchObject({
      level: 'INFO',
      service: 'agentstate',
      function_request_id: written.invocation?.requestId,
      method: 'PATCH',
      route: 'PATCH /v1/sessions/{sid}/state',
      path: '/v1/sessions/observed/state',
      status: 200,
      tenant: 'acme',
      sessionId: 'observed',
      agentId: 'planner',
      latencyMs: expect.any(Number),
      apiRequestId: expect.any(String),
    });
    // … and the metrics: CloudWatch reads `_aws` lines of the log as metrics.
    const emf = lines.find((line) => line._aws);
    expect(emf?._aws.CloudWatchMetrics[0]).toMatchObject({ Namespace: 'agentstate', Dimensions: [['service']] });
    expect(emf).toMatchObject({ Writes: 1, service: 'agentstate' });
    const mismatch = (refused.invocation?.logs ?? []).map((line) => JSON.parse(line));
    expect(mismatch.find((line) => line.message === 'request')).toMatchObject({ status: 412, code: 'version_mismatch' });
    expect(mismatch.find((line) => line._aws)).toMatchObject({ VersionMismatches: 1 });
  });

  it('at the default tracing level sends no segment of its own, and still answers, logs its line and counts its metrics', async () => {
    // Prepare: the stack as synthesized, at the default level (Lambda's own tracing).
    const state = stack.deployment.functionNamed(/the state routes$/);
    const sent = stack.traceSegments.length;

    // Act
    const written = await call('PATCH', '/v1/sessions/untraced/state', { seen: true });
    const read = await call('GET', '/v1/sessions/untraced/state');
    await new Promise((resolve) => setTimeout(resolve, 200));

    // Assess: Lambda records the invocation; the function itself sends X-Ray nothing.
    expect(state.environment.AGENTSTATE_TRACING).toBe('lambda');
    expect(state.tracing).toBe('Active');
    expect(written.status).toBe(200);
    expect(read).toMatchObject({ status: 200, json: { state: { seen: true } } });
    expect(stack.traceSegments.slice(sent)).toEqual([]);
    const lines = (written.invocation?.logs ?? []).map((line) => JSON.parse(line));
    expect(lines.find((line) => line.message === 'request')).toMatchObject({ status: 200, route: 'PATCH /v1/sessions/{sid}/state' });
    expect(lines.find((line) => line._aws)).toMatchObject({ Writes: 1 });
  });

  it('at the detailed tracing level traces a request in X-Ray: the handler and its DynamoDB calls', async () => {
    // Act: the same bundle with the variable a stack synthesized with `tracing: 'detailed'` sets
    // (test/infra/tracing.test.ts); it loads Powertools' Tracer at INIT.
    const read = await stack.http.request('GET', '/v1/sessions/observed/state', {
      headers: { authorization: `Bearer ${key}` },
      variables: { AGENTSTATE_TRACING: 'detailed' },
    });
    await new Promise((resolve) => setTimeout(resolve, 200));

    // Assess
    expect(read.status).toBe(200);
    const handler = stack.traceSegments.find(
      (segment) => segment.name === '## request' && segment.annotations?.route === 'GET /v1/sessions/{sid}/state',
    );
    expect(handler).toBeDefined();
    const dynamoDb = stack.traceSegments.filter((segment) => segment.name === 'DynamoDB' && segment.parent_id === handler?.id);
    expect(dynamoDb.length).toBeGreaterThan(0);
  });

  it('logs a worker that failed as its request line, a warning with the code, and counts the call and its time', async () => {
    // Prepare: an agent whose worker cannot be reached.
    expect((await call('PUT', '/v1/agents/unreachable', { worker: { url: 'https://worker.invalid/decide' } })).status).toBe(201);
    expect((await call('POST', '/v1/sessions', { sessionId: 'unreachable', agentId: 'unreachable' })).status).toBe(201);

    // Act
    const decided = await call('POST', '/v1/sessions/unreachable/decide', { trigger: { type: 'tick' } });

    // Assess: one line says it all; no stack, no second line about it.
    expect(decided.status).toBe(502);
    const lines = (decided.invocation?.logs ?? []).map((line) => JSON.parse(line));
    expect(lines.find((line) => line.message === 'request')).toMatchObject({
      level: 'WARN',
      status: 502,
      code: 'worker_failed',
      route: 'POST /v1/sessions/{sid}/decide',
      tenant: 'acme',
      sessionId: 'unreachable',
    });
    expect(lines.filter((line) => line.level === 'ERROR' || line.stack || line.stackTrace)).toEqual([]);
    expect(lines.find((line) => line._aws)).toMatchObject({ WorkerFailures: 1, WorkerLatency: expect.any(Number) });
  });

  it('logs each stream batch of the change hook, with how late its events are and how many records failed', async () => {
    // Prepare
    await stack.stream.read(0, 200);
    expect((await call('PATCH', '/v1/sessions/lagging/state', { step: 1 })).status).toBe(200);
    const records = stack.stream.eventRecords(await stack.stream.read(1));

    // Act: once with EventBridge unreachable, once with it back.
    stack.aws.eventBridgeDown = true;
    const [failed] = await stack.stream.deliver(records);
    stack.aws.eventBridgeDown = false;
    const [delivered] = await stack.stream.deliver(records);

    // Assess
    const linesOf = (invocation = failed?.invocation) => (invocation?.logs ?? []).map((line) => JSON.parse(line));
    expect(linesOf(failed?.invocation).find((line) => line.message === 'stream batch')).toMatchObject({
      level: 'WARN',
      records: 1,
      failed: 1,
    });
    expect(linesOf(failed?.invocation).find((line) => line._aws)).toMatchObject({
      EventBatchFailures: 1,
      EventDeliveryLag: expect.any(Number),
    });
    expect(linesOf(delivered?.invocation).find((line) => line.message === 'stream batch')).toMatchObject({
      level: 'INFO',
      records: 1,
      failed: 0,
    });
    const metrics = linesOf(delivered?.invocation).find((line) => line._aws);
    expect(metrics.EventDeliveryLag).toBeGreaterThanOrEqual(0);
    expect(metrics.EventBatchFailures).toBeUndefined();
  });

  it('queues each webhook delivery in its lane: one FIFO message group per webhook and session, in version order, none twice, no secret', async () => {
    // Prepare: two webhooks of the tenant, one with a secret; both follow every session.
    const first = await call('POST', '/v1/webhooks', { url: 'https://one.example.com/hook', secret: 'lane-secret-1' });
    const second = await call('POST', '/v1/webhooks', { url: 'https://two.example.com/hook' });
    const ids = [first.json.id as string, second.json.id as string];
    await webhookListsRenewed();
    const waiting = () =>
      stack.queue
        .waiting(stack.deployment.functionNamed(/delivery hook/))
        .filter((message) => ids.includes(message.attributes.webhookId?.StringValue ?? ''));
    await stack.stream.read(0, 200);

    // Act: two versions of each of two sessions; the stream into the hooks, twice (a retried batch).
    for (const step of [1, 2]) {
      for (const sessionId of ['lane-a', 'lane-b'])
        expect((await call('PATCH', `/v1/sessions/${sessionId}/state`, { step })).status).toBe(200);
    }
    const records = stack.stream.eventRecords(await stack.stream.read(4));
    await stack.stream.deliver(records);
    await stack.stream.deliver(records);

    // Assess: 2 webhooks × 2 sessions × 2 versions, each once, in 4 groups of one webhook and one session each.
    const queued = waiting();
    expect(queued).toHaveLength(8);
    const groups = new Map<string, string[]>();
    for (const message of queued) {
      const lane = `${message.attributes.webhookId?.StringValue} ${message.attributes.sessionId?.StringValue}`;
      groups.set(message.groupId as string, [...(groups.get(message.groupId as string) ?? []), `${lane} ${JSON.parse(message.body).id}`]);
    }
    expect([...groups.values()].sort()).toEqual(
      ids
        .flatMap((id) =>
          ['lane-a', 'lane-b'].map((sessionId) => [`${id} ${sessionId} ${sessionId}:1`, `${id} ${sessionId} ${sessionId}:2`]),
        )
        .sort(),
    );
    expect(JSON.stringify(queued)).not.toContain('lane-secret-1');
    for (const id of ids) expect((await call('DELETE', `/v1/webhooks/${id}`)).status).toBe(204);
  });

  it('keeps a delivery queued while its dead letter cannot be written, and dead-letters it when it comes back', async () => {
    // Prepare: a webhook that cannot be reached, and one event of its session queued.
    const hook = await call('POST', '/v1/webhooks', { url: 'https://unreachable.invalid/hook', sessionId: 'requeued' });
    const webhookId = hook.json.id as string;
    await webhookListsRenewed();
    const deliveryHook = stack.deployment.functionNamed(/delivery hook/);
    const mine = (message: QueuedMessage) => message.attributes.webhookId?.StringValue === webhookId;
    await stack.stream.read(0, 200);
    expect((await call('PATCH', '/v1/sessions/requeued/state', { step: 1 })).status).toBe(200);
    await stack.stream.deliver(stack.stream.eventRecords(await stack.stream.read(1)));
    const [queued] = stack.queue.waiting(deliveryHook).filter(mine);

    // Act: the first receive with every dead-letter write failing, the next one without.
    stack.aws.fault = (request) =>
      request.functionId === deliveryHook.logicalId && request.operation === 'UpdateItem' ? 'lose-answer' : 'pass';
    const [first] = await stack.queue.deliver(mine);
    stack.aws.fault = () => 'pass';
    const stillQueued = stack.queue.waiting(deliveryHook).filter(mine);
    const [second] = await stack.queue.deliver(mine);

    // Assess: reported, kept, then delivered into its dead letter and gone from the queue.
    expect(first?.invocation.result).toEqual({ batchItemFailures: [{ itemIdentifier: queued?.messageId }] });
    expect(stillQueued.map((message) => message.messageId)).toEqual([queued?.messageId]);
    expect(second?.invocation.result).toEqual({ batchItemFailures: [] });
    expect(second?.records[0]?.attributes.ApproximateReceiveCount).toBe('2');
    expect(stack.queue.waiting(deliveryHook).filter(mine)).toEqual([]);
    const letters = await call('GET', `/v1/webhooks/${webhookId}/dead-letters`);
    expect(letters.json.deadLetters.map((letter: { eventId: string }) => letter.eventId)).toEqual(['requeued:1']);
    expect((await call('DELETE', `/v1/webhooks/${webhookId}`)).status).toBe(204);
  });

  it("opens a dead endpoint's breaker for every lane: after one failed delivery, the others are dead letters without an attempt", async () => {
    // Prepare: a webhook that cannot be reached, followed by three sessions (three lanes).
    const hook = await call('POST', '/v1/webhooks', { url: 'https://breaker.invalid/hook' });
    const webhookId = hook.json.id as string;
    await webhookListsRenewed();
    const mine = (message: QueuedMessage) => message.attributes.webhookId?.StringValue === webhookId;
    await stack.stream.read(0, 200);
    for (const sessionId of ['breaker-1', 'breaker-2', 'breaker-3']) {
      expect((await call('PATCH', `/v1/sessions/${sessionId}/state`, { step: 1 })).status).toBe(200);
    }
    await stack.stream.deliver(stack.stream.eventRecords(await stack.stream.read(3)));

    // Act: the delivery hook takes the three lanes' messages, one per invocation.
    const sent = await stack.queue.deliver(mine);

    // Assess: the first tried 3 times and opened the breaker on the webhook's item; the two
    // after it read it there and did not try.
    expect(sent.map(({ invocation }) => invocation.result)).toEqual([0, 1, 2].map(() => ({ batchItemFailures: [] })));
    const letters = (await call('GET', `/v1/webhooks/${webhookId}/dead-letters`)).json.deadLetters as Array<{
      attempts: number;
      lastError: string;
    }>;
    expect(letters.map((letter) => letter.attempts).toSorted()).toEqual([0, 0, 3]);
    for (const letter of letters.filter((candidate) => candidate.attempts === 0)) {
      expect(letter.lastError).toMatch(/^not attempted: the endpoint failed a delivery, so its breaker is open until /);
    }
    expect((await call('DELETE', `/v1/webhooks/${webhookId}`)).status).toBe(204);
  });

  it('logs every WebSocket event as a line of its own: the WebSocket access log', async () => {
    const connected = await stack.webSocket.connect('conn-logged', { token: key });
    const line = connected.logs.map((entry) => JSON.parse(entry)).find((entry) => entry.message === 'websocket');
    expect(line).toMatchObject({
      eventType: 'CONNECT',
      route: '$connect',
      connectionId: 'conn-logged',
      status: 200,
      function_request_id: connected.requestId,
    });
  });
});

describe('change events from the stream', () => {
  it('reach EventBridge and a follower, and a batch reports the first record it could not publish', async () => {
    // Prepare: a follower of the session, then writes whose records the mapping lets through.
    expect((await stack.webSocket.connect('conn-follow', { token: key })).result).toEqual({ statusCode: 200 });
    const subscribed = await stack.webSocket.send('conn-follow', JSON.stringify({ action: 'subscribe', sessionId: 'events' }));
    await stack.stream.read(0, 200);
    expect((await call('PATCH', '/v1/sessions/events/state', { step: 1 })).status).toBe(200);
    expect((await call('POST', '/v1/sessions/events/messages', { messages: [{ id: 'm1', role: 'user' }] })).status).toBe(201);
    expect((await call('PATCH', '/v1/sessions/events/state', { step: 2 })).status).toBe(200);
    const all = await stack.stream.read(3);
    const records = stack.stream.eventRecords(all);

    // Act: EventBridge unreachable, then back.
    stack.aws.eventBridgeDown = true;
    // The change hook publishes; the webhook hook, reading the same records, has no bus.
    const liveOnly = (deliveries: Awaited<ReturnType<typeof stack.stream.deliver>>) =>
      deliveries.filter(({ fn }) => fn.description.includes('change hook'));
    const [failed] = liveOnly(await stack.stream.deliver(records));
    stack.aws.eventBridgeDown = false;
    const from = failed?.invocation.result.batchItemFailures[0]?.itemIdentifier;
    const [retried] = liveOnly(
      await stack.stream.deliver(records.slice(records.findIndex((record) => record.dynamodb.SequenceNumber === from))),
    );

    // Assess: the head marker of the append was filtered out; two versions remain.
    expect(JSON.parse(subscribed.result.body)).toEqual({ type: 'subscribed', sessionId: 'events' });
    expect(all.length).toBeGreaterThan(records.length);
    expect(records).toHaveLength(2);
    expect(failed?.invocation.result).toEqual({ batchItemFailures: [{ itemIdentifier: records[0]?.dynamodb.SequenceNumber }] });
    expect(retried?.invocation.result).toEqual({ batchItemFailures: [] });
    const entries = stack.aws.eventBridgeEntries.filter((entry) => JSON.parse(entry.Detail).sessionId === 'events');
    expect(entries.map((entry) => [entry.Source, entry.DetailType, JSON.parse(entry.Detail).version])).toEqual([
      ['agentstate', 'state.changed', 1],
      ['agentstate', 'state.changed', 2],
    ]);
    expect(JSON.parse(entries[1]?.Detail)).toMatchObject({ tenant: 'acme', id: 'events:2', prev: { step: 1 }, next: { step: 2 } });
    const live = (stack.aws.posted.get('conn-follow') ?? []).map((frame) => JSON.parse(frame));
    // At least once: the failed batch may have reached the follower before the bus refused it.
    expect(new Set(live.map((event) => event.id))).toEqual(new Set(['events:1', 'events:2']));
  });
});

describe('blind commits to a document alone', () => {
  it('are written key by key by the commits function’s own role, and the change hook sends an event per version', async () => {
    // Prepare: sessions of one user, each committing a member of one key of the shared document and of the profile.
    await stack.stream.read(0, 200);
    const writers = 8;
    for (let index = 0; index < writers; index++) {
      expect((await call('POST', '/v1/sessions', { sessionId: `keyed-${index}`, userId: 'grace' })).status).toBe(201);
    }
    await stack.stream.read(0, 200);

    // Act: at once, without expectedVersion.
    const answers = await Promise.all(
      Array.from({ length: writers }, (_, index) =>
        call('POST', `/v1/sessions/keyed-${index}/commits`, {
          commands: [{ key: 'keyed', scope: index % 2 === 0 ? 'shared' : 'profile', merge: 'commutative', set: { [`w${index}`]: index } }],
        }),
      ),
    );
    const records = stack.stream.eventRecords(await stack.stream.read(writers));
    const delivered = await stack.stream.deliver(records);

    // Assess: every commit landed with a version of its own; every member is there.
    expect(answers.map((answer) => answer.status)).toEqual(Array.from({ length: writers }, () => 200));
    const versionsOf = (scope: string) =>
      answers
        .filter((_, index) => (index % 2 === 0) === (scope === 'shared'))
        .map((answer) => answer.json[scope].version)
        .sort();
    expect(versionsOf('shared')).toEqual([1, 2, 3, 4]);
    expect(versionsOf('profile')).toEqual([1, 2, 3, 4]);
    expect((await call('GET', '/v1/shared/state')).json.state.keyed).toEqual({ w0: 0, w2: 2, w4: 4, w6: 6 });
    expect((await call('GET', '/v1/profiles/grace/state')).json.state.keyed).toEqual({ w1: 1, w3: 3, w5: 5, w7: 7 });
    expect(delivered.every(({ invocation }) => invocation.result.batchItemFailures.length === 0)).toBe(true);
    const entries = stack.aws.eventBridgeEntries
      .map((entry) => [entry.DetailType, JSON.parse(entry.Detail)])
      .filter(([, detail]) => 'keyed' in (detail.next ?? {}));
    for (const type of ['shared.changed', 'profile.changed']) {
      const events = entries.filter(([detailType]) => detailType === type).map(([, detail]) => detail);
      expect(events.map((event) => event.version)).toEqual([1, 2, 3, 4]);
      for (const [index, event] of events.entries()) expect(event.prev).toEqual(index === 0 ? null : events[index - 1].next);
    }
  });
});

describe('expiry from the stream', () => {
  it('sweeps a session whose item TTL removed with the change hook’s own role, and sends session.expired', async () => {
    // Prepare: a session that expires a second after its last write, and that moment passed.
    await stack.stream.read(0, 200);
    expect((await call('PATCH', '/v1/sessions/fleeting/state', { step: 1 })).status).toBe(200);
    // With metadata, which an item of its own holds (session-item.ts): the sweep erases it too.
    expect((await call('PATCH', '/v1/sessions/fleeting', { ttlSeconds: 1, metadata: { topic: 'fleeting' } })).status).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    expect((await call('GET', '/v1/sessions/fleeting')).status).toBe(404);
    // DynamoDB Local runs no TTL: the test removes the item, and its record says who did, as DynamoDB's own does.
    await stack.admin.send(
      new DeleteItemCommand({ TableName: stack.deployment.tableName, Key: { pk: { S: 'S#acme#fleeting' }, sk: { S: 'S' } } }),
    );
    const removed = (await stack.stream.read(1)).filter((record) => record.eventName === 'REMOVE' && record.dynamodb?.Keys?.sk?.S === 'S');
    const byTtl = removed.map((record) => ({ ...record, userIdentity: { Type: 'Service', PrincipalId: 'dynamodb.amazonaws.com' } }));

    // Act: the mappings deliver the TTL deletion, then what the sweep wrote.
    const swept = await stack.stream.deliver(stack.stream.eventRecords(byTtl));
    const fence = stack.stream.eventRecords(await stack.stream.read(1));
    const delivered = await stack.stream.deliver(fence);

    // Assess: the change hook swept it (no failure, every change a tombstone), and the event went out.
    expect(removed).toHaveLength(1);
    const sweeper = swept.find(({ fn }) => fn.description.includes('change hook'));
    expect(sweeper?.invocation.result).toEqual({ batchItemFailures: [] });
    expect(delivered.every(({ invocation }) => invocation.result.batchItemFailures.length === 0)).toBe(true);
    const { Items } = await stack.admin.send(
      new QueryCommand({
        TableName: stack.deployment.tableName,
        KeyConditionExpression: 'pk = :pk',
        ExpressionAttributeValues: { ':pk': { S: 'S#acme#fleeting' } },
      }),
    );
    expect((Items ?? []).map((item) => item.kind?.S)).toEqual((Items ?? []).map(() => 'x'));
    const entries = stack.aws.eventBridgeEntries.filter((entry) => JSON.parse(entry.Detail).sessionId === 'fleeting');
    expect(entries.map((entry) => entry.DetailType)).toContain('session.expired');
    expect(JSON.parse(entries.find((entry) => entry.DetailType === 'session.expired')?.Detail)).toMatchObject({
      id: 'expired/fleeting/0',
      version: 1,
    });
  });
});

describe('retention from the stream', () => {
  it('prunes a session with large states with the change hook’s own role: 410 for what fell out, what nodes point at and splice chains kept', async () => {
    // Prepare: a large state at the root (kept: the root points at it), a message under it, then
    // changes at the message: splices on it, a large change (a checkpoint of its own), splices on that.
    await stack.stream.read(0, 200);
    const random = (count: number) => Array.from({ length: count }, (_, index) => `${index}:${Math.random().toString(36).repeat(4)}`);
    const big = random(1500);
    const other = random(400);
    expect((await call('PUT', '/v1/sessions/pruned/state', { big, n: 0 })).status).toBe(200);
    expect((await call('PATCH', '/v1/sessions/pruned', { retention: { keepVersions: 2 } })).status).toBe(200);
    expect((await call('POST', '/v1/sessions/pruned/messages', { messages: [{ id: 'a', role: 'user', content: 'hi' }] })).status).toBe(201);
    for (const patch of [{ n: 1 }, { n: 2 }, { other }, { n: 4 }, { n: 5 }, { n: 6 }]) {
      expect((await call('PATCH', '/v1/sessions/pruned/state', patch)).status).toBe(200);
    }
    const records = stack.stream.eventRecords(await stack.stream.read(7));
    // Past the grace in which the webhook consumer may still read a version's previous one.
    await new Promise((resolve) => setTimeout(resolve, PRUNE_GRACE_MS + 100));

    // Act: the mappings deliver the versions; the change hook's first run for the session prunes.
    const delivered = await stack.stream.deliver(records);

    // Assess: no failure; 2 to 4 are pruned; the root's version, the window (6, 7) and the
    // version of the head's chain below the window (5) stay, and both nodes read whole.
    expect(delivered.every(({ invocation }) => invocation.result.batchItemFailures.length === 0)).toBe(true);
    const pruned = await call('GET', '/v1/sessions/pruned/versions/3');
    expect(pruned.status).toBe(410);
    expect(pruned.json).toMatchObject({ code: 'version_pruned', version: 3 });
    const list = await call('GET', '/v1/sessions/pruned/versions?limit=10');
    expect(list.json.versions.map((version: { version: number }) => version.version)).toEqual([7, 6, 5, 1]);
    expect(list.json.pruned).toEqual({ before: 5 });
    expect((await call('GET', '/v1/sessions/pruned/state?node=root')).json).toMatchObject({ version: 1, state: { big, n: 0 } });
    expect((await call('GET', '/v1/sessions/pruned/state')).json).toMatchObject({ version: 7, state: { big, n: 6, other } });
  });
});

describe('answers past Lambda’s payload', () => {
  it('reads back a 4 MiB state whose strings hold JSON text, though the answer’s text escapes past Lambda’s 6 MB', async () => {
    // Prepare: tool outputs kept as JSON text, about 4.15 MB of state: every `"` and `\` of them is
    // escaped once in the state's JSON and again inside Lambda's answer. Sent as a merge patch,
    // which API Gateway passes as base64 (as application/json its text would not fit the event).
    const output = JSON.stringify({ rows: Array.from({ length: 30 }, (_, index) => ({ id: `r${index}`, path: 'C:\\work\\"quoted"' })) });
    const state = { outputs: Array.from({ length: Math.floor(4_150_000 / (JSON.stringify(output).length + 1)) }, () => output) };
    const stateText = JSON.stringify(state);
    expect(Buffer.byteLength(stateText)).toBeLessThanOrEqual(4 * 1024 * 1024);
    expect(Buffer.byteLength(JSON.stringify(stateText))).toBeGreaterThan(6 * 1024 * 1024);
    const written = await stack.http.request('PATCH', '/v1/sessions/escaped/state', {
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/merge-patch+json' },
      body: stateText,
    });
    expect(written.status).toBe(200);

    // Act
    const read = await call('GET', '/v1/sessions/escaped/state');

    // Assess: the state whole, as written.
    expect(read.status).toBe(200);
    expect(read.json.state).toEqual(state);
  });
});

describe('reads in parts, each within Lambda’s payload', () => {
  it('reads back 8 MB of notes on one node in parts (the state’s answer, then GET …/notes), and pages of 2.5 MB states one by one', async () => {
    // Prepare: 80 notes of 100 KB on one node, put at once; two versions of 2.5 MB of state.
    expect((await call('POST', '/v1/sessions', { sessionId: 'parts' })).status).toBe(201);
    expect((await call('POST', '/v1/sessions/parts/messages', { messages: [{ id: 'a1', role: 'checkpoint' }] })).status).toBe(201);
    const keys = Array.from({ length: 80 }, (_, n) => `task-${String(n).padStart(2, '0')}`);
    const puts = await Promise.all(
      keys.map((key) => call('PUT', `/v1/sessions/parts/nodes/a1/notes/${key}`, { key, blob: 'n'.repeat(100_000) })),
    );
    expect(puts.map((put) => put.status)).toEqual(keys.map(() => 200));
    for (const tag of ['one', 'two']) {
      const written = await stack.http.request('PUT', '/v1/sessions/parts/state', {
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ tag, blob: 's'.repeat(2_500_000) }),
      });
      expect(written.status).toBe(200);
    }

    // Act
    const state = await call('GET', '/v1/sessions/parts/state?node=a1&notes=1');
    const notes = { ...state.json.notes };
    for (let cursor = state.json.notesNext; cursor !== undefined; ) {
      const part = await call('GET', `/v1/sessions/parts/notes?nodes=a1&cursor=${cursor}`);
      expect(part.status).toBe(200);
      Object.assign(notes, part.json.notes.a1);
      cursor = part.json.next;
    }
    const pages = [];
    for (let cursor = ''; ; ) {
      const page = await call('GET', `/v1/sessions/parts/versions${cursor}`);
      expect(page.status).toBe(200);
      pages.push(page.json.versions.map((version: { state: { tag: string } }) => version.state.tag));
      if (!page.json.next) break;
      cursor = `?cursor=${page.json.next}`;
    }

    // Assess: every note, whole; every version, a page each.
    expect(state.status).toBe(200);
    expect(state.json.notesNext).toEqual(expect.any(String));
    expect(Object.keys(notes).sort()).toEqual(keys);
    expect(notes['task-42']).toEqual({ key: 'task-42', blob: 'n'.repeat(100_000) });
    expect(pages).toEqual([['two'], ['one']]);
  });
});

describe('retention on the schedule', () => {
  it('prunes with the change hook’s own role, invoked by the schedule rule, what aged out of keepDays with no write after it', async () => {
    // Prepare: three versions, then a day's window; the PATCH marks the session due at once.
    for (const n of [1, 2, 3]) expect((await call('PATCH', '/v1/sessions/aging/state', { n })).status).toBe(200);
    expect((await call('PATCH', '/v1/sessions/aging', { retention: { keepDays: 1 } })).status).toBe(200);
    // The rule's one target, invoked as EventBridge invokes it.
    const rules = stack.deployment.ofType('AWS::Events::Rule').filter(([, resource]) => resource.Properties?.ScheduleExpression);
    expect(rules.map(([, rule]) => rule.Properties?.ScheduleExpression)).toEqual(['rate(1 minute)']);
    const targetId = rules[0]?.[1].Properties?.Targets[0].Arn['Fn::GetAtt'][0];
    const target = stack.deployment.functions().find((fn) => fn.logicalId === targetId);
    expect(target?.description).toMatch(/change hook/);
    const sweep = async (clockOffsetMs: number) => {
      const invocation = await stack.lambda.invoke(target as never, scheduledSweep(Date.now() + clockOffsetMs), { clockOffsetMs });
      expect(invocation.error).toBeUndefined();
      return invocation.logs.map((line) => JSON.parse(line)).find((line) => line.message === 'prune sweep');
    };

    // Act: a sweep now runs it and prunes nothing (every version is younger than a day); one a
    // day and a minute later (a function whose clock is that far on) prunes what aged out.
    expect(await sweep(0)).toMatchObject({ level: 'INFO', sessions: expect.any(Number) });
    expect((await call('GET', '/v1/sessions/aging/versions/1')).status).toBe(200);
    const later = await sweep(24 * 60 * 60_000 + 60_000);

    // Assess: versions 1 and 2 are pruned; the head's (3) reads.
    expect(later.pruned).toBeGreaterThanOrEqual(1);
    expect((await call('GET', '/v1/sessions/aging/versions/1')).status).toBe(410);
    expect((await call('GET', '/v1/sessions/aging/versions/2')).json).toMatchObject({ code: 'version_pruned', version: 2 });
    expect((await call('GET', '/v1/sessions/aging/state')).json).toMatchObject({ version: 3, state: { n: 3 } });
  });

  it('finishes with the change hook’s own role, on its schedule, the erase of a DELETE that died holding its fence, and of one whose hand-off was lost', async () => {
    // Prepare: two sessions of a message and a state each.
    for (const sid of ['died', 'lost']) {
      const written = await call('POST', `/v1/sessions/${sid}/messages`, {
        messages: [{ role: 'user', content: `secret of ${sid}` }],
        state: { sid },
      });
      expect(written.status).toBe(201);
    }
    await stack.stream.read(0, 200);
    const sessions = stack.deployment.functionNamed(/the sessions routes$/);
    const hook = stack.deployment.functionNamed(/change hook/);
    const partition = (sid: string) => itemsOf(`S#acme#${sid}`);
    const unerased = async (sid: string) => (await partition(sid)).filter((item) => item.kind?.S !== 'x').length;

    // Act: a DELETE whose function dies right after its fence lands (as at its timeout), and
    // the same DELETE sent again at once, within the dead one's hold; a DELETE that hands its
    // erase to the change hook at once, whose run dies a write after its claim, and whose record the
    // stream gives up on (its retries spent: the on-failure queue). No request of either id
    // after that: a sweep of the schedule two minutes on, past both holds.
    let stopped = false;
    stack.aws.fault = (request) => {
      if (stopped || request.functionId !== sessions.logicalId || request.operation !== 'PutItem') return 'pass';
      stopped = true;
      return 'crash';
    };
    const died = await call('DELETE', '/v1/sessions/died');
    stack.aws.fault = () => 'pass';
    const retried = await call('DELETE', '/v1/sessions/died');
    const heldOn = await unerased('died');
    const handed = await stack.http.request('DELETE', '/v1/sessions/lost', {
      headers: { authorization: `Bearer ${key}` },
      variables: { AGENTSTATE_DELETE_ERASE_MS: '0' },
    });
    const handOff = stack.stream.eventRecords(await stack.stream.read(1)).filter((record) => record.eventName === 'MODIFY');
    let writes = 0;
    stack.aws.fault = (request) =>
      request.functionId === hook.logicalId && request.operation !== 'Query' && ++writes > 1 ? 'crash' : 'pass';
    const hookRun = await stack.lambda.invoke(hook, { Records: handOff });
    stack.aws.fault = () => 'pass';
    const lostOn = await unerased('lost');
    const later = 2 * 60_000;
    const sweep = await stack.lambda.invoke(hook, scheduledSweep(Date.now() + later), { clockOffsetMs: later });

    // Assess: both read as unknown from their DELETEs on; the retry answered 204 and left the
    // erase (the hold was live); the sweep erased both: tombstones and the closed fence alone,
    // nothing due any more; the id's next write is version 1.
    expect(died.status).toBe(500);
    expect(retried.status).toBe(204);
    expect(heldOn).toBeGreaterThan(0);
    expect(handed.status).toBe(204);
    expect(handOff).toHaveLength(1);
    expect(hookRun.error).toBeDefined();
    expect(lostOn).toBeGreaterThan(0);
    expect(sweep.error, sweep.logs.join('\n')).toBeUndefined();
    for (const sid of ['died', 'lost']) {
      const items = await partition(sid);
      expect(items.filter((item) => item.kind?.S !== 'x')).toEqual([]);
      expect(items.filter((item) => item.fence !== undefined).map((item) => item.fence?.S)).toEqual(['closed']);
      expect(items.filter((item) => item.dsk !== undefined)).toEqual([]);
      expect(JSON.stringify(items)).not.toContain('secret');
      expect((await call('GET', `/v1/sessions/${sid}`)).status).toBe(404);
    }
    const swept = sweep.logs.map((line) => JSON.parse(line)).find((line) => line.message === 'prune sweep');
    expect(swept.erased).toBeGreaterThanOrEqual(2);
    expect(await call('PATCH', '/v1/sessions/died/state', { fresh: true })).toMatchObject({ status: 200, json: { version: 1 } });
  });
});

describe('memory events from the stream', () => {
  it('reach EventBridge and a follower of the namespace: every put and delete, in order, with next and prev', async () => {
    // Prepare: a connection following a namespace, then a put, a replace and a delete below it.
    expect((await stack.webSocket.connect('conn-memory', { token: key })).result).toEqual({ statusCode: 200 });
    const subscribed = await stack.webSocket.send('conn-memory', JSON.stringify({ action: 'subscribe', namespace: ['notes'] }));
    await stack.stream.read(0, 200);
    expect((await call('PUT', '/v1/memory/notes/n1/k', { value: { step: 1 } })).status).toBe(201);
    expect((await call('PUT', '/v1/memory/notes/n1/k', { value: { step: 2 } })).status).toBe(200);
    expect((await call('DELETE', '/v1/memory/notes/n1/k')).status).toBe(204);
    const records = stack.stream.eventRecords(await stack.stream.read(3));

    // Act
    const deliveries = await stack.stream.deliver(records);

    // Assess
    expect(JSON.parse(subscribed.result.body)).toEqual({ type: 'subscribed', namespace: ['notes'] });
    expect(deliveries.map((delivery) => delivery.invocation.result)).toEqual(deliveries.map(() => ({ batchItemFailures: [] })));
    const entries = stack.aws.eventBridgeEntries.filter((entry) => entry.DetailType === 'memory.changed');
    const details = entries.map((entry) => JSON.parse(entry.Detail));
    expect(details.map((detail) => [detail.cause, detail.version, detail.next, detail.prev])).toEqual([
      ['put', 1, { step: 1 }, null],
      ['put', 2, { step: 2 }, { step: 1 }],
      ['delete', 3, null, { step: 2 }],
    ]);
    expect(details[0]).toMatchObject({ tenant: 'acme', type: 'memory.changed', namespace: ['notes', 'n1'], key: 'k' });
    const live = (stack.aws.posted.get('conn-memory') ?? []).map((frame) => JSON.parse(frame));
    expect(live.map((event) => event.id)).toEqual(details.map((detail) => detail.id));
  });
});

/** Every item of the table's partition `pk`, as the admin reads it (one page: these partitions are small). */
async function itemsOf(pk: string) {
  const { Items = [] } = await stack.admin.send(
    new QueryCommand({
      TableName: stack.deployment.tableName,
      KeyConditionExpression: 'pk = :pk',
      ExpressionAttributeValues: { ':pk': { S: pk } },
    }),
  );
  return Items;
}

/** The event the retention sweep's schedule (an EventBridge rule, `rate(1 minute)`) delivers at `time`. */
function scheduledSweep(time: number) {
  const { account, region } = stack.deployment;
  return {
    version: '0',
    id: `sweep-${time}`,
    'detail-type': 'Scheduled Event',
    source: 'aws.events',
    account,
    time: new Date(time).toISOString(),
    region,
    resources: [`arn:aws:events:${region}:${account}:rule/RetentionSweep`],
    detail: {},
  };
}

/**
 * `DELETE /v1/users/{userId}` while the change hook runs on what the stream brings, as the event
 * source mapping would run it beside the request: the request waits for the hook to close.
 */
async function eraseWhileTheHookRuns(userId: string) {
  let answer: Awaited<ReturnType<typeof call>> | undefined;
  const erasing = call('DELETE', `/v1/users/${userId}`).then((response) => {
    answer = response;
  });
  const runs: Awaited<ReturnType<typeof stack.stream.deliver>> = [];
  while (answer === undefined) runs.push(...(await stack.stream.deliver(stack.stream.eventRecords(await stack.stream.read(1, 500)))));
  await erasing;
  return { answer, runs };
}

describe('erasure of a user', () => {
  it('is started by the sessions function’s role, closed and erased by the change hook’s role, which sends user.erased', async () => {
    // Prepare: a user with a session (versions), a profile and memory; the change hook has
    // kept the memory item's replaced version.
    await stack.stream.read(0, 200);
    expect((await call('POST', '/v1/sessions', { sessionId: 'forget-me', userId: 'ada-e' })).status).toBe(201);
    expect((await call('PATCH', '/v1/sessions/forget-me/state', { secret: 'old' })).status).toBe(200);
    const commit = await call('POST', '/v1/sessions/forget-me/commits', {
      commands: [{ key: 'lang', scope: 'profile', merge: 'disjoint', set: 'en' }],
    });
    expect(commit.status).toBe(200);
    expect((await call('PUT', '/v1/memory/users/ada-e/facts/diet', { value: { food: 'vegan' } })).status).toBe(201);
    expect((await call('PUT', '/v1/memory/users/ada-e/facts/diet', { value: { food: 'vegetarian' } })).status).toBe(200);
    await stack.stream.deliver(stack.stream.eventRecords(await stack.stream.read(4)));

    // Act: the DELETE, which waits while the change hook closes what the user has (the stream
    // brings the hook the erasure's records meanwhile, as the event source mapping would); a
    // session of the user made after its 202 (kept); then the stream until the erasure is done.
    const { answer: erase, runs } = await eraseWhileTheHookRuns('ada-e');
    expect(erase.status).toBe(202);
    const { erasureId } = JSON.parse(erase.body) as { erasureId: string };
    expect((await call('GET', '/v1/sessions/forget-me')).status).toBe(404);
    expect((await call('GET', '/v1/memory/users/ada-e/facts/diet')).status).toBe(404);
    expect((await call('POST', '/v1/sessions', { sessionId: 'after-erasure', userId: 'ada-e' })).status).toBe(201);
    for (let round = 0; round < 10 && JSON.parse((await call('GET', `/v1/erasures/${erasureId}`)).body).status !== 'done'; round++) {
      runs.push(...(await stack.stream.deliver(stack.stream.eventRecords(await stack.stream.read(1, 1_000)))));
    }
    runs.push(...(await stack.stream.deliver(stack.stream.eventRecords(await stack.stream.read(1, 1_000)))));

    // Assess
    for (const { invocation } of runs) expect(invocation.result, invocation.logs.join('\n')).toEqual({ batchItemFailures: [] });
    expect(JSON.parse((await call('GET', `/v1/erasures/${erasureId}`)).body)).toMatchObject({
      status: 'done',
      sessions: 1,
      memoryItems: 1,
      documents: 1,
    });
    expect((await call('GET', '/v1/sessions/after-erasure')).status).toBe(200);
    for (const pk of ['S#acme#forget-me', 'P#acme#ada-e', 'M#acme#users/ada-e/facts', 'MH#acme#users/ada-e/facts#diet']) {
      const { Items = [] } = await stack.admin.send(
        new QueryCommand({
          TableName: stack.deployment.tableName,
          KeyConditionExpression: 'pk = :pk',
          ExpressionAttributeValues: { ':pk': { S: pk } },
        }),
      );
      expect(
        Items.filter((item) => item.kind?.S !== 'x'),
        pk,
      ).toEqual([]);
    }
    const erased = stack.aws.eventBridgeEntries.filter((entry) => entry.DetailType === 'user.erased');
    expect(erased.map((entry) => JSON.parse(entry.Detail))).toEqual([
      expect.objectContaining({ id: `erased/${erasureId}`, userId: 'ada-e', sessions: 1, memoryItems: 1, documents: 1 }),
    ]);
  });

  it('leaves an erasure whose runs died after closing to the schedule’s sweep, which erases its session and finishes it with the change hook’s role', async () => {
    // Prepare: a session of the user, written.
    await stack.stream.read(0, 200);
    expect((await call('POST', '/v1/sessions', { sessionId: 'stalled-e', userId: 'cy-e' })).status).toBe(201);
    expect((await call('PATCH', '/v1/sessions/stalled-e/state', { secret: 'stalled' })).status).toBe(200);
    await stack.stream.read(0, 200);
    const hook = stack.deployment.functionNamed(/change hook/);
    const partition = itemsOf;

    // Act: the DELETE of the user, whose hook run dies right after it set the erasure running
    // (closing done: the 202), and every run after it dies too, the stream giving their records
    // up; then one sweep of the schedule a minute on.
    let died = false;
    stack.aws.fault = (request) => {
      if (request.functionId !== hook.logicalId) return 'pass';
      if (!died && request.operation === 'UpdateItem' && String(request.input.UpdateExpression).includes('#status = :running')) died = true;
      return died ? 'crash' : 'pass';
    };
    const { answer } = await eraseWhileTheHookRuns('cy-e');
    await stack.stream.read(0, 500);
    stack.aws.fault = () => 'pass';
    const { erasureId } = JSON.parse(answer.body) as { erasureId: string };
    const stalledOn = (await partition('S#acme#stalled-e')).filter((item) => item.kind?.S !== 'x').length;
    const stalledAs = JSON.parse((await call('GET', `/v1/erasures/${erasureId}`)).body);
    const later = 60_000;
    const sweep = await stack.lambda.invoke(hook, scheduledSweep(Date.now() + later), { clockOffsetMs: later });

    // Assess: the erasure stayed running (no run of it came); the sweep erased the session
    // (tombstones and its closed fence alone, nothing due) and finished the erasure: done,
    // counted, its records gone.
    expect(answer.status).toBe(202);
    expect(died).toBe(true);
    expect(stalledOn).toBeGreaterThan(0);
    expect(stalledAs).toMatchObject({ status: 'running' });
    expect(sweep.error, sweep.logs.join('\n')).toBeUndefined();
    const items = await partition('S#acme#stalled-e');
    expect(items.filter((item) => item.kind?.S !== 'x')).toEqual([]);
    expect(items.filter((item) => item.fence !== undefined).map((item) => item.fence?.S)).toEqual(['closed']);
    expect(items.filter((item) => item.dsk !== undefined)).toEqual([]);
    expect(JSON.stringify(items)).not.toContain('stalled"');
    expect(JSON.parse((await call('GET', `/v1/erasures/${erasureId}`)).body)).toMatchObject({ status: 'done', sessions: 1 });
    expect((await partition(`E#acme#${erasureId}`)).map((item) => [item.sk?.S, item.dsk])).toEqual([['E', undefined]]);
  });

  it('goes on with an erasure whose runs all died before closing: a DELETE sent again brings a run with one write, and the schedule’s sweep finishes it with the change hook’s role', async () => {
    // Prepare: a user with a session (a version), a profile and a memory item, the change hook
    // run on their records (it lists the memory namespace).
    await stack.stream.read(0, 200);
    expect((await call('POST', '/v1/sessions', { sessionId: 'stopped-e', userId: 'dee-e' })).status).toBe(201);
    expect((await call('PATCH', '/v1/sessions/stopped-e/state', { secret: 'stopped' })).status).toBe(200);
    const commit = await call('POST', '/v1/sessions/stopped-e/commits', {
      commands: [{ key: 'lang', scope: 'profile', merge: 'disjoint', set: 'en' }],
    });
    expect(commit.status).toBe(200);
    expect((await call('PUT', '/v1/memory/users/dee-e/facts/diet', { value: { food: 'stopped' } })).status).toBe(201);
    await stack.stream.deliver(stack.stream.eventRecords(await stack.stream.read(1, 1_000)));
    const hook = stack.deployment.functionNamed(/change hook/);
    const erase = (clockOffsetMs: number) =>
      stack.http.request('DELETE', '/v1/users/dee-e', {
        headers: { authorization: `Bearer ${key}` },
        variables: { AGENTSTATE_ERASURE_WAIT_MS: '0' },
        clockOffsetMs,
      });
    const erasureRecords = async () =>
      stack.stream
        .eventRecords(await stack.stream.read(0, 300))
        .filter((record) => record.dynamodb?.Keys?.pk?.S?.startsWith('E#acme#') && record.dynamodb?.Keys?.sk?.S === 'E');

    // Act: the DELETE (no wait: 409, closing), whose hook run is killed and its record given up
    // (never delivered); the same DELETE again at once; again a minute on (no run moved it
    // since: one write), and once more then; none of their records delivered either. Then one
    // sweep of the schedule two minutes on.
    const first = await erase(0);
    const put = await erasureRecords();
    const soon = await erase(0);
    const afterSoon = await erasureRecords();
    const stalled = await erase(60_000);
    const nudged = await erasureRecords();
    const again = await erase(60_000);
    const afterAgain = await erasureRecords();
    const later = 2 * 60_000;
    const sweep = await stack.lambda.invoke(hook, scheduledSweep(Date.now() + later), { clockOffsetMs: later });

    // Assess: each DELETE joined the one erasure (409, still closing); only the first a minute
    // on wrote it (a MODIFY the hook's filter lets through, which brings a run); the sweep
    // closed and erased everything with exact counts, and left nothing due.
    const { erasureId } = JSON.parse(first.body) as { erasureId: string };
    for (const answer of [first, soon, stalled, again]) expect(JSON.parse(answer.body)).toMatchObject({ code: 'conflict', erasureId });
    expect(put.map((record) => record.eventName)).toEqual(['INSERT']);
    expect(afterSoon).toEqual([]);
    expect(nudged.map((record) => [record.eventName, record.dynamodb.NewImage.status.S])).toEqual([['MODIFY', 'closing']]);
    expect(afterAgain).toEqual([]);
    expect(sweep.error, sweep.logs.join('\n')).toBeUndefined();
    expect(sweep.logs.map((line) => JSON.parse(line)).find((line) => line.message === 'prune sweep').erasures).toBeGreaterThanOrEqual(1);
    expect(JSON.parse((await call('GET', `/v1/erasures/${erasureId}`)).body)).toMatchObject({
      status: 'done',
      sessions: 1,
      memoryItems: 1,
      documents: 1,
    });
    expect((await call('GET', '/v1/memory/users/dee-e/facts/diet')).status).toBe(404);
    for (const pk of ['S#acme#stopped-e', 'P#acme#dee-e', 'M#acme#users/dee-e/facts', 'E#acme#user#dee-e']) {
      expect(
        (await itemsOf(pk)).filter((item) => item.kind?.S !== 'x'),
        pk,
      ).toEqual([]);
    }
    expect((await itemsOf(`E#acme#${erasureId}`)).map((item) => [item.sk?.S, item.dsk])).toEqual([['E', undefined]]);
  });
});

describe('the WebSocket API', () => {
  it('refuses a connection without a valid key, answers unknown messages, and forgets a connection on $disconnect', async () => {
    // Act
    const refused = await stack.webSocket.connect('conn-refused', { token: 'as_nobody' });
    await stack.webSocket.connect('conn-1', { token: key });
    const unknown = await stack.webSocket.send('conn-1', '{"action":"dance"}');
    const notJson = await stack.webSocket.send('conn-1', 'hello');
    const gone = await stack.webSocket.disconnect('conn-1');
    const afterwards = await stack.webSocket.send('conn-1', JSON.stringify({ action: 'subscribe', sessionId: 's' }));

    // Assess
    expect(refused.result.statusCode).toBe(401);
    expect(JSON.parse(unknown.result.body)).toMatchObject({ type: 'error', status: 400, code: 'invalid_request' });
    expect(JSON.parse(notJson.result.body)).toMatchObject({ type: 'error', status: 400, code: 'invalid_json' });
    expect(gone.result).toEqual({ statusCode: 200 });
    expect(afterwards.result.statusCode).toBeGreaterThanOrEqual(400);
  });

  it('closes the connections of a revoked key: its follower gets no event past the bound, its message is answered 401', async () => {
    // Prepare: a key with two connections, one following a session, and another key's follower.
    const revocable = await stack.revocableKey('acme');
    await stack.webSocket.connect('conn-revoked-following', { token: revocable.apiKey });
    await stack.webSocket.connect('conn-revoked-idle', { token: revocable.apiKey });
    await stack.webSocket.connect('conn-kept', { token: key });
    for (const connection of ['conn-revoked-following', 'conn-kept']) {
      await stack.webSocket.send(connection, JSON.stringify({ action: 'subscribe', sessionId: 'revoked' }));
    }
    const write = async (step: number) => {
      await stack.stream.read(0, 200);
      expect((await call('PATCH', '/v1/sessions/revoked/state', { step })).status).toBe(200);
      await stack.stream.deliver(stack.stream.eventRecords(await stack.stream.read(1)));
    };
    const ids = (connection: string) => (stack.aws.posted.get(connection) ?? []).map((frame) => JSON.parse(frame).id ?? frame);
    await write(1);
    const before = ids('conn-revoked-following');

    // Act: revoke; past the bound a write, and a message on the idle connection.
    await revocable.revoke();
    await new Promise((resolve) => setTimeout(resolve, KEY_RECHECK_MS + 100));
    await write(2);
    const message = await stack.webSocket.send('conn-revoked-idle', JSON.stringify({ action: 'subscribe', sessionId: 'revoked' }));

    // Assess: the follower got version 1 only, and both connections were closed (DeleteConnection
    // under each function's own role); the message's answer was posted before the close.
    expect(before).toEqual(['revoked:1']);
    expect(ids('conn-revoked-following')).toEqual(['revoked:1']);
    expect(ids('conn-kept')).toEqual(['revoked:1', 'revoked:2']);
    expect(message.result).toEqual({ statusCode: 401 });
    expect((stack.aws.posted.get('conn-revoked-idle') ?? []).map((frame) => JSON.parse(frame))).toEqual([
      expect.objectContaining({ type: 'error', status: 401, code: 'unauthorized', action: 'subscribe', sessionId: 'revoked' }),
    ]);
    expect(stack.aws.closedConnections).toEqual(['conn-revoked-following', 'conn-revoked-idle']);
  });
});
