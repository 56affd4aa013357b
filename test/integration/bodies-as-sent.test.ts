import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { invoke } from '../../bench/invoke.js';
import type { WorkerInvoker } from '../../functions/core/decide/decision-hops.js';
import { dependenciesFor, useDependencies } from '../../functions/http/dependencies.js';
import { keysFromEnv } from '../../functions/http/edge/auth.js';
import { handlers } from '../../functions/http/index.js';
import { localDynamoDbClient } from '../../functions/local/dynamodb-local.js';
import { createStores } from '../../functions/store/index.js';
import { createTestTable, dynamoEndpoint } from '../helpers/dynamodb.js';

/**
 * What a route stores or hands on, it keeps as it was sent: key order, and keys such as
 * `__proto__` that a copy made by the schema would turn into a prototype. Each route's body is
 * checked by its schema and then used as the JSON that came in (http/edge/request.ts, `asSent`).
 */

let client: DynamoDBClient;
const workerBodies: string[] = [];
const invokeWorker: WorkerInvoker = async (_worker, body) => {
  workerBodies.push(body);
  return { decision: { ok: true } };
};

const headers = { authorization: 'Bearer sent-key', 'content-type': 'application/json' };
const send = (method: string, url: string, body?: string) =>
  invoke(handlers, { method, url, headers, ...(body === undefined ? {} : { body }) });

beforeAll(async () => {
  const tableName = await createTestTable('bodies-as-sent');
  client = localDynamoDbClient(dynamoEndpoint());
  useDependencies(dependenciesFor(createStores(client, tableName), { resolveKey: keysFromEnv('sent:sent-key'), invokeWorker }));
});

afterAll(() => {
  useDependencies(undefined);
  client.destroy();
});

describe('bodies as sent', () => {
  it("keeps a session's metadata as sent, __proto__ key and key order included", async () => {
    // Prepare
    const metadata = '{"z":1,"__proto__":{"polluted":true},"a":{"y":2,"b":3}}';

    // Act
    const created = await send('POST', '/v1/sessions', `{"sessionId":"meta","metadata":${metadata}}`);
    const read = await send('GET', '/v1/sessions/meta');

    // Assess
    expect(created.status).toBe(201);
    expect(read.text).toContain(`"metadata":${metadata}`);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('hands the worker the trigger as sent, key order and unknown keys included', async () => {
    // Prepare
    await send('PUT', '/v1/agents/decider', '{"worker":{"url":"https://worker.example.com/decide"}}');
    const trigger = '{"zeta":true,"type":"custom.event","__proto__":{"polluted":true},"alpha":[1,{"y":1,"x":2}]}';

    // Act
    const decided = await send('POST', '/v1/sessions/decide/decide', `{"agentId":"decider","trigger":${trigger}}`);

    // Assess
    expect(decided.status, decided.text).toBe(200);
    expect(workerBodies.at(-1)).toContain(`"trigger":${trigger}`);
  });
});
