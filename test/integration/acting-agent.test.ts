import { type DynamoDBClient, ScanCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { invoke } from '../../bench/invoke.js';
import { routeKey, routes } from '../../functions/http/contract/routes.js';
import { dependenciesFor, useDependencies } from '../../functions/http/dependencies.js';
import type { KeyResolver } from '../../functions/http/edge/auth.js';
import { handlers } from '../../functions/http/index.js';
import { localDynamoDbClient } from '../../functions/local/dynamodb-local.js';
import { createStores } from '../../functions/store/index.js';
import { createTestTable, dynamoEndpoint } from '../helpers/dynamodb.js';

/**
 * A key limited to some agents acts only as one of them (API.md section 7), on every route
 * that needs a key: the rule is one middleware that every route group runs, so a route that
 * slipped past it would show here. Requests run in-process on a real table.
 */

const TENANT = 'acting';
const resolveKey: KeyResolver = async (apiKey) => {
  if (apiKey === 'limited-key') return { tenant: TENANT, agents: ['general'] };
  if (apiKey === 'tenant-key') return { tenant: TENANT, agents: null };
  return null;
};

/** Every route behind a key; its path parameters filled with ids that exist. */
const keyedRoutes = routes
  .filter((route) => route.group !== 'health' && route.group !== 'inspector')
  .map((route) => ({ key: routeKey(route), method: route.method, url: route.path.replace(/\{[^}]+\}/g, 's1') }));

let client: DynamoDBClient;
let tableName: string;

async function itemCount(): Promise<number> {
  const { Count } = await client.send(new ScanCommand({ TableName: tableName, Select: 'COUNT', ConsistentRead: true }));
  return Count ?? 0;
}

function request(route: (typeof keyedRoutes)[number], agentId?: string) {
  const writes = route.method !== 'GET' && route.method !== 'DELETE';
  return invoke(handlers, {
    method: route.method,
    url: route.url,
    headers: {
      authorization: 'Bearer limited-key',
      ...(agentId === undefined ? {} : { 'x-agent-id': agentId }),
      ...(writes ? { 'content-type': 'application/json' } : {}),
    },
    ...(writes ? { body: '{}' } : {}),
  });
}

beforeAll(async () => {
  tableName = await createTestTable('acting-agent');
  client = localDynamoDbClient(dynamoEndpoint());
  useDependencies(dependenciesFor(createStores(client, tableName), { resolveKey }));
  // A session s1 with a state, which every write would change if it got through.
  const seeded = await invoke(handlers, {
    method: 'PUT',
    url: '/v1/sessions/s1/state',
    headers: { authorization: 'Bearer tenant-key', 'content-type': 'application/json' },
    body: '{"turns":1}',
  });
  expect(seeded.status).toBe(200);
});

afterAll(() => {
  useDependencies(undefined);
  client.destroy();
});

describe('a key limited to some agents', () => {
  it.each(keyedRoutes.map((route) => [route.key, route] as const))('%s: refused without X-Agent-Id', async (_key, route) => {
    // Prepare
    const before = await itemCount();

    // Act
    const response = await request(route);

    // Assess
    expect(response.status).toBe(403);
    expect(response.headers['content-type']).toBe('application/problem+json');
    expect(response.json).toEqual({
      type: 'https://agentstate.dev/problems/forbidden',
      title: 'Forbidden',
      status: 403,
      code: 'forbidden',
      detail: 'this key acts as an agent: send X-Agent-Id with one of its agents',
      agents: ['general'],
    });
    expect(await itemCount()).toBe(before);
  });

  it.each(keyedRoutes.map((route) => [route.key, route] as const))('%s: refused as an agent that is not its own', async (_key, route) => {
    const before = await itemCount();

    const response = await request(route, 'billing');

    expect(response.status).toBe(403);
    expect(response.json).toMatchObject({ code: 'forbidden', detail: 'this key may not act as agent billing', agents: ['general'] });
    expect(await itemCount()).toBe(before);
  });

  it.each(keyedRoutes.map((route) => [route.key, route] as const))('%s: an X-Agent-Id that is no id is invalid_id', async (_key, route) => {
    const before = await itemCount();

    const response = await request(route, 'general agent');

    expect(response.status).toBe(400);
    expect(response.json).toMatchObject({
      code: 'invalid_id',
      detail: 'X-Agent-Id must be 1–128 characters of A-Z a-z 0-9 . _ : ~ @ -, other than . and ..',
      field: 'X-Agent-Id',
    });
    expect(await itemCount()).toBe(before);
  });

  it('gets past the rule as its own agent', async () => {
    const read = await invoke(handlers, {
      method: 'GET',
      url: '/v1/sessions/s1/state',
      headers: { authorization: 'Bearer limited-key', 'x-agent-id': 'general' },
    });

    expect(read.status).toBe(200);
    expect(read.json.state).toEqual({ turns: 1 });
  });
});
