import {
  ConditionalCheckFailedException,
  type DynamoDBClient,
  InternalServerError,
  ProvisionedThroughputExceededException,
  QueryCommand as RawQueryCommand,
  ThrottlingException,
  TransactionCanceledException,
  TransactionConflictException,
} from '@aws-sdk/client-dynamodb';
import {
  BatchWriteCommand,
  DeleteCommand,
  DynamoDBDocumentClient,
  GetCommand,
  PutCommand,
  QueryCommand,
  TransactWriteCommand,
  UpdateCommand,
} from '@aws-sdk/lib-dynamodb';
import { mockClient } from 'aws-sdk-client-mock';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { type InProcessResponse, invoke } from '../../bench/invoke.js';
import { AgentStateError } from '../../functions/core/kernel/errors.js';
import { SessionService } from '../../functions/core/sessions/session-service.js';
import { dependenciesFor, useDependencies } from '../../functions/http/dependencies.js';
import { keysFromEnv } from '../../functions/http/edge/auth.js';
import { handlers } from '../../functions/http/index.js';
import { localDynamoDbClient } from '../../functions/local/dynamodb-local.js';
import { DynamoDbLiveStore } from '../../functions/store/events/live-store.js';
import { createStores, type Stores } from '../../functions/store/index.js';
import * as keys from '../../functions/store/table/keys.js';
import { createTestTable, dynamoEndpoint } from '../helpers/dynamodb.js';

/**
 * Faults DynamoDB Local cannot produce, injected under a real store on a real table.
 *
 * aws-sdk-client-mock stubs `DynamoDBDocumentClient#send` (the store's client); the stub hands
 * every command to the real `send`, on to DynamoDB Local, except those a test arms a fault
 * for. So everything around a fault (the reads before it, the retry after it, what is stored)
 * is real. The faults arrive after the SDK's own retries would have run: this is what the
 * store sees when the SDK has given up (test/faults/sdk-wire-faults.test.ts covers the SDK's
 * retries themselves). Assertions are on what a client sees: status and problem code.
 */

type CommandClass = abstract new (...args: never[]) => { input: unknown };
interface Fault {
  command: CommandClass;
  /** Only commands whose input matches; all of that class when absent. */
  when?: (input: any) => boolean;
  /** How many matching calls fail; Infinity for all of them. */
  times: number;
  /** The error thrown, or a response returned instead of calling DynamoDB. */
  fail: (input: any) => { error: unknown } | { respond: unknown };
  hits: number;
}

const docMock = mockClient(DynamoDBDocumentClient);
const realSend = docMock.send.wrappedMethod as (this: DynamoDBDocumentClient, ...args: unknown[]) => Promise<unknown>;
let faults: Fault[] = [];
function faultySend(this: DynamoDBDocumentClient, command: { input: unknown }, ...rest: unknown[]): Promise<unknown> {
  const fault = faults.find(
    (candidate) => command instanceof candidate.command && candidate.hits < candidate.times && (candidate.when?.(command.input) ?? true),
  );
  if (!fault) return realSend.call(this, command, ...rest);
  fault.hits++;
  const outcome = fault.fail(command.input);
  return 'error' in outcome ? Promise.reject(outcome.error) : Promise.resolve(outcome.respond);
}
// The sinon stub itself, so that the real `this` (the store's client) reaches the real send.
docMock.send.callsFake(faultySend as unknown as Parameters<typeof docMock.send.callsFake>[0]);

function arm(command: CommandClass, fail: Fault['fail'], options: { times?: number; when?: Fault['when'] } = {}): Fault {
  const fault: Fault = { command, fail, times: options.times ?? 1, hits: 0, ...(options.when ? { when: options.when } : {}) };
  faults.push(fault);
  return fault;
}

const meta = { httpStatusCode: 400, requestId: 'fault', attempts: 4, totalRetryDelay: 0 };
const errors = {
  transactionConflict: () => new TransactionConflictException({ message: 'Transaction is ongoing for the item', $metadata: meta }),
  cancelled: (...codes: string[]) =>
    new TransactionCanceledException({
      message: `Transaction cancelled, please refer cancellation reasons for specific reasons [${codes.join(', ')}]`,
      $metadata: meta,
      CancellationReasons: codes.map((Code) => ({ Code })),
    }),
  provisioned: () =>
    new ProvisionedThroughputExceededException({
      message: 'The level of configured provisioned throughput for the table was exceeded',
      $metadata: meta,
    }),
  conditionFailed: () => new ConditionalCheckFailedException({ message: 'The conditional request failed', $metadata: meta }),
  throttling: () => new ThrottlingException({ message: 'Rate of requests exceeds the allowed throughput.', $metadata: meta }),
  internal: () =>
    new InternalServerError({
      message: 'Internal server error (java.lang.NullPointerException at secret.Internal)',
      $metadata: { ...meta, httpStatusCode: 500 },
    }),
  refused: () =>
    Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:8000'), {
      code: 'ECONNREFUSED',
      errno: -111,
      syscall: 'connect',
      $metadata: { attempts: 4 },
    }),
  reset: () => Object.assign(new Error('socket hang up'), { code: 'ECONNRESET', $metadata: { attempts: 4 } }),
  timeout: () =>
    Object.assign(new Error('@smithy/node-http-handler - the request socket timed out after 3000 ms of inactivity'), {
      name: 'TimeoutError',
      $metadata: { attempts: 4 },
    }),
};

/** The claim of the log's next place: a conditional put of a `V#…` change (session-store.ts). */
const isLogPut = (input: any) => String(input.Item?.sk).startsWith(keys.logPrefix);

let tableName: string;
let rawClient: DynamoDBClient;
let stores: Stores;
const TENANT = 'faults';
const auth = { authorization: 'Bearer faults-key' };
const json = { ...auth, 'content-type': 'application/json' };

beforeAll(async () => {
  tableName = await createTestTable('faults');
  rawClient = localDynamoDbClient(dynamoEndpoint());
  stores = createStores(rawClient, tableName);
  // Few attempts, so that sustained contention ends in 409 within milliseconds.
  const deps = dependenciesFor(stores, { resolveKey: keysFromEnv(`${TENANT}:faults-key`) });
  useDependencies({ ...deps, sessions: new SessionService(stores.sessions, { retry: { maxAttempts: 3, baseDelayMs: 1, maxDelayMs: 2 } }) });
  // 5xx answers are logged by the handlers; that log is expected here.
  vi.spyOn(console, 'error').mockImplementation(() => {});
  vi.spyOn(console, 'warn').mockImplementation(() => {});
});

afterEach(() => {
  faults = [];
});

afterAll(() => {
  docMock.restore();
  useDependencies(undefined);
  rawClient.destroy();
  vi.restoreAllMocks();
});

let counter = 0;
const sid = (name: string) => `${name}-${++counter}`;

const call = (method: string, url: string, body?: unknown, headers: Record<string, string> = json) =>
  invoke(handlers, { method, url, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });

/** Whether a raw item is of the node index (node-index.ts), which a writer puts before its claim. */
const isIndex = (item: Record<string, unknown>) => String((item.sk as { S: string }).S).startsWith(keys.nodePrefix);

/** Every item stored in a session's partition, straight from the table. */
async function items(sessionId: string): Promise<Array<Record<string, unknown>>> {
  const { Items } = await rawClient.send(
    new RawQueryCommand({
      TableName: tableName,
      KeyConditionExpression: 'pk = :pk',
      ExpressionAttributeValues: { ':pk': { S: keys.session({ tenant: TENANT, sessionId }) } },
      ConsistentRead: true,
    }),
  );
  return Items ?? [];
}

function expectProblem(response: InProcessResponse, status: number, code: string): void {
  expect(response.status, response.text).toBe(status);
  expect(response.headers['content-type']).toBe('application/problem+json');
  expect(response.json.code).toBe(code);
  if (status >= 500) {
    // 5xx never carry internals: the detail is the title, and nothing of the cause leaks.
    expect(response.json.detail).toBe(response.json.title);
    expect(response.text).not.toMatch(/java|secret|ECONN|stack|at /);
  }
}

describe('transaction conflicts', () => {
  it('retries an append that hit TransactionConflictException, and appends once', async () => {
    // Prepare
    const session = sid('conflict-append');
    const fault = arm(TransactWriteCommand, () => ({ error: errors.transactionConflict() }));

    // Act
    const response = await call('POST', `/v1/sessions/${session}/messages`, { messages: [{ id: 'm1', role: 'user', content: 'hi' }] });

    // Assess
    expect(response.status, response.text).toBe(201);
    expect(fault.hits).toBe(1);
    expect(docMock.commandCalls(TransactWriteCommand).length).toBeGreaterThanOrEqual(2);
    const tree = await call('GET', `/v1/sessions/${session}/tree`, undefined, auth);
    expect(tree.json.nodes.map((node: { id: string }) => node.id)).toEqual(['root', 'm1']);
    expect(tree.json.head).toBe('m1');
  });

  it('retries an append whose claim of the log’s next place failed twice (other writers took it first)', async () => {
    const session = sid('cancelled-append');
    await call('PUT', `/v1/sessions/${session}/state`, { a: 1 });
    // An append after a session's first write is one conditional PutItem of the log, no transaction.
    const fault = arm(PutCommand, () => ({ error: errors.conditionFailed() }), { times: 2, when: isLogPut });

    const response = await call('POST', `/v1/sessions/${session}/messages`, { messages: [{ id: 'm1', role: 'user' }] });

    expect(response.status, response.text).toBe(201);
    expect(fault.hits).toBe(2);
    expect(response.json.nodes).toEqual([expect.objectContaining({ id: 'm1', parentId: 'root', stateVersion: 1 })]);
  });

  it('retries a state write at another node (a transaction) that hit a conflict, and records one version', async () => {
    const session = sid('conflict-node');
    await call('POST', `/v1/sessions/${session}/messages`, {
      messages: [
        { id: 'q', role: 'user' },
        { id: 'a', role: 'assistant' },
      ],
    });
    arm(TransactWriteCommand, () => ({ error: errors.transactionConflict() }));

    const response = await call('PATCH', `/v1/sessions/${session}/state?node=q`, { at: 'q' });

    expect(response.status, response.text).toBe(200);
    expect(response.json).toMatchObject({ node: 'q', version: 1, prevVersion: 0, changed: true });
    const versions = await call('GET', `/v1/sessions/${session}/versions`, undefined, auth);
    expect(versions.json.versions.map((version: { version: number }) => version.version)).toEqual([1]);
  });

  it('answers 409 conflict after sustained conflicts on the log’s next place, having written nothing', async () => {
    const session = sid('conflict-forever');
    await call('PUT', `/v1/sessions/${session}/state`, { before: true });
    const before = await items(session);
    arm(PutCommand, () => ({ error: errors.conditionFailed() }), { times: Infinity, when: isLogPut });

    const response = await call('POST', `/v1/sessions/${session}/messages`, { messages: [{ id: 'm1', role: 'user' }] });

    expectProblem(response, 409, 'conflict');
    expect(response.json.attempts).toBe(3);
    // Before each claim the writer indexes what the log already holds: the root's pointer at
    // version 1, as the tip already says (node-index.ts). Nothing else is new.
    const after = await items(session);
    expect(after.filter((item) => !isIndex(item))).toEqual(before.filter((item) => !isIndex(item)));
    for (const item of after.filter(isIndex)) expect(item).toEqual({ pk: item.pk, sk: { S: 'N#root#000000#p' }, stateVersion: { N: '1' } });
  });
});

describe('throttling after the SDK has given up', () => {
  it.each([
    ['ProvisionedThroughputExceededException', errors.provisioned],
    ['ThrottlingException', errors.throttling],
  ])('answers 429 throttled when a state write gets %s, and records nothing', async (_name, error) => {
    const session = sid('throttled-write');
    await call('PUT', `/v1/sessions/${session}/state`, { n: 0 });
    const before = await items(session);
    arm(PutCommand, () => ({ error: error() }), { when: (input) => String(input.Item?.sk).startsWith('V#') });

    const response = await call('PATCH', `/v1/sessions/${session}/state`, { n: 1 });

    expectProblem(response, 429, 'throttled');
    // API.md section 14: a throttled answer says when to retry (@agentstate/client waits that long).
    expect(response.headers['retry-after']).toBe('1');
    expect(await items(session)).toEqual(before);
    expect((await call('GET', `/v1/sessions/${session}/state`, undefined, auth)).json).toMatchObject({ version: 1, state: { n: 0 } });
  });

  it('answers 429 throttled when a read is throttled', async () => {
    arm(QueryCommand, () => ({ error: errors.provisioned() }));

    const response = await call('GET', `/v1/sessions/${sid('throttled-read')}/state`, undefined, auth);

    expectProblem(response, 429, 'throttled');
    expect(response.headers['retry-after']).toBe('1');
  });

  it('answers 429 throttled when a transaction is cancelled for throttling, and writes none of it', async () => {
    // A session's first write is the transaction: its first change and the session item.
    const session = sid('throttled-transaction');
    const before = await items(session);
    arm(TransactWriteCommand, () => ({ error: errors.cancelled('None', 'ThrottlingError') }));

    const response = await call('POST', `/v1/sessions/${session}/messages`, { messages: [{ id: 'm1', role: 'user' }] });

    expectProblem(response, 429, 'throttled');
    expect(await items(session)).toEqual(before);
  });
});

describe('the read of an API key issued in the table', () => {
  it.each([
    ['ProvisionedThroughputExceededException', errors.provisioned, 'throttled'],
    ['ThrottlingException', errors.throttling, 'throttled'],
    ['InternalServerError', errors.internal, 'unavailable'],
  ])('is translated as every store translates it when it gets %s (429 or 503, never 500)', async (_name, error, code) => {
    // A key as `agentstate keys create` issues it, which the server looks up in the table.
    const { apiKey } = await stores.apiKeys.create({ tenant: TENANT });
    arm(GetCommand, () => ({ error: error() }), { when: (input) => String(input.Key?.pk).startsWith('K#') });

    await expect(stores.apiKeys.resolve(apiKey)).rejects.toMatchObject({ code });
  });
});

describe('an unavailable or failing DynamoDB', () => {
  it.each([
    ['InternalServerError', errors.internal],
    ['ECONNREFUSED', errors.refused],
    ['ECONNRESET', errors.reset],
    ['a request timeout', errors.timeout],
  ])('answers 503 unavailable, without internals, when a read fails with %s', async (_name, error) => {
    arm(QueryCommand, () => ({ error: error() }));

    expectProblem(await call('GET', `/v1/sessions/${sid('down-read')}/state`, undefined, auth), 503, 'unavailable');
  });

  it.each([
    ['InternalServerError', errors.internal],
    ['ECONNREFUSED', errors.refused],
    ['a request timeout', errors.timeout],
  ])('answers 503 unavailable when the write itself fails with %s, and records nothing', async (_name, error) => {
    const session = sid('down-write');
    await call('PUT', `/v1/sessions/${session}/state`, { n: 0 });
    const before = await items(session);
    arm(PutCommand, () => ({ error: error() }), { when: (input) => String(input.Item?.sk).startsWith('V#') });

    expectProblem(await call('PUT', `/v1/sessions/${session}/state`, { n: 1 }), 503, 'unavailable');
    expect(await items(session)).toEqual(before);
  });

  it('never leaves part of a failed append behind: no node, no head move, no pointer', async () => {
    // Prepare: a session whose head is a node, so an append would also re-point it.
    const session = sid('partial');
    await call('POST', `/v1/sessions/${session}/messages`, { messages: [{ id: 'h', role: 'user' }] });
    await call('PATCH', `/v1/sessions/${session}/state`, { at: 'h' });
    const before = await items(session);
    arm(PutCommand, () => ({ error: errors.internal() }), { when: isLogPut });

    // Act
    const response = await call('POST', `/v1/sessions/${session}/messages`, {
      messages: Array.from({ length: 25 }, (_, index) => ({ id: `n${index}`, role: 'user' })),
    });

    // Assess: the log and everything else as before. Before its claim, a writer indexes what
    // the log already holds (node-index.ts): h, at the version it already pointed at.
    expectProblem(response, 503, 'unavailable');
    const after = await items(session);
    expect(after.filter((item) => !isIndex(item))).toEqual(before.filter((item) => !isIndex(item)));
    for (const item of after.filter(isIndex)) expect((item.sk as { S: string }).S).toMatch(/^N#h#/);
    const tree = await call('GET', `/v1/sessions/${session}/tree`, undefined, auth);
    expect(tree.json).toMatchObject({ head: 'h', nodes: [{ id: 'root' }, { id: 'h', stateVersion: 1 }] });
  });

  it('writes state without touching the session item, so a failing activity update cannot fail it', async () => {
    // Prepare
    const session = sid('touch-fails');
    await call('PUT', `/v1/sessions/${session}/state`, { n: 0 });
    const touch = arm(UpdateCommand, () => ({ error: errors.internal() }), {
      times: Infinity,
      when: (input) => String(input.Key?.sk) === keys.sessionSort,
    });

    // Act: the change hook moves the activity after a state write (not running here).
    const written = await call('PATCH', `/v1/sessions/${session}/state`, { n: 1 });

    // Assess
    expect(written.status, written.text).toBe(200);
    expect(touch.hits).toBe(0);
    expect((await call('GET', `/v1/sessions/${session}/state`, undefined, auth)).json).toMatchObject({ version: 2, state: { n: 1 } });
  });

  it('lets the retry of a failed write with an Idempotency-Key run again (the key was released)', async () => {
    const session = sid('idempotent-retry');
    const headers = { ...json, 'idempotency-key': `retry-${session}` };
    arm(PutCommand, () => ({ error: errors.internal() }), { when: (input) => String(input.Item?.sk).startsWith('V#') });
    arm(TransactWriteCommand, () => ({ error: errors.internal() }));

    const failed = await call('PUT', `/v1/sessions/${session}/state`, { n: 1 }, headers);
    const retried = await call('PUT', `/v1/sessions/${session}/state`, { n: 1 }, headers);
    const replayed = await call('PUT', `/v1/sessions/${session}/state`, { n: 1 }, headers);

    expectProblem(failed, 503, 'unavailable');
    expect(retried.status, retried.text).toBe(200);
    expect(retried.json).toMatchObject({ version: 1, changed: true });
    expect(replayed.headers['idempotency-replayed']).toBe('true');
    expect(replayed.text).toBe(retried.text);
  });

  it('answers a write whose response could not be remembered, and tells a retry to wait rather than write twice', async () => {
    // An answer over 2 KiB is kept with the claim (an UpdateItem of I#…), not in the write.
    const session = sid('idempotent-complete');
    const headers = { ...json, 'idempotency-key': `complete-${session}` };
    const body = { n: 1, pad: 'p'.repeat(3_000) };
    arm(UpdateCommand, () => ({ error: errors.internal() }), { when: (input) => String(input.Key?.pk).startsWith('I#') });

    const first = await call('PATCH', `/v1/sessions/${session}/state`, body, headers);
    const retry = await call('PATCH', `/v1/sessions/${session}/state`, body, headers);

    expect(first.status, first.text).toBe(200);
    expectProblem(retry, 409, 'conflict');
    const versions = await call('GET', `/v1/sessions/${session}/versions`, undefined, auth);
    expect(versions.json.versions).toHaveLength(1);
  });

  it('keeps a small answer in the write itself: a failing claim item loses nothing, and a retry gets the answer', async () => {
    const session = sid('idempotent-kept');
    const headers = { ...json, 'idempotency-key': `kept-${session}` };
    const keptApart = arm(UpdateCommand, () => ({ error: errors.internal() }), { when: (input) => String(input.Key?.pk).startsWith('I#') });

    const first = await call('PATCH', `/v1/sessions/${session}/state`, { n: 1 }, headers);
    const retry = await call('PATCH', `/v1/sessions/${session}/state`, { n: 1 }, headers);

    expect(first.status, first.text).toBe(200);
    expect(retry.status, retry.text).toBe(200);
    expect(retry.headers['idempotency-replayed']).toBe('true');
    expect(retry.text).toBe(first.text);
    // The claim was the key's one write: nothing tried to keep the answer apart.
    expect(keptApart.hits).toBe(0);
    const versions = await call('GET', `/v1/sessions/${session}/versions`, undefined, auth);
    expect(versions.json.versions).toHaveLength(1);
  });
});

describe('partial batch results (DynamoDB Local always processes a whole batch)', () => {
  it('reads every message of a path when a Query page ends early (a page holds at most 1 MB)', async () => {
    // Prepare: a path of 60 messages, one append each: more changes than the tip read brings
    // along (48), so the rest is read by key ranges of the log (paths.ts).
    const session = sid('short-pages');
    const messages = Array.from({ length: 60 }, (_, index) => ({ id: `p${index}`, role: 'user', n: index }));
    for (const message of messages) await call('POST', `/v1/sessions/${session}/messages`, { messages: [message] });
    // A range read answers one change a page, with the key to go on from, as DynamoDB does at 1 MB.
    const pages = DynamoDBDocumentClient.from(rawClient);
    const fault = arm(QueryCommand, (input) => ({ respond: realSend.call(pages, new QueryCommand({ ...input, Limit: 1 })) }), {
      times: 2,
      when: (input) => String(input.KeyConditionExpression).includes('BETWEEN'),
    });

    const path = await call('GET', `/v1/sessions/${session}/messages`, undefined, auth);

    expect(path.status, path.text).toBe(200);
    expect(fault.hits).toBe(2);
    expect(path.json.ancestry).toEqual(['root', ...messages.map((message) => message.id)]);
    expect(path.json.messages.map((message: { n: number }) => message.n)).toEqual(messages.map((message) => message.n));
  });

  it('deletes every item of a session when a BatchWriteItem leaves some unprocessed', async () => {
    const session = sid('unprocessed-delete');
    await call('POST', `/v1/sessions/${session}/messages`, {
      messages: Array.from({ length: 30 }, (_, index) => ({ id: `d${index}`, role: 'user' })),
    });
    await call('PUT', `/v1/sessions/${session}/state`, { n: 1 });
    const fault = arm(
      BatchWriteCommand,
      (input) => {
        const [table, requests] = Object.entries(input.RequestItems as Record<string, unknown[]>)[0] as [string, unknown[]];
        return { respond: { UnprocessedItems: { [table]: requests }, $metadata: {} } };
      },
      { times: 3 },
    );

    const deleted = await call('DELETE', `/v1/sessions/${session}`, undefined, auth);

    expect(deleted.status, deleted.text).toBe(204);
    expect(fault.hits).toBe(3);
    // What stays is the log's places, each a tombstone with no content (removed by TTL), and the
    // delete's fence: they keep any write still in flight from landing (session-delete.ts).
    const left = await items(session);
    expect(left.length).toBeGreaterThan(0);
    for (const item of left) {
      expect(item.kind).toEqual({ S: 'x' });
      expect(Object.keys(item).every((name) => ['pk', 'sk', 'kind', 'createdAt', 'fence', 'expiresAt'].includes(name))).toBe(true);
    }
    expectProblem(await call('GET', `/v1/sessions/${session}`, undefined, auth), 404, 'session_not_found');
  });
});

describe('a WebSocket connection’s follows meeting each other’s transactions (DynamoDB Local serializes them; AWS refuses one)', () => {
  const connectionItem = (input: any, connectionId: string) =>
    JSON.stringify(input).includes(keys.connection(connectionId)) && input.TransactItems !== undefined;
  /** A connection of its own, and a session for it to follow. */
  const connected = async () => {
    const live = new DynamoDbLiveStore(stores.table);
    const connectionId = sid('conflicts');
    const expiresAt = Math.floor(Date.now() / 1000) + 600;
    await live.putConnection(connectionId, TENANT, expiresAt);
    return { live, connectionId, expiresAt, scope: { tenant: TENANT, sessionId: sid('followed') } };
  };

  it('follows and leaves once a conflicting transaction on the connection has finished, and lists what the follower items say', async () => {
    // Prepare
    const { live, connectionId, scope, expiresAt } = await connected();
    const conflicts = arm(TransactWriteCommand, () => ({ error: errors.cancelled('TransactionConflict', 'None') }), {
      times: 3,
      when: (input) => connectionItem(input, connectionId),
    });

    // Act and assess: three conflicts, then the follow lands whole.
    expect(await live.subscribe(connectionId, scope, expiresAt)).toBe(true);
    expect(conflicts.hits).toBe(3);
    expect(await live.subscribers(scope)).toEqual([connectionId]);
    expect((await live.getConnection(connectionId))?.sessions).toEqual([scope.sessionId]);

    // The same for a leave.
    arm(TransactWriteCommand, () => ({ error: errors.cancelled('None', 'TransactionConflict') }), {
      times: 2,
      when: (input) => connectionItem(input, connectionId),
    });
    await live.unsubscribe(connectionId, scope);
    expect(await live.subscribers(scope)).toEqual([]);
    expect((await live.getConnection(connectionId))?.sessions).toEqual([]);
  });

  it('answers 409 conflict, having written nothing, when the connection keeps conflicting past its budget', async () => {
    // Prepare
    const { live, connectionId, scope, expiresAt } = await connected();
    arm(TransactWriteCommand, () => ({ error: errors.cancelled('TransactionConflict', 'None') }), {
      times: Number.POSITIVE_INFINITY,
      when: (input) => connectionItem(input, connectionId),
    });

    // Act
    const refused = await live.subscribe(connectionId, scope, expiresAt).catch((error: unknown) => error);

    // Assess
    expect(refused).toBeInstanceOf(AgentStateError);
    expect(refused).toMatchObject({ code: 'conflict', status: 409 });
    expect(await live.subscribers(scope)).toEqual([]);
    expect((await live.getConnection(connectionId))?.sessions).toEqual([]);
  }, 20_000);

  it('deletes a connection and its followers once a follow under way on its item has finished', async () => {
    // Prepare
    const { live, connectionId, scope, expiresAt } = await connected();
    expect(await live.subscribe(connectionId, scope, expiresAt)).toBe(true);
    const conflicts = arm(DeleteCommand, () => ({ error: errors.transactionConflict() }), {
      times: 2,
      when: (input) => input.Key?.pk === keys.connection(connectionId),
    });

    // Act
    await live.deleteConnection(connectionId);

    // Assess
    expect(conflicts.hits).toBe(2);
    expect(await live.getConnection(connectionId)).toBeNull();
    expect(await live.subscribers(scope)).toEqual([]);
  });
});

describe('the stub', () => {
  it('passes every unarmed command through to DynamoDB Local', async () => {
    const session = sid('pass-through');
    const before = docMock.commandCalls(QueryCommand).length;

    await call('POST', `/v1/sessions/${session}/messages`, { messages: [{ id: 'x', role: 'user' }] });
    const node = await call('GET', `/v1/sessions/${session}/nodes/x`, undefined, auth);

    expect(node.status).toBe(200);
    expect(docMock.commandCalls(QueryCommand).length).toBeGreaterThan(before);
  });
});
