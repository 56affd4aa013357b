import { existsSync, readFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiClient, apiClient, uniqueId } from '../helpers/api-client.js';
import { type StartedServerProcess, startServerProcess } from '../helpers/server.js';

/**
 * Someone on the network, and the headers every answer carries (API.md section 1), against
 * `npm start` as a user runs it: the API and its DynamoDB Local listen on 127.0.0.1 only
 * unless HOST says otherwise (and then the banner warns); a browser page cannot reach DynamoDB
 * Local; the inspector's WebSocket URL never comes from the Host header; answers carry
 * nosniff, tenant data no-store, and a 401 WWW-Authenticate.
 */

let server: StartedServerProcess;
let http: ApiClient;
let dynamoDbPort: number;

beforeAll(async () => {
  server = await startServerProcess({ env: { HOST: undefined } });
  http = apiClient(server.url);
  dynamoDbPort = Number(/DynamoDB Local: http:\/\/127\.0\.0\.1:(\d+)/.exec(server.output())?.[1]);
});

afterAll(async () => {
  await server?.stop();
});

/** The local addresses a TCP port listens on, from the kernel's own table (Linux). */
function listeningAddresses(port: number): string[] {
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0');
  const addresses: string[] = [];
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of readFileSync(table, 'utf8').split('\n').slice(1)) {
      const [, local, , state] = line.trim().split(/\s+/);
      // State 0A is LISTEN.
      if (!local?.endsWith(`:${hexPort}`) || state !== '0A') continue;
      // An IPv6 socket bound to ::ffff:127.0.0.1 (Java's way) is the IPv4 loopback address too.
      const address = local.slice(0, -5);
      addresses.push(address.startsWith('0000000000000000FFFF0000') ? address.slice(24) : address);
    }
  }
  return [...new Set(addresses)];
}
const LOOPBACK_V4 = '0100007F';

/** A raw GET with headers fetch() would not let us set (Host). */
function rawGet(path: string, headers: Record<string, string>): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const request = httpRequest({ host: '127.0.0.1', port: server.port, path, headers }, (response) => {
      let body = '';
      response.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
      response.on('end', () => resolve({ status: response.statusCode ?? 0, body }));
    });
    request.on('error', reject);
    request.end();
  });
}

describe('someone on the network', () => {
  it.runIf(existsSync('/proc/net/tcp'))('cannot reach the API or DynamoDB Local: both listen on 127.0.0.1 only', () => {
    expect(listeningAddresses(server.port)).toEqual([LOOPBACK_V4]);
    expect(listeningAddresses(dynamoDbPort)).toEqual([LOOPBACK_V4]);
  });

  it('cannot use DynamoDB Local from a web page: its CORS preflight is refused', async () => {
    // Act: what a browser sends before a page's request to DynamoDB's API.
    const preflight = await fetch(`http://127.0.0.1:${dynamoDbPort}/`, {
      method: 'OPTIONS',
      headers: {
        origin: 'https://evil.example',
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'x-amz-target',
      },
    });
    // Assess
    expect(preflight.headers.get('access-control-allow-origin')).toBeNull();
  });

  it('is warned about in the banner when HOST opens the API to the network', async () => {
    // Act
    const exposed = await startServerProcess({ env: { HOST: '0.0.0.0' } });
    try {
      // Assess: reachable, and the operator was told.
      expect(exposed.output()).toContain('WARNING: HOST=0.0.0.0');
      expect(exposed.output()).toContain('dev-key');
      expect((await fetch(`${exposed.url}/health`)).status).toBe(200);
      if (existsSync('/proc/net/tcp')) expect(listeningAddresses(exposed.port)).not.toEqual([LOOPBACK_V4]);
    } finally {
      await exposed.stop();
    }
  });
});

describe('the inspector page', () => {
  it.each([
    [{ host: 'evil.example:1234' }],
    [{ host: `localhost:${0}`, 'x-forwarded-host': 'evil.example', 'x-forwarded-proto': 'https' }],
  ])('gets the WebSocket URL from the configuration, never from the request (%j)', async (headers) => {
    // Act
    const config = await rawGet('/inspector/config.json', { ...headers, host: headers.host.replace(':0', `:${server.port}`) });
    // Assess
    expect(config.status).toBe(200);
    expect(JSON.parse(config.body)).toEqual({ webSocketUrl: `ws://localhost:${server.port}/v1/ws` });
    expect(config.body).not.toContain('evil');
  });
});

describe('response headers', () => {
  it('carry nosniff on every answer, no-store on tenant data', async () => {
    // Prepare
    const sid = uniqueId('headers');
    await http.put(`/v1/sessions/${sid}/state`, { secret: 'tenant data' });
    // Act
    const answers = {
      state: await http.get(`/v1/sessions/${sid}/state`),
      write: await http.patch(`/v1/sessions/${sid}/state`, { more: 1 }),
      notFound: await http.get(`/v1/sessions/${uniqueId('none')}`),
      badRequest: await http.get('/v1/sessions?limit=0'),
      unknownRoute: await http.get('/v1/nothing-here'),
      health: await http.get('/health', { key: null }),
      inspector: await http.get('/inspector/config.json', { key: null }),
    };
    // Assess
    for (const [name, answer] of Object.entries(answers)) {
      expect(answer.headers.get('x-content-type-options'), name).toBe('nosniff');
    }
    for (const name of ['state', 'write', 'notFound', 'badRequest'] as const) {
      expect(answers[name].headers.get('cache-control'), name).toBe('no-store');
    }
  });

  it('carry WWW-Authenticate: Bearer on a 401, with error="invalid_token" for a key nobody issued', async () => {
    // Act
    const missing = await http.get('/v1/sessions', { key: null });
    const invalid = await http.get('/v1/sessions', { key: 'not-a-key' });
    // Assess
    expect(missing.status).toBe(401);
    expect(missing.headers.get('www-authenticate')).toBe('Bearer realm="agentstate"');
    expect(invalid.status).toBe(401);
    expect(invalid.headers.get('www-authenticate')).toBe('Bearer realm="agentstate", error="invalid_token"');
    expect(invalid.headers.get('cache-control')).toBe('no-store');
  });

  it('carry them on an Idempotency-Key replay too', async () => {
    const headers = { 'idempotency-key': uniqueId('idem') };
    const sid = uniqueId('replay');
    await http.patch(`/v1/sessions/${sid}/state`, { a: 1 }, { headers });
    const replay = await http.patch(`/v1/sessions/${sid}/state`, { a: 1 }, { headers });
    expect(replay.headers.get('idempotency-replayed')).toBe('true');
    expect(replay.headers.get('x-content-type-options')).toBe('nosniff');
    expect(replay.headers.get('cache-control')).toBe('no-store');
  });
});
