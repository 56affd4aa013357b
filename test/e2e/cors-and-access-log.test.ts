import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { corsPolicy } from '../../functions/http/cors.js';
import { type StartedServerProcess, spawnServerProcess, startServerProcess } from '../helpers/server.js';

/**
 * A browser page on another origin, and what `npm start` prints per request: CORS is off
 * unless AGENTSTATE_CORS_ORIGINS names origins (API.md section 1); then preflights from those
 * origins are answered and their pages may read the answers, and every other origin gets no
 * CORS header at all. Each request prints one access line; an expected error is that line,
 * not a stack trace.
 */

let withCors: StartedServerProcess;
let withoutCors: StartedServerProcess;
const APP = 'https://app.example.com';
const key = { authorization: 'Bearer dev-key' };

beforeAll(async () => {
  [withCors, withoutCors] = await Promise.all([
    startServerProcess({ env: { AGENTSTATE_CORS_ORIGINS: `${APP}, http://localhost:5173` } }),
    startServerProcess({ env: { AGENTSTATE_CORS_ORIGINS: undefined } }),
  ]);
}, 90_000);

afterAll(async () => {
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

  it('prints an expected error as its access line and one line of why, never a stack trace', async () => {
    // Prepare: a session whose agent's worker refuses connections.
    const agent = `failing-${Date.now()}`;
    const headers = { ...key, 'content-type': 'application/json' };
    await fetch(`${withoutCors.url}/v1/agents/${agent}`, {
      method: 'PUT',
      headers,
      body: JSON.stringify({ worker: { url: 'http://127.0.0.1:9/decide' } }),
    });
    await fetch(`${withoutCors.url}/v1/sessions`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ sessionId: agent, agentId: agent }),
    });
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
    expect(response.status).toBe(502);
    expect(printed.filter((line) => /^POST \/v1\/sessions\/[\w-]+\/decide 502 [\d.]+ ms$/.test(line))).toHaveLength(1);
    expect(printed).toHaveLength(2);
    expect(printed.filter((line) => /^agentstate: 502 worker_failed: could not reach the worker/.test(line))).toHaveLength(1);
    expect(printed.join('\n')).not.toMatch(/\n\s+at /);
  });
});
