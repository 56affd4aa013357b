import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { type RouteGroup, routeGroups } from '../../functions/http/contract/routes.js';
import type { HttpHandler } from '../../functions/http/edge/types.js';
import { createRequestListener, MAX_BODY_BYTES } from '../../functions/local/http-adapter.js';

// The local API Gateway stand-in, over a real node:http server, in front of fake handlers
// that answer with the event they got (or, on request, misbehave).

const calls: APIGatewayProxyEventV2[] = [];
const fake: HttpHandler = async (event): Promise<APIGatewayProxyStructuredResultV2> => {
  calls.push(event);
  switch (event.headers['x-test']) {
    case 'throw':
      throw new Error('secret table name agentstate-prod exploded');
    case 'body-length':
      return { statusCode: 200, body: String(Buffer.byteLength(event.body ?? '', 'utf8')) };
    case 'rich-result':
      return {
        statusCode: 201,
        headers: { 'content-type': 'application/octet-stream', 'x-count': 3 },
        cookies: ['a=1; Path=/', 'b=2; HttpOnly'],
        body: Buffer.from([0, 1, 2, 255]).toString('base64'),
        isBase64Encoded: true,
      };
    default:
      return { statusCode: 200, headers: { 'content-type': 'application/json' }, body: JSON.stringify(event) };
  }
};
const handlers = Object.fromEntries(routeGroups.map((group) => [group, fake])) as Record<RouteGroup, HttpHandler>;
const logError = vi.fn();

let server: Server;
let base: string;
beforeAll(async () => {
  server = createServer(createRequestListener(handlers, { logError }));
  await new Promise<void>((resolveListen) => server.listen(0, '127.0.0.1', resolveListen));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolveClose) => server.close(resolveClose));
});
beforeEach(() => {
  calls.length = 0;
  logError.mockClear();
});

async function eventOf(path: string, init?: RequestInit): Promise<APIGatewayProxyEventV2> {
  const response = await fetch(`${base}${path}`, init);
  expect(response.status).toBe(200);
  return (await response.json()) as APIGatewayProxyEventV2;
}

/** A raw request, for what fetch will not send: repeated headers, a lying Content-Length. */
function rawRequest(options: {
  method: string;
  path: string;
  headers: Record<string, string | string[]>;
  body?: Buffer;
  endBody?: boolean;
}): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: Buffer }> {
  return new Promise((resolveResponse, reject) => {
    const req = request(`${base}${options.path}`, { method: options.method, headers: options.headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => {
        req.destroy();
        resolveResponse({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) });
      });
    });
    // The server may hang up while we are still sending a body it refused: that is expected.
    req.on('error', (error: NodeJS.ErrnoException) => (error.code === 'EPIPE' || error.code === 'ECONNRESET' ? undefined : reject(error)));
    if (options.body) req.write(options.body);
    if (options.endBody !== false) req.end();
  });
}

describe('request → API Gateway v2 event', () => {
  it.each([
    ['GET', '/health', 'GET /health'],
    ['POST', '/v1/sessions', 'POST /v1/sessions'],
    ['GET', '/v1/sessions/s1', 'GET /v1/sessions/{sid}'],
    ['PATCH', '/v1/sessions/s1/state', 'PATCH /v1/sessions/{sid}/state'],
    ['GET', '/v1/sessions/s1/versions/7', 'GET /v1/sessions/{sid}/versions/{v}'],
  ])('%s %s has routeKey "%s"', async (method, path, routeKey) => {
    const event = await eventOf(path, { method, ...(method === 'GET' ? {} : { body: '{}' }) });

    expect(event.routeKey).toBe(routeKey);
    expect(event.requestContext.routeKey).toBe(routeKey);
    expect(event.requestContext.http.method).toBe(method);
  });

  it('fills the fixed fields as API Gateway does', async () => {
    const before = Date.now();

    const event = await eventOf('/health');

    expect(event).toMatchObject({
      version: '2.0',
      rawPath: '/health',
      rawQueryString: '',
      isBase64Encoded: false,
      requestContext: {
        stage: '$default',
        domainName: '127.0.0.1',
        http: { path: '/health', protocol: 'HTTP/1.1', sourceIp: '127.0.0.1' },
      },
    });
    expect(event.requestContext.timeEpoch).toBeGreaterThanOrEqual(before);
    expect(event.requestContext.time).toMatch(/^\d{2}\/[A-Z][a-z]{2}\/\d{4}:\d{2}:\d{2}:\d{2} \+0000$/);
    // Omitted, not empty, when there is nothing to carry.
    expect(event).not.toHaveProperty('pathParameters');
    expect(event).not.toHaveProperty('queryStringParameters');
    expect(event).not.toHaveProperty('body');
    expect(event).not.toHaveProperty('cookies');
  });

  it('decodes path parameters but keeps rawPath as sent, %2F included', async () => {
    const event = await eventOf('/v1/sessions/a%20b%2Fc/nodes/n%3A1');

    expect(event.routeKey).toBe('GET /v1/sessions/{sid}/nodes/{nid}');
    expect(event.pathParameters).toEqual({ sid: 'a b/c', nid: 'n:1' });
    expect(event.rawPath).toBe('/v1/sessions/a%20b%2Fc/nodes/n%3A1');
  });

  it('joins repeated query keys with "," and decodes values', async () => {
    const event = await eventOf('/v1/sessions?tag=a&limit=5&tag=b%2Cc&q=x%20y');

    expect(event.rawQueryString).toBe('tag=a&limit=5&tag=b%2Cc&q=x%20y');
    expect(event.queryStringParameters).toEqual({ tag: 'a,b,c', limit: '5', q: 'x y' });
  });

  it('lowercases header names, joins repeats with ",", and moves cookies to their own list', async () => {
    const response = await rawRequest({
      method: 'GET',
      path: '/health',
      headers: { 'X-Mixed-Case': 'yes', 'X-Repeat': ['one', 'two'], Cookie: 'a=1; b=2' },
    });
    const event = JSON.parse(response.body.toString('utf8')) as APIGatewayProxyEventV2;

    expect(event.headers['x-mixed-case']).toBe('yes');
    expect(event.headers['x-repeat']).toBe('one,two');
    expect(Object.keys(event.headers).every((name) => name === name.toLowerCase())).toBe(true);
    expect(event.cookies).toEqual(['a=1', 'b=2']);
    expect(event.headers).not.toHaveProperty('cookie');
  });

  it('passes the body as a UTF-8 string and ties requestId to the apigw-requestid header', async () => {
    const response = await fetch(`${base}/v1/sessions/s1/state`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ note: 'héllo ✓' }),
    });
    const event = (await response.json()) as APIGatewayProxyEventV2;

    expect(event.body).toBe('{"note":"héllo ✓"}');
    expect(event.isBase64Encoded).toBe(false);
    expect(event.requestContext.requestId).toBe(response.headers.get('apigw-requestid'));
  });
});

describe('handler result → response', () => {
  it('writes status, headers, cookies and a base64 body', async () => {
    const response = await rawRequest({ method: 'GET', path: '/health', headers: { 'x-test': 'rich-result' } });

    expect(response.status).toBe(201);
    expect(response.headers['content-type']).toBe('application/octet-stream');
    expect(response.headers['x-count']).toBe('3');
    expect(response.headers['set-cookie']).toEqual(['a=1; Path=/', 'b=2; HttpOnly']);
    expect(response.body).toEqual(Buffer.from([0, 1, 2, 255]));
  });

  it('answers 500 internal, without the error, when a handler throws, and logs it', async () => {
    const response = await fetch(`${base}/v1/sessions`, { headers: { 'x-test': 'throw' } });
    const text = await response.text();

    expect(response.status).toBe(500);
    expect(response.headers.get('content-type')).toBe('application/problem+json');
    expect(JSON.parse(text)).toMatchObject({ status: 500, code: 'internal' });
    expect(text).not.toContain('agentstate-prod');
    expect(logError).toHaveBeenCalledWith(expect.stringContaining('GET /v1/sessions'), expect.any(Error));
  });
});

describe('requests no route takes', () => {
  it.each([
    ['GET', '/nope'],
    ['DELETE', '/v1/sessions/s1/state'],
    ['GET', '/v1/sessions/s1/state/extra'],
    ['GET', '/v1/sessions//state'],
  ])('%s %s → 404 not_found', async (method, path) => {
    const response = await fetch(`${base}${path}`, { method });

    expect(response.status).toBe(404);
    expect(response.headers.get('content-type')).toBe('application/problem+json');
    expect(await response.json()).toEqual({
      type: 'https://agentstate.dev/problems/not-found',
      title: 'Not found',
      status: 404,
      code: 'not_found',
      detail: `no route for ${method} ${path}`,
    });
    expect(calls).toHaveLength(0);
  });

  it('answers 400 invalid_request for malformed percent-encoding in a path parameter', async () => {
    const response = await fetch(`${base}/v1/sessions/%E0%A4%A/state`);

    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({ code: 'invalid_request' });
    expect(calls).toHaveLength(0);
  });
});

describe('body size limit (6 MiB, as Lambda)', () => {
  it('accepts a body of exactly the limit', async () => {
    const response = await fetch(`${base}/v1/sessions/s1/state`, {
      method: 'PUT',
      headers: { 'x-test': 'body-length' },
      body: 'x'.repeat(MAX_BODY_BYTES),
    });

    expect(response.status).toBe(200);
    expect(await response.text()).toBe(String(MAX_BODY_BYTES));
  });

  it('refuses a declared oversize body with 413 before it is sent', async () => {
    // Only one byte of the declared 7 MiB ever goes out: an answer proves nothing was awaited.
    const response = await rawRequest({
      method: 'PUT',
      path: '/v1/sessions/s1/state',
      headers: { 'content-length': String(7 * 1024 * 1024), 'content-type': 'application/json' },
      body: Buffer.from('{'),
      endBody: false,
    });

    expect(response.status).toBe(413);
    expect(JSON.parse(response.body.toString('utf8'))).toMatchObject({ status: 413, code: 'payload_too_large' });
    expect(calls).toHaveLength(0);
  });

  it('still delivers the 413 to a client that sends the whole oversize body (as curl does)', async () => {
    // Hanging up on unread bytes makes the kernel reset the connection, which can destroy the
    // 413 before the client reads it; the adapter drains instead.
    const body = Buffer.alloc(7 * 1024 * 1024, 'x');
    const response = await rawRequest({
      method: 'PUT',
      path: '/v1/sessions/s1/state',
      headers: { 'content-length': String(body.length), expect: '100-continue' },
      body,
    });

    expect(response.status).toBe(413);
    expect(calls).toHaveLength(0);
  });

  it('refuses a chunked body with 413 once it crosses the limit', async () => {
    const response = await rawRequest({
      method: 'PUT',
      path: '/v1/sessions/s1/state',
      headers: { 'transfer-encoding': 'chunked' },
      body: Buffer.alloc(MAX_BODY_BYTES + 1, 'x'),
    });

    expect(response.status).toBe(413);
    expect(JSON.parse(response.body.toString('utf8'))).toMatchObject({ code: 'payload_too_large' });
    expect(calls).toHaveLength(0);
  });
});
