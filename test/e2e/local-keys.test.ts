import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminCli, dynamoDbEndpointOf } from '../helpers/admin.js';
import { apiClient } from '../helpers/api-client.js';
import { type ServerProcess, startServerProcess } from '../helpers/server.js';

let server: ServerProcess;
let endpoint: string;

beforeAll(async () => {
  server = await startServerProcess();
  endpoint = dynamoDbEndpointOf(server);
});
afterAll(async () => {
  await server?.stop();
});

describe('keys made by the admin CLI against the local table', () => {
  it('are accepted by npm start until revoked', async () => {
    // Prepare: a key for a tenant of its own, issued the way the deploy guide shows.
    const { apiKey, keyId } = JSON.parse(await adminCli(endpoint, 'keys', 'create', '--tenant', 'cli-local', '--json')) as {
      apiKey: string;
      keyId: string;
    };
    const asCli = apiClient(server.url, apiKey);

    // Act
    const written = await asCli.put('/v1/sessions/from-cli/state', { issuedBy: 'cli' });
    const seenByDevKey = await apiClient(server.url).get('/v1/sessions/from-cli');
    await adminCli(endpoint, 'keys', 'revoke', keyId);
    const afterRevoke = await asCli.get('/v1/sessions/from-cli/state');

    // Assess
    expect(written.status).toBe(200);
    expect(seenByDevKey.status).toBe(404);
    expect(afterRevoke.status).toBe(401);
    expect(afterRevoke.body.code).toBe('unauthorized');
  });
});
