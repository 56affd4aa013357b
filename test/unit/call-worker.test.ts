import { createHmac } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { workerHandler } from '../../examples/http-worker.js';
import { DEFAULT_WORKER_TIMEOUT_MS, MAX_WORKER_TIMEOUT_MS, workerTimeoutMs } from '../../functions/core/agents/worker-timeout.js';
import { AgentStateError } from '../../functions/core/kernel/errors.js';
import { callWorker, type WorkerCallOptions } from '../../functions/workers/call-worker.js';
import { moduleDirsFromEnv } from '../../functions/workers/module-dirs.js';
import { signBody } from '../../functions/workers/outbound.js';
import { validateWorkerUrl } from '../../functions/workers/worker-registration.js';

/* ------------------------------------------------------------------ helpers (local) */

const LOCAL: WorkerCallOptions = { allowLoopbackHttp: true };
const AWS: WorkerCallOptions = { allowLoopbackHttp: false };
const SECRET = 'test-secret-do-not-leak';
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** The last request a test server received (it must have received one). */
function last<T>(received: readonly T[]): T {
  const request = received.at(-1);
  if (request === undefined) throw new Error('no request was received');
  return request;
}

/** What a promise rejected with, failing the test when it resolved. */
async function rejectionOf(promise: Promise<unknown>): Promise<AgentStateError> {
  try {
    await promise;
  } catch (error) {
    expect(error).toBeInstanceOf(AgentStateError);
    return error as AgentStateError;
  }
  throw new Error('expected the promise to reject');
}

function thrownBy(action: () => unknown): AgentStateError {
  try {
    action();
  } catch (error) {
    expect(error).toBeInstanceOf(AgentStateError);
    return error as AgentStateError;
  }
  throw new Error('expected the action to throw');
}

interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/** A loopback HTTP server: each test registers what its path answers; every request is recorded. */
async function startServer(
  routes: Record<string, (request: IncomingMessage, response: ServerResponse, body: string) => void | Promise<void>>,
) {
  const received: Received[] = [];
  const server: Server = createServer(async (request, response) => {
    const chunks: Buffer[] = [];
    for await (const chunk of request as AsyncIterable<Buffer>) chunks.push(chunk);
    const body = Buffer.concat(chunks).toString('utf8');
    const url = request.url ?? '/';
    received.push({ path: url, headers: request.headers, body });
    const route = routes[url.split('?')[0] ?? ''];
    if (!route) {
      response.writeHead(404).end();
      return;
    }
    try {
      await route(request, response, body);
    } catch {
      if (!response.headersSent) response.writeHead(500).end();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    received,
    port,
    url: (pathname: string) => `http://127.0.0.1:${port}${pathname}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function json(response: ServerResponse, status: number, value: unknown, headers: Record<string, string> = {}) {
  const text = JSON.stringify(value);
  response.writeHead(status, { 'content-type': 'application/json', ...headers });
  response.end(text);
}

const requestBody = JSON.stringify({
  session_id: 's1',
  decision_id: 'd1',
  agent_id: 'a1',
  turn_id: null,
  trigger: { type: 'client.messages', messages: [{ role: 'user', content: 'héllo ✓ "quoted"' }] },
  proposed: {},
  state: { turns: 2 },
  agent: { model: 'small-fast' },
  messages: [],
  ancestry: [],
  attempts: 1,
  version: 3,
  head: 'u1',
});

/* ------------------------------------------------------------------ signBody, timeouts */

describe('signBody', () => {
  it('is sha256=<hex HMAC-SHA256(secret, body)>', () => {
    // RFC 4231-style known answer (the classic "quick brown fox" vector).
    expect(signBody('key', 'The quick brown fox jumps over the lazy dog')).toBe(
      'sha256=f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8',
    );
    expect(signBody(SECRET, requestBody)).toBe(
      `sha256=${createHmac('sha256', SECRET).update(Buffer.from(requestBody, 'utf8')).digest('hex')}`,
    );
  });
});

describe('workerTimeoutMs', () => {
  it('defaults to 10 s and never exceeds 25 s', () => {
    expect(DEFAULT_WORKER_TIMEOUT_MS).toBe(10_000);
    expect(MAX_WORKER_TIMEOUT_MS).toBe(25_000);
    expect(workerTimeoutMs({})).toBe(10_000);
    expect(workerTimeoutMs({ timeoutMs: 200 })).toBe(200);
    expect(workerTimeoutMs({ timeoutMs: 60_000 })).toBe(25_000);
    expect(workerTimeoutMs({ timeoutMs: 0 })).toBe(10_000);
    expect(workerTimeoutMs({ timeoutMs: -5 })).toBe(10_000);
    expect(workerTimeoutMs({ timeoutMs: Number.NaN })).toBe(10_000);
    expect(workerTimeoutMs({ timeoutMs: 1.7 })).toBe(1);
  });
});

/* ------------------------------------------------------------------ validateWorkerUrl */

describe('validateWorkerUrl', () => {
  const FORMS = 'worker.url must be https://…, lambda:<arn> or module:<path>';
  const ARN = 'arn:aws:lambda:eu-west-1:123456789012:function:my-worker';

  it.each([
    ['https://worker.example.com/decide'],
    ['https://8.8.8.8/decide'],
    ['https://[2606:4700::1]:8443/decide'],
    [`lambda:${ARN}`],
    [`lambda:${ARN}:live`],
    ['lambda:arn:aws-us-gov:lambda:us-gov-west-1:123456789012:function:w'],
  ])('accepts %s in both modes', (url) => {
    expect(() => validateWorkerUrl(url, { allowLoopbackHttp: false })).not.toThrow();
    expect(() => validateWorkerUrl(url, { allowLoopbackHttp: true })).not.toThrow();
  });

  it.each([
    ['http://localhost:4100/decide'],
    ['http://127.0.0.1:4100/decide'],
    ['http://127.9.9.9/decide'],
    ['http://[::1]:4100/decide'],
    ['module:examples/worker.ts'],
    [`module:${path.resolve('examples/worker.ts')}`],
    ['https://10.0.0.1/decide'],
    ['https://localhost/decide'],
  ])('accepts %s only locally', (url) => {
    expect(() => validateWorkerUrl(url, { allowLoopbackHttp: true })).not.toThrow();
    const error = thrownBy(() => validateWorkerUrl(url, { allowLoopbackHttp: false }));
    expect(error.code).toBe('invalid_request');
    expect(error.status).toBe(400);
  });

  it.each([
    ['https://10.0.0.1/'],
    ['https://172.16.0.1/'],
    ['https://192.168.1.1/'],
    ['https://127.0.0.1/'],
    ['https://169.254.169.254/latest/meta-data'],
    ['https://[::1]/'],
    ['https://[fe80::1]/'],
    ['https://[fc00::1]/'],
    ['https://[::ffff:10.0.0.1]/'],
    ['https://100.64.0.1/'],
    ['https://0.0.0.0/'],
    ['https://0x7f.1/'], // the URL parser normalizes this to 127.0.0.1
    ['https://2130706433/'], // and this
    ['https://localhost/'],
    ['https://LOCALHOST./'],
    ['https://api.localhost/'],
  ])('refuses %s in AWS mode (SSRF)', (url) => {
    const error = thrownBy(() => validateWorkerUrl(url, { allowLoopbackHttp: false }));
    expect(error.code).toBe('invalid_request');
  });

  it.each([['http://example.com/decide'], ['http://10.0.0.1/decide'], ['http://8.8.8.8/decide'], ['http://localhost.example.com/decide']])(
    'refuses http:// to the non-loopback host %s even locally',
    (url) => {
      for (const allowLoopbackHttp of [true, false]) {
        const error = thrownBy(() => validateWorkerUrl(url, { allowLoopbackHttp }));
        expect(error.code).toBe('invalid_request');
        expect(error.message).toContain('http://');
      }
    },
  );

  it.each([[''], ['ftp://example.com/'], ['example.com/decide'], ['ws://localhost/'], ['file:///etc/passwd'], ['javascript:1']])(
    'refuses %j with the list of accepted forms',
    (url) => {
      const error = thrownBy(() => validateWorkerUrl(url, { allowLoopbackHttp: true }));
      expect(error.code).toBe('invalid_request');
      expect(error.message).toContain(FORMS);
    },
  );

  it('refuses credentials in the URL, malformed ARNs, empty module paths and overlong URLs', () => {
    const cases = [
      'https://user:pw@worker.example.com/',
      'lambda:my-function',
      'lambda:arn:aws:lambda:eu-west-1:123:function:x',
      'lambda:arn:aws:s3:::bucket',
      'module:',
      `https://worker.example.com/${'a'.repeat(3000)}`,
      'https://exa mple.com/',
    ];
    for (const url of cases) {
      expect(thrownBy(() => validateWorkerUrl(url, { allowLoopbackHttp: true })).code, url).toBe('invalid_request');
    }
  });
});

/* ------------------------------------------------------------------ http(s) workers */

describe('callWorker over HTTP', () => {
  let server: Awaited<ReturnType<typeof startServer>>;

  beforeAll(async () => {
    server = await startServer({
      '/echo': (_request, response, body) => json(response, 200, { state: { ok: true }, echoed: JSON.parse(body) as unknown }),
      '/status-500': (_request, response) => {
        response.writeHead(500, { 'content-type': 'text/plain' });
        response.end(`internal failure ${'x'.repeat(5000)} END-OF-BODY`);
      },
      '/status-404-empty': (_request, response) => void response.writeHead(404).end(),
      '/text': (_request, response) => {
        response.writeHead(200, { 'content-type': 'text/html' });
        response.end('<html>not json</html>');
      },
      '/empty': (_request, response) => void response.writeHead(200).end(),
      '/no-content': (_request, response) => void response.writeHead(204).end(),
      '/array': (_request, response) => json(response, 200, [1, 2, 3]),
      '/null': (_request, response) => json(response, 200, null),
      '/string': (_request, response) => json(response, 200, 'done'),
      '/slow': async (_request, response) => {
        await sleep(1_500);
        if (!response.destroyed) json(response, 200, {});
      },
      '/redirect': (_request, response) => void response.writeHead(302, { location: '/echo' }).end(),
      '/stalls': (_request, response) => {
        // The status and half an answer in time, and the rest never.
        response.writeHead(200, { 'content-type': 'application/json' });
        response.write('{"state": {"half"');
      },
      '/cut': async (_request, response) => {
        // Half an answer, then the connection goes.
        response.writeHead(200, { 'content-type': 'application/json', 'content-length': '100' });
        response.write('{"state": {"half"');
        await sleep(50);
        response.socket?.destroy();
      },
      '/huge': (_request, response) => {
        response.writeHead(200, { 'content-type': 'application/json' });
        const chunk = `"${'y'.repeat(1024 * 1024 - 3)}",`;
        response.write('[');
        for (let i = 0; i < 7 && !response.destroyed; i++) response.write(chunk);
        response.end('0]');
      },
    });
  });

  afterAll(async () => {
    await server.close();
  });

  it('POSTs the exact body as JSON, signed with the secret', async () => {
    const answer = await callWorker({ url: server.url('/echo'), secret: SECRET }, requestBody, LOCAL);
    expect(answer).toEqual({ state: { ok: true }, echoed: JSON.parse(requestBody) });

    const seen = last(server.received);
    expect(seen.body).toBe(requestBody);
    expect(seen.headers['content-type']).toBe('application/json');
    expect(seen.headers['user-agent']).toBe('agentstate');
    expect(seen.headers['content-length']).toBe(String(Buffer.byteLength(requestBody)));
    const expected = `sha256=${createHmac('sha256', SECRET).update(seen.body, 'utf8').digest('hex')}`;
    expect(seen.headers['x-agentstate-signature']).toBe(expected);
    expect(seen.headers['x-agentstate-signature']).toBe(signBody(SECRET, requestBody));
    // Standard Webhooks: the id and a timestamp of now, signed with the body.
    const timestamp = Number(seen.headers['webhook-timestamp']);
    expect(Math.abs(timestamp - Date.now() / 1000)).toBeLessThan(5);
    const signed = `${seen.headers['webhook-id']}.${timestamp}.${requestBody}`;
    expect(seen.headers['webhook-signature']).toBe(`v1,${createHmac('sha256', SECRET).update(signed).digest('base64')}`);
  });

  it('names the call by its decision and attempt in webhook-id', async () => {
    await callWorker({ url: server.url('/echo'), secret: SECRET }, requestBody, { ...LOCAL, messageId: 'd1:2' });
    expect(last(server.received).headers['webhook-id']).toBe('d1:2');
  });

  it('sends no signature header without a secret', async () => {
    await callWorker({ url: server.url('/echo') }, requestBody, LOCAL);
    const seen = last(server.received);
    expect(seen.headers).not.toHaveProperty('x-agentstate-signature');
    expect(seen.headers).not.toHaveProperty('webhook-signature');
  });

  it('also reaches a localhost URL', async () => {
    await expect(callWorker({ url: `http://localhost:${server.port}/echo` }, requestBody, LOCAL)).resolves.toMatchObject({
      state: { ok: true },
    });
  });

  it('turns a non-2xx answer into worker_failed with the status and a short excerpt', async () => {
    const error = await rejectionOf(callWorker({ url: server.url('/status-500'), secret: SECRET }, requestBody, LOCAL));
    expect(error.code).toBe('worker_failed');
    expect(error.status).toBe(502);
    expect(error.message).toContain('HTTP 500');
    expect(error.message).toContain('internal failure');
    expect(error.message).not.toContain('END-OF-BODY');
    expect(error.message.length).toBeLessThan(300);
    expect(error.message).not.toContain(SECRET);

    const empty = await rejectionOf(callWorker({ url: server.url('/status-404-empty') }, requestBody, LOCAL));
    expect(empty.code).toBe('worker_failed');
    expect(empty.message).toContain('HTTP 404');
  });

  it('turns a 2xx answer that is not JSON into worker_failed', async () => {
    for (const pathname of ['/text', '/empty', '/no-content']) {
      const error = await rejectionOf(callWorker({ url: server.url(pathname) }, requestBody, LOCAL));
      expect(error.code, pathname).toBe('worker_failed');
      expect(error.message, pathname).toContain('not JSON');
    }
  });

  it('turns JSON that is not an object (array, null, string) into worker_failed', async () => {
    for (const pathname of ['/array', '/null', '/string']) {
      const error = await rejectionOf(callWorker({ url: server.url(pathname) }, requestBody, LOCAL));
      expect(error.code, pathname).toBe('worker_failed');
      expect(error.message, pathname).toContain('not an object');
    }
  });

  it('gives up on a slow worker with worker_timeout, close to its timeout', async () => {
    const started = performance.now();
    const error = await rejectionOf(callWorker({ url: server.url('/slow'), timeoutMs: 200 }, requestBody, LOCAL));
    const elapsed = performance.now() - started;
    expect(error.code).toBe('worker_timeout');
    expect(error.status).toBe(504);
    expect(error.message).toContain('200 ms');
    expect(elapsed).toBeGreaterThanOrEqual(190);
    expect(elapsed).toBeLessThan(1_000);
  });

  it('gives up with worker_timeout on a worker whose answer stalls after its status', async () => {
    const error = await rejectionOf(callWorker({ url: server.url('/stalls'), timeoutMs: 200 }, requestBody, LOCAL));
    expect(error.code).toBe('worker_timeout');
    expect(error.status).toBe(504);
  });

  it('ends the call with worker_timeout when the caller aborts', async () => {
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 100);
    const started = performance.now();
    const error = await rejectionOf(callWorker({ url: server.url('/slow') }, requestBody, { ...LOCAL, signal: controller.signal }));
    expect(error.code).toBe('worker_timeout');
    expect(performance.now() - started).toBeLessThan(1_000);
  });

  it('does not follow a redirect', async () => {
    const before = server.received.length;
    const error = await rejectionOf(callWorker({ url: server.url('/redirect') }, requestBody, LOCAL));
    expect(error.code).toBe('worker_failed');
    expect(error.message).toContain('302');
    expect(error.message).toContain('redirect');
    expect(server.received.slice(before).map((request) => request.path)).toEqual(['/redirect']);
  });

  it('says the worker broke off its answer, and logs nothing as a bug of ours', async () => {
    const logged = vi.spyOn(console, 'error').mockImplementation(() => {});
    try {
      const error = await rejectionOf(callWorker({ url: server.url('/cut') }, requestBody, LOCAL));
      expect(error.code).toBe('worker_failed');
      expect(error.message).toMatch(/^the worker closed the connection before its answer was complete/);
      expect(logged).not.toHaveBeenCalled();
    } finally {
      logged.mockRestore();
    }
  });

  it('refuses an answer larger than 6 MiB', async () => {
    const error = await rejectionOf(callWorker({ url: server.url('/huge') }, requestBody, LOCAL));
    expect(error.code).toBe('worker_failed');
    expect(error.message).toContain('larger than');
  });

  it('reports a worker that cannot be reached as worker_failed', async () => {
    const closed = await startServer({});
    const url = closed.url('/echo');
    await closed.close();
    const error = await rejectionOf(callWorker({ url }, requestBody, LOCAL));
    expect(error.code).toBe('worker_failed');
    expect(error.message).toContain('ECONNREFUSED');
  });

  it('refuses http:// to a non-loopback host, and any http:// in AWS mode, without sending anything', async () => {
    const before = server.received.length;
    for (const [url, options] of [
      ['http://10.0.0.1/decide', LOCAL],
      ['http://example.com/decide', LOCAL],
      [server.url('/echo'), AWS],
    ] as const) {
      const error = await rejectionOf(callWorker({ url }, requestBody, options));
      expect(error.code, url).toBe('worker_failed');
      expect(error.message, url).toContain('http://');
    }
    expect(server.received.length).toBe(before);
  });

  it('refuses, in AWS mode, a host name that resolves to a non-public address', async () => {
    const before = server.received.length;
    // localhost resolves to a loopback address: refused.
    const local = await rejectionOf(callWorker({ url: `https://localhost:${server.port}/echo` }, requestBody, AWS));
    expect(local.code).toBe('worker_failed');
    expect(server.received.length).toBe(before);

    // The check runs on what DNS answers, at connection time (no real DNS or traffic here).
    const resolved: string[] = [];
    for (const addresses of [['10.0.0.5'], ['::ffff:169.254.169.254'], ['8.8.8.8', '127.0.0.1'], ['fd00::1']]) {
      const error = await rejectionOf(
        callWorker({ url: 'https://worker.example.test/decide' }, requestBody, {
          ...AWS,
          resolveHost: async (hostname) => {
            resolved.push(hostname);
            return addresses;
          },
        }),
      );
      expect(error.code, addresses.join()).toBe('worker_failed');
      expect(error.message).toContain('non-public address');
    }
    expect(resolved.every((hostname) => hostname === 'worker.example.test')).toBe(true);
    expect(resolved.length).toBeGreaterThanOrEqual(4);
  });

  it('refuses, in AWS mode, an https URL at a private IP literal without resolving or connecting', async () => {
    const error = await rejectionOf(
      callWorker({ url: 'https://169.254.169.254/latest/meta-data/' }, requestBody, {
        ...AWS,
        resolveHost: async () => {
          throw new Error('must not resolve');
        },
      }),
    );
    expect(error.code).toBe('worker_failed');
    expect(error.message).toContain('link-local');
  });
});

/* ------------------------------------------------------------------ module workers */

describe('callWorker with module: workers', () => {
  let dir: string;
  let LOCAL: WorkerCallOptions;
  const file = (name: string, text: string) => {
    const full = path.join(dir, name);
    writeFileSync(full, text);
    return full;
  };

  beforeAll(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'agentstate-worker-'));
    // These tests' modules live in a directory of their own, named as the operator would.
    LOCAL = { allowLoopbackHttp: true, moduleDirs: moduleDirsFromEnv({ AGENTSTATE_MODULE_DIRS: dir }) };
  });

  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('imports the module once and calls decide with the parsed request', async () => {
    const worker = file(
      'ok.mjs',
      `globalThis.__okLoads = (globalThis.__okLoads ?? 0) + 1;
       export function decide(request) {
         return { state: { seen: request.session_id, turns: request.state.turns + 1 }, dropped: undefined };
       }`,
    );
    const relative = path.relative(process.cwd(), worker);
    expect(await callWorker({ url: `module:${relative}` }, requestBody, LOCAL)).toEqual({ state: { seen: 's1', turns: 3 } });
    expect(await callWorker({ url: `module:${worker}` }, requestBody, LOCAL)).toEqual({ state: { seen: 's1', turns: 3 } });
    expect((globalThis as { __okLoads?: number }).__okLoads).toBe(1);
  });

  it('accepts an async decide', async () => {
    const worker = file(
      'async.mjs',
      `export async function decide(request) { await null; return { messages: [{ role: 'assistant', content: request.head }] }; }`,
    );
    expect(await callWorker({ url: `module:${worker}` }, requestBody, LOCAL)).toEqual({
      messages: [{ role: 'assistant', content: 'u1' }],
    });
  });

  it('turns a throw into worker_failed', async () => {
    const sync = file('throws.mjs', `export function decide() { throw new Error('model unavailable'); }`);
    const error = await rejectionOf(callWorker({ url: `module:${sync}` }, requestBody, LOCAL));
    expect(error.code).toBe('worker_failed');
    expect(error.message).toContain('model unavailable');

    const rejects = file('rejects.mjs', `export async function decide() { throw new Error('async failure'); }`);
    const asyncError = await rejectionOf(callWorker({ url: `module:${rejects}` }, requestBody, LOCAL));
    expect(asyncError.code).toBe('worker_failed');
    expect(asyncError.message).toContain('async failure');
  });

  it('turns a slow decide into worker_timeout and ignores its late answer', async () => {
    const worker = file('slow.mjs', `export async function decide() { await new Promise((r) => setTimeout(r, 1500)); return {}; }`);
    const started = performance.now();
    const error = await rejectionOf(callWorker({ url: `module:${worker}`, timeoutMs: 200 }, requestBody, LOCAL));
    expect(error.code).toBe('worker_timeout');
    expect(performance.now() - started).toBeLessThan(1_000);
  });

  it('refuses answers that are not JSON objects, modules without decide, and missing modules', async () => {
    const array = file('array.mjs', `export const decide = () => [1, 2];`);
    expect((await rejectionOf(callWorker({ url: `module:${array}` }, requestBody, LOCAL))).message).toContain('not an object');

    const nothing = file('nothing.mjs', `export const decide = () => undefined;`);
    expect((await rejectionOf(callWorker({ url: `module:${nothing}` }, requestBody, LOCAL))).code).toBe('worker_failed');

    const noDecide = file('no-decide.mjs', `export const other = 1;`);
    const missingExport = await rejectionOf(callWorker({ url: `module:${noDecide}` }, requestBody, LOCAL));
    expect(missingExport.code).toBe('worker_failed');
    expect(missingExport.message).toContain('does not export a decide function');

    const missing = await rejectionOf(callWorker({ url: `module:${path.join(dir, 'absent.mjs')}` }, requestBody, LOCAL));
    expect(missing.code).toBe('worker_failed');
    expect(missing.message).toContain('cannot be called');
  });

  it('refuses module workers in AWS mode', async () => {
    const worker = file('aws.mjs', `export const decide = () => ({});`);
    const error = await rejectionOf(callWorker({ url: `module:${worker}` }, requestBody, AWS));
    expect(error.code).toBe('worker_failed');
    expect(error.message).toContain('module:');
  });
});

/* ------------------------------------------------------------------ lambda workers */

describe('callWorker with lambda: workers', () => {
  const ARN = 'arn:aws:lambda:us-east-1:123456789012:function:worker';

  it('explains that lambda: needs AWS or an emulator when run locally without one', async () => {
    const error = await rejectionOf(callWorker({ url: `lambda:${ARN}` }, requestBody, LOCAL));
    expect(error.code).toBe('worker_failed');
    expect(error.status).toBe(502);
    expect(error.message).toBe('lambda: workers need AWS; set AGENTSTATE_LAMBDA_ENDPOINT to call a local Lambda emulator');
  });

  describe('against a loopback Lambda emulator', () => {
    let emulator: Awaited<ReturnType<typeof startServer>>;
    const invocations = (name: string) =>
      `/2015-03-31/functions/${encodeURIComponent(`arn:aws:lambda:us-east-1:123456789012:function:${name}`)}/invocations`;

    beforeAll(async () => {
      emulator = await startServer({
        [invocations('ok')]: (_request, response, body) =>
          json(response, 200, { state: { got: (JSON.parse(body) as { decision_id: string }).decision_id } }),
        [invocations('crash')]: (_request, response) =>
          json(
            response,
            200,
            { errorType: 'TypeError', errorMessage: 'x is undefined', trace: ['secret stack'] },
            { 'x-amz-function-error': 'Unhandled' },
          ),
        [invocations('array')]: (_request, response) => json(response, 200, ['nope']),
        [invocations('slow')]: async (_request, response) => {
          await sleep(1_500);
          if (!response.destroyed) json(response, 200, {});
        },
      });
    });

    afterAll(async () => {
      await emulator.close();
    });

    const options = () => ({ ...LOCAL, lambdaEndpoint: `http://127.0.0.1:${emulator.port}` });
    const arn = (name: string) => `lambda:arn:aws:lambda:us-east-1:123456789012:function:${name}`;

    it('invokes the function with the body as payload and returns its answer', async () => {
      expect(await callWorker({ url: arn('ok') }, requestBody, options())).toEqual({ state: { got: 'd1' } });
      const seen = last(emulator.received);
      expect(seen.body).toBe(requestBody);
      expect(seen.headers['x-amz-invocation-type']).toBe('RequestResponse');
    });

    it('turns a function error into worker_failed', async () => {
      const error = await rejectionOf(callWorker({ url: arn('crash') }, requestBody, options()));
      expect(error.code).toBe('worker_failed');
      expect(error.message).toContain('Unhandled');
      expect(error.message).toContain('x is undefined');
      expect(error.message).not.toContain('secret stack');
    });

    it('turns a payload that is not a JSON object into worker_failed', async () => {
      const error = await rejectionOf(callWorker({ url: arn('array') }, requestBody, options()));
      expect(error.code).toBe('worker_failed');
      expect(error.message).toContain('not an object');
    });

    it('times out a slow function with worker_timeout', async () => {
      const started = performance.now();
      const error = await rejectionOf(callWorker({ url: arn('slow'), timeoutMs: 200 }, requestBody, options()));
      expect(error.code).toBe('worker_timeout');
      expect(performance.now() - started).toBeLessThan(1_000);
    });
  });
});

/* ------------------------------------------------------------------ the examples */

describe('the example workers', () => {
  type Answer = { state?: { turns?: number }; agent?: unknown; messages?: unknown[] };
  const request = (trigger: string, state: unknown) => JSON.stringify({ ...JSON.parse(requestBody), trigger: { type: trigger }, state });

  it('examples/worker.ts works as a module: worker', async () => {
    const url = 'module:examples/worker.ts';
    expect(() => validateWorkerUrl(url, { allowLoopbackHttp: true })).not.toThrow();
    expect(await callWorker({ url }, request('session.start', {}), LOCAL)).toEqual({
      agent: { model: 'small-fast' },
      state: { turns: 0 },
    });
    expect(await callWorker({ url }, request('client.messages', { turns: 2, topic: 'trip' }), LOCAL)).toEqual({
      state: { turns: 3, topic: 'trip' },
      messages: [{ role: 'assistant', content: 'turn 3' }],
    });
    expect(await callWorker({ url }, request('client.messages', null), LOCAL)).toEqual({
      state: { turns: 1 },
      messages: [{ role: 'assistant', content: 'turn 1' }],
    });
    expect(await callWorker({ url }, request('timer.fired', { turns: 2 }), LOCAL)).toEqual({});
  });

  it('examples/http-worker.ts checks the signature and answers with decide', async () => {
    const { createServer: create } = await import('node:http');
    const server = create((req, res) => void workerHandler(SECRET)(req, res));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    const url = `http://127.0.0.1:${port}/decide`;
    try {
      const answer = (await callWorker({ url, secret: SECRET }, request('client.messages', { turns: 4 }), LOCAL)) as Answer;
      expect(answer.state?.turns).toBe(5);

      const wrongSecret = await rejectionOf(callWorker({ url, secret: 'wrong' }, requestBody, LOCAL));
      expect(wrongSecret.code).toBe('worker_failed');
      expect(wrongSecret.message).toContain('HTTP 401');

      const unsigned = await rejectionOf(callWorker({ url }, requestBody, LOCAL));
      expect(unsigned.message).toContain('HTTP 401');
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
