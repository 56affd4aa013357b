import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { corsPolicy } from '../../functions/http/edge/cors.js';
import { type StartedServerProcess, spawnServerProcess, startServerProcess } from '../helpers/server.js';

/**
 * A browser page on another origin, and what `npm start` prints per request: CORS is off
 * unless AGENTSTATE_CORS_ORIGINS names origins (API.md section 1); then preflights from those
 * origins are answered and their pages may read the answers, and every other origin gets no
 * CORS header at all. Each request and each WebSocket event prints one access line; an
 * expected error (502, 504) is that line and one line of why, not a stack trace.
 */

let withCors: StartedServerProcess;
/** A worker that takes every request and never answers. */
let hanging: Server;
let hangingWorker: string;
let withoutCors: StartedServerProcess;
const APP = 'https://app.example.com';
const key = { authorization: 'Bearer dev-key' };

beforeAll(async () => {
  hanging = createServer(() => {});
  await new Promise<void>((resolve) => hanging.listen(0, '127.0.0.1', resolve));
  hangingWorker = `http://127.0.0.1:${(hanging.address() as AddressInfo).port}/decide`;
  [withCors, withoutCors] = await Promise.all([
    startServerProcess({ env: { AGENTSTATE_CORS_ORIGINS: `${APP}, http://localhost:5173` } }),
    startServerProcess({ env: { AGENTSTATE_CORS_ORIGINS: undefined } }),
  ]);
}, 90_000);

afterAll(async () => {
  hanging?.closeAllConnections();
  hanging?.close();
  await Promise.all([withCors?.stop(), withoutCors?.stop()]);
});

function preflight(url: string, origin: string) {
  return fetch(`${url}/v1/sessions/page/state`, {
    method: 'OPTIONS',
    headers: {
      origin,
      'access-control-request-method': 'PATCH',
      'access-control-request-headers': 'authorization, content-type, if-match',
    },
  });
}

describe('CORS', () => {
  it('answers a preflight from an allowed origin with the policy, before any key is asked for', async () => {
    // Act
    const response = await preflight(withCors.url, APP);

    // Assess
    expect(response.status).toBe(204);
    expect(response.headers.get('access-control-allow-origin')).toBe(APP);
    expect(response.headers.get('access-control-allow-methods')?.split(', ')).toEqual(expect.arrayContaining(['PATCH', 'DELETE']));
    expect(response.headers.get('access-control-allow-headers')?.split(', ')).toEqual([...corsPolicy.allowHeaders]);
    // Every precondition header a route reads, `If-None-Match` of a create-only memory put too.
    expect(corsPolicy.allowHeaders).toEqual(expect.arrayContaining(['if-match', 'if-none-match']));
    expect(response.headers.get('access-control-max-age')).toBe('600');
    expect(response.headers.get('access-control-allow-credentials')).toBeNull();
  });

  it('lets a page of an allowed origin read an answer and its ETag', async () => {
    // Act
    const response = await fetch(`${withCors.url}/v1/sessions/page/state`, { headers: { ...key, origin: APP } });

    // Assess
    expect(response.status).toBe(200);
    expect(response.headers.get('access-control-allow-origin')).toBe(APP);
    expect(response.headers.get('access-control-expose-headers')).toContain('etag');
    expect(response.headers.get('vary')).toContain('Origin');
  });

  it('gives a disallowed origin no CORS header, on a preflight or an answer', async () => {
    // Act
    const refused = await preflight(withCors.url, 'https://evil.example');
    const answer = await fetch(`${withCors.url}/v1/sessions/page/state`, { headers: { ...key, origin: 'https://evil.example' } });

    // Assess
    expect(refused.status).toBe(204);
    expect(refused.headers.get('access-control-allow-origin')).toBeNull();
    expect(refused.headers.get('access-control-allow-methods')).toBeNull();
    expect(answer.headers.get('access-control-allow-origin')).toBeNull();
  });

  it('is off by default: a preflight finds no route and answers carry no CORS header', async () => {
    const response = await preflight(withoutCors.url, APP);
    const answer = await fetch(`${withoutCors.url}/v1/sessions/page/state`, { headers: { ...key, origin: APP } });
    expect(response.status).toBe(404);
    expect(response.headers.get('access-control-allow-origin')).toBeNull();
    expect(answer.headers.get('access-control-allow-origin')).toBeNull();
  });

  it('refuses to start with a CORS origin that is not an origin', async () => {
    const server = await spawnServerProcess({ env: { AGENTSTATE_CORS_ORIGINS: 'https://app.example.com/path' } });
    expect(await server.exited).not.toBe(0);
    expect(server.output()).toContain('is not an origin');
  });
});

describe('the access log', () => {
  it('prints one line per request: method, path and query, status, time', async () => {
    // Act
    await fetch(`${withoutCors.url}/v1/sessions/logged/state?node=root`, { headers: key });
    await fetch(`${withoutCors.url}/health`);
    await new Promise((resolve) => setTimeout(resolve, 100));

    // Assess
    const lines = withoutCors.output().split('\n');
    expect(lines.filter((line) => /^GET \/v1\/sessions\/logged\/state\?node=root 200 [\d.]+ ms$/.test(line))).toHaveLength(1);
    expect(lines.filter((line) => /^GET \/health 200 [\d.]+ ms$/.test(line))).toHaveLength(1);
  });

  it.each([
    { status: 502, code: 'worker_failed', worker: (_hanging: string) => ({ url: 'http://127.0.0.1:9/decide' }) },
    { status: 504, code: 'worker_timeout', worker: (hanging: string) => ({ url: hanging, timeoutMs: 200 }) },
  ])('prints an expected $status as its access line and one line of why, never a stack trace', async ({ status, code, worker }) => {
    // Prepare: a session whose agent's worker refuses connections, or never answers.
    const agent = `failing-${status}-${Date.now()}`;
    const headers = { ...key, 'content-type': 'application/json' };
    const registered = await fetch(`${withoutCors.url}/v1/agents/${agent}`, {
      method: 'PUT',
      headers,
      body: JSON.stringify({ worker: worker(hangingWorker) }),
    });
    expect(registered.ok, await registered.text()).toBe(true);
    await (
      await fetch(`${withoutCors.url}/v1/sessions`, { method: 'POST', headers, body: JSON.stringify({ sessionId: agent, agentId: agent }) })
    ).text();
    // The server prints a request's line once its answer is sent: let the last one arrive.
    await new Promise((resolve) => setTimeout(resolve, 100));
    const before = withoutCors.output().length;

    // Act
    const response = await fetch(`${withoutCors.url}/v1/sessions/${agent}/decide`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ trigger: { type: 'tick' } }),
    });
    await new Promise((resolve) => setTimeout(resolve, 100));

    // Assess
    const printed = withoutCors.output().slice(before).trim().split('\n');
    expect(response.status).toBe(status);
    expect(printed).toHaveLength(2);
    expect(printed.filter((line) => new RegExp(`^POST /v1/sessions/[\\w-]+/decide ${status} [\\d.]+ ms$`).test(line))).toHaveLength(1);
    expect(printed.filter((line) => line.startsWith(`agentstate: ${status} ${code}: `))).toHaveLength(1);
    expect(printed.join('\n')).not.toMatch(/\n\s+at /);
  });

  it('prints one line per WebSocket event: connect, each message, disconnect', async () => {
    // Act: connect with the key in the URL, subscribe, leave.
    const before = withoutCors.output().length;
    const socket = new WebSocket(`${withoutCors.url.replace(/^http/, 'ws')}/v1/ws?token=dev-key`);
    await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject));
    const acknowledged = new Promise((resolve) => socket.once('message', resolve));
    socket.send(JSON.stringify({ action: 'subscribe', sessionId: 'followed' }));
    await acknowledged;
    socket.close();
    await new Promise((resolve) => socket.once('close', resolve));
    await new Promise((resolve) => setTimeout(resolve, 200));

    // Assess: the three events, on one connection, and never the key.
    const printed = withoutCors.output().slice(before).trim().split('\n');
    const lines = printed.map((line) => /^WS (\S+) (\S+) (\d{3}) [\d.]+ ms$/.exec(line)).filter((match) => match !== null);
    expect(lines.map(([, route, , status]) => `${route} ${status}`)).toEqual(['$connect 200', 'subscribe 200', '$disconnect 200']);
    expect(new Set(lines.map(([, , connection]) => connection)).size).toBe(1);
    expect(printed.join('\n')).not.toContain('dev-key');
  });
});
