import { type DynamoDBClient, GetItemCommand, ScanCommand } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { APIGatewayProxyEventV2, APIGatewayRequestAuthorizerEventV2, Context } from 'aws-lambda';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { type AuthorizerResult, createAuthorizer } from '../../functions/http/edge/authorizer.js';
import { API_KEY_PREFIX, ApiKeyError, ApiKeyStore, apiKeyItems, hashApiKey } from '../../functions/store/access/api-keys.js';
import { createStores } from '../../functions/store/index.js';
import { createTestTable, dynamoEndpoint, testDynamoDbClient } from '../helpers/dynamodb.js';

let client: DynamoDBClient;
let tableName: string;
let store: ApiKeyStore;

beforeAll(async () => {
  client = testDynamoDbClient();
  tableName = await createTestTable('api-keys');
  store = new ApiKeyStore(client, tableName);
});

afterAll(() => client.destroy());

/** The event API Gateway sends a REQUEST authorizer (payload 2.0) for one Authorization header. */
function authorizerEvent(authorization?: string): APIGatewayRequestAuthorizerEventV2 {
  return {
    version: '2.0',
    type: 'REQUEST',
    routeArn: 'arn:aws:execute-api:us-east-1:123456789012:api/$default/GET/v1/sessions',
    identitySource: authorization === undefined ? [] : [authorization],
    routeKey: 'GET /v1/sessions',
    rawPath: '/v1/sessions',
    rawQueryString: '',
    headers: authorization === undefined ? {} : { authorization },
    requestContext: {} as APIGatewayRequestAuthorizerEventV2['requestContext'],
  } as APIGatewayRequestAuthorizerEventV2;
}

describe('ApiKeyStore', () => {
  it('issues an as_ key with 256 random bits and stores only its hash', async () => {
    // Act
    const { apiKey, key } = await store.create({ tenant: 'acme' });

    // Assess
    expect(apiKey).toMatch(/^as_[A-Za-z0-9_-]{43}$/);
    expect(key).toMatchObject({ tenant: 'acme', agents: null, revokedAt: null, keyId: expect.stringMatching(/^[0-9a-f]{12}$/) });
    const { Item } = await client.send(
      new GetItemCommand({ TableName: tableName, Key: { pk: { S: apiKeyItems.key(hashApiKey(apiKey)) }, sk: { S: 'K' } } }),
    );
    expect(Item?.tenant).toEqual({ S: 'acme' });
    const everything = JSON.stringify((await client.send(new ScanCommand({ TableName: tableName }))).Items);
    expect(everything).not.toContain(apiKey.slice(API_KEY_PREFIX.length));
  });

  it('resolves a key to its tenant and agents, and an unknown key to null', async () => {
    const { apiKey } = await store.create({ tenant: 'acme', agents: ['planner', 'writer'] });

    expect(await store.resolve(apiKey)).toEqual({ tenant: 'acme', agents: ['planner', 'writer'] });
    expect(await store.resolve(`${apiKey}x`)).toBeNull();
    expect(await store.resolve('')).toBeNull();
    expect(await store.resolve('x'.repeat(10_000))).toBeNull();
  });

  it('lists keys newest first, optionally of one tenant, never showing a key or its hash', async () => {
    // Prepare
    let clock = Date.parse('2030-01-01T00:00:00Z');
    const timed = new ApiKeyStore(client, tableName, () => {
      clock += 1000;
      return new Date(clock);
    });
    const first = await timed.create({ tenant: 'listing-a' });
    const second = await timed.create({ tenant: 'listing-b' });
    const third = await timed.create({ tenant: 'listing-a' });

    // Act
    const all = await store.list();
    const onlyA = await store.list({ tenant: 'listing-a' });

    // Assess
    const ids = all.map((key) => key.keyId);
    expect(ids.indexOf(third.key.keyId)).toBeLessThan(ids.indexOf(second.key.keyId));
    expect(ids.indexOf(second.key.keyId)).toBeLessThan(ids.indexOf(first.key.keyId));
    expect(onlyA.map((key) => key.keyId)).toEqual([third.key.keyId, first.key.keyId]);
    expect(Object.keys(onlyA[0] ?? {}).sort()).toEqual(['agents', 'createdAt', 'keyId', 'revokedAt', 'tenant']);
  });

  it('revokes by key id: the key stops resolving, and a second revoke keeps the first time', async () => {
    // Prepare
    const { apiKey, key } = await store.create({ tenant: 'revoking' });

    // Act
    const revoked = await store.revoke(key.keyId);
    const again = await store.revoke(key.keyId);

    // Assess
    expect(revoked?.revokedAt).toEqual(expect.any(String));
    expect(again?.revokedAt).toBe(revoked?.revokedAt);
    expect(await store.resolve(apiKey)).toBeNull();
    expect((await store.list({ tenant: 'revoking' }))[0]?.revokedAt).toBe(revoked?.revokedAt);
    expect(await store.revoke('000000000000')).toBeNull();
  });

  it('reads a key consistently, so that no lookup after a revoke answered can see it live (and the authorizer cache it)', async () => {
    // Prepare
    const { apiKey } = await store.create({ tenant: 'consistent' });
    const sent = vi.spyOn(DynamoDBDocumentClient.prototype, 'send');

    // Act
    await store.resolve(apiKey);

    // Assess
    const reads = sent.mock.calls.map(([command]) => (command as { input: { ConsistentRead?: boolean } }).input);
    sent.mockRestore();
    expect(reads).toHaveLength(1);
    expect(reads[0]?.ConsistentRead).toBe(true);
  });

  it.each([
    ['a tenant with a #', { tenant: 'a#b' }],
    ['an empty tenant', { tenant: '' }],
    ['an agent with a space', { tenant: 'ok', agents: ['bad agent'] }],
    ['an empty list of agents (never read as any agent)', { tenant: 'ok', agents: [] }],
  ])('refuses %s', async (_case, input) => {
    await expect(store.create(input)).rejects.toBeInstanceOf(ApiKeyError);
  });

  it('keeps key items out of every tenant’s session list', async () => {
    await store.create({ tenant: 'isolated' });
    const { sessions } = createStores(client, tableName);

    const page = await sessions.listSessions('isolated', { limit: 50 });

    expect(page.items).toEqual([]);
  });
});

describe('authorizer', () => {
  const authorize = (authorization?: string) => createAuthorizer((key) => store.resolve(key))(authorizerEvent(authorization));

  it('accepts a bearer key and hands its tenant to the handlers', async () => {
    const { apiKey } = await store.create({ tenant: 'acme' });

    expect(await authorize(`Bearer ${apiKey}`)).toEqual({ isAuthorized: true, context: { tenant: 'acme' } });
    expect(await authorize(`bearer   ${apiKey}`)).toEqual({ isAuthorized: true, context: { tenant: 'acme' } });
  });

  it('passes the agents a key is limited to as a comma-separated list', async () => {
    const { apiKey } = await store.create({ tenant: 'acme', agents: ['planner', 'writer'] });

    expect(await authorize(`Bearer ${apiKey}`)).toEqual({
      isAuthorized: true,
      context: { tenant: 'acme', agents: 'planner,writer' },
    });
  });

  it.each([
    ['no header', undefined],
    ['an empty header', ''],
    ['another scheme', 'Basic dXNlcjpwYXNz'],
    ['an unknown key', `Bearer ${API_KEY_PREFIX}unknown`],
    ['a bare key without Bearer', `${API_KEY_PREFIX}whatever`],
  ])('grants no tenant for %s (the handler then answers 401 unauthorized)', async (_case, header) => {
    expect(await authorize(header)).toEqual({ isAuthorized: true, context: {} });
  });

  it('grants no tenant for a revoked key', async () => {
    const { apiKey, key } = await store.create({ tenant: 'acme' });
    await store.revoke(key.keyId);

    expect(await authorize(`Bearer ${apiKey}`)).toEqual({ isAuthorized: true, context: {} });
  });

  it('throws (API Gateway answers 500, nothing passes) when the table cannot be read', async () => {
    const broken = createAuthorizer((key) => new ApiKeyStore(client, 'no-such-table').resolve(key));

    await expect(broken(authorizerEvent('Bearer as_x'))).rejects.toThrow();
  });
});

describe('authorizer → handler contract (the Lambda environment the construct sets)', () => {
  beforeAll(() => {
    vi.stubEnv('AGENTSTATE_TABLE', tableName);
    vi.stubEnv('AGENTSTATE_DYNAMODB_ENDPOINT', dynamoEndpoint());
    vi.stubEnv('AGENTSTATE_AUTH', 'authorizer'); // as lib/agent-state.ts sets it
  });
  afterEach(() => vi.resetModules());
  afterAll(() => vi.unstubAllEnvs());

  /** An API Gateway v2 event for GET /v1/sessions, with what the authorizer put in its context. */
  function listSessionsEvent(authorizer?: AuthorizerResult['context'], authorization?: string): APIGatewayProxyEventV2 {
    return {
      version: '2.0',
      routeKey: 'GET /v1/sessions',
      rawPath: '/v1/sessions',
      rawQueryString: '',
      headers: authorization ? { authorization } : {},
      requestContext: {
        accountId: '123456789012',
        apiId: 'api',
        domainName: 'api.example.com',
        domainPrefix: 'api',
        http: { method: 'GET', path: '/v1/sessions', protocol: 'HTTP/1.1', sourceIp: '203.0.113.1', userAgent: 'test' },
        requestId: 'r1',
        routeKey: 'GET /v1/sessions',
        stage: '$default',
        time: '01/Jan/2030:00:00:00 +0000',
        timeEpoch: 1_893_456_000_000,
        ...(authorizer ? { authorizer: { lambda: authorizer } } : {}),
      },
      isBase64Encoded: false,
    } as APIGatewayProxyEventV2;
  }

  it('serves the tenant the authorizer resolved', async () => {
    const { handlers } = await import('../../functions/http/index.js');
    const { apiKey } = await store.create({ tenant: 'contract' });
    const decision = await createAuthorizer((key) => store.resolve(key))(authorizerEvent(`Bearer ${apiKey}`));

    const response = await handlers.sessions(listSessionsEvent(decision.context), {} as Context);

    expect(response.statusCode).toBe(200);
    expect(JSON.parse(response.body ?? '{}')).toEqual({ sessions: [] });
  });

  it("answers the contract's 401 problem for a key the authorizer did not recognise", async () => {
    const { handlers } = await import('../../functions/http/index.js');
    const header = `Bearer ${API_KEY_PREFIX}unknown`;
    const decision = await createAuthorizer((key) => store.resolve(key))(authorizerEvent(header));

    const response = await handlers.sessions(listSessionsEvent(decision.context, header), {} as Context);

    expect(response.statusCode).toBe(401);
    expect(response.headers?.['content-type']).toBe('application/problem+json');
    expect(JSON.parse(response.body ?? '{}')).toMatchObject({ code: 'unauthorized' });
  });

  it('answers 401 without an authorizer tenant, even for the local default key', async () => {
    const { handlers } = await import('../../functions/http/index.js');

    const response = await handlers.sessions(listSessionsEvent(undefined, 'Bearer dev-key'), {} as Context);

    expect(response.statusCode).toBe(401);
  });
});
