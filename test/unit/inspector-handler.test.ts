import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Context } from 'aws-lambda';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { handler } from '../../functions/http/handlers/inspector.js';
import { matchRoute, toApiGatewayEvent } from '../../functions/local/http-adapter.js';

/** The inspector's handler as API Gateway (or the local server) calls it, over a folder of our own. */
describe('inspector handler', () => {
  const folder = mkdtempSync(join(tmpdir(), 'agentstate-inspector-'));
  const saved = { dir: process.env.AGENTSTATE_INSPECTOR_DIR, ws: process.env.AGENTSTATE_WEBSOCKET_URL };

  beforeAll(() => {
    writeFileSync(join(folder, 'index.html'), '<!doctype html><script type="module" src="/inspector/index-abc.js"></script>');
    writeFileSync(join(folder, 'index-abc.js'), 'console.log(1)');
    process.env.AGENTSTATE_INSPECTOR_DIR = folder;
  });
  afterEach(() => {
    if (saved.ws === undefined) delete process.env.AGENTSTATE_WEBSOCKET_URL;
    else process.env.AGENTSTATE_WEBSOCKET_URL = saved.ws;
  });
  afterAll(() => {
    rmSync(folder, { recursive: true, force: true });
    if (saved.dir === undefined) delete process.env.AGENTSTATE_INSPECTOR_DIR;
    else process.env.AGENTSTATE_INSPECTOR_DIR = saved.dir;
  });

  const get = async (path: string, headers: string[] = ['Host', 'localhost:4000']) => {
    const match = matchRoute('GET', path.split('?')[0] as string);
    if (!match) throw new Error(`no route for ${path}`);
    const event = toApiGatewayEvent(
      { method: 'GET', url: path, rawHeaders: headers, httpVersion: '1.1', sourceIp: '127.0.0.1', body: Buffer.alloc(0) },
      match,
    );
    return handler(event, {} as Context);
  };

  it('serves the page at / with no key, fresh, under a strict content security policy', async () => {
    const page = await get('/');
    expect(page).toMatchObject({ statusCode: 200, headers: { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-cache' } });
    expect(page.headers?.['content-security-policy']).toContain("script-src 'self'");
    expect(page.body).toContain('/inspector/index-abc.js');
  });

  it('serves hashed files for a year, and nothing outside the folder', async () => {
    expect(await get('/inspector/index-abc.js')).toMatchObject({
      statusCode: 200,
      headers: { 'cache-control': 'public, max-age=31536000, immutable' },
    });
    for (const path of ['/inspector/..%2Fpackage.json', '/inspector/.env', '/inspector/missing.js', '/inspector/index.ts']) {
      expect((await get(path)).statusCode, path).toBe(404);
    }
  });

  it('tells the page where live sync is from the configuration only, never from the Host header', async () => {
    // Prepare: no configuration, then the stack's WebSocket API.
    delete process.env.AGENTSTATE_WEBSOCKET_URL;
    const unconfigured = JSON.parse((await get('/inspector/config.json', ['Host', 'evil.example:1234'])).body as string);
    process.env.AGENTSTATE_WEBSOCKET_URL = 'wss://abc.execute-api.eu-west-1.amazonaws.com/v1';
    const spoofed = await get('/inspector/config.json', [
      'Host',
      'evil.example:1234',
      'X-Forwarded-Proto',
      'https',
      'X-Forwarded-Host',
      'evil.example',
    ]);
    // Assess
    expect(unconfigured).toEqual({ webSocketUrl: null });
    expect(JSON.parse(spoofed.body as string)).toEqual({ webSocketUrl: 'wss://abc.execute-api.eu-west-1.amazonaws.com/v1' });
  });

  it('says how to build the page when it is not built', async () => {
    rmSync(join(folder, 'index.html'));
    const page = await get('/');
    expect(page.statusCode).toBe(503);
    expect(page.body).toContain('npm run build:inspector');
  });
});
