import { createHmac, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createWorker, verifyWebhook } from '@agentstate/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifySignature as exampleVerifies } from '../../examples/http-worker.js';
import { type ApiClient, uniqueId } from '../helpers/api-client.js';
import { type RunningApi, startApi } from '../helpers/e2e.js';
import { waitFor } from '../helpers/events.js';

/**
 * Signed calls out of `npm start` (API.md section 9): a webhook delivery and a call to an
 * http worker carry Standard Webhooks headers, so what someone captures on the way can be
 * replayed only within 5 minutes. `createWorker`, `verifyWebhook` and the example worker
 * accept the real request, and refuse the very same bytes presented 6 minutes later.
 */

interface Captured {
  headers: IncomingHttpHeaders;
  body: string;
}

const WORKER_SECRET = 'worker-secret';
const HOOK_SECRET = 'whsec_c2lnbmVkLWV2ZW50cy1vbmx5';
const sixMinutesLater = () => Date.now() + 6 * 60_000;

/**
 * docs/api.md's "Or by hand (Node.js)" recipe, run as a receiver would paste it: true when it
 * accepts the request, false when it refuses (it throws on a stale timestamp).
 */
function docsRecipeVerifies(secret: string, delivery: Captured): boolean {
  const docs = readFileSync(new URL('../../docs/api.md', import.meta.url), 'utf8');
  const recipe = /Or by hand \(Node\.js\):\s*```js\n([\s\S]*?)```/.exec(docs)?.[1];
  if (!recipe) throw new Error('docs/api.md has no "Or by hand (Node.js)" recipe');
  const body = recipe.replace(/^import .*$/gm, '');
  const run = new Function('createHmac', 'timingSafeEqual', 'Buffer', 'secret', 'request', 'rawBody', `${body}\nreturn valid;`);
  try {
    return run(createHmac, timingSafeEqual, Buffer, secret, { headers: delivery.headers }, Buffer.from(delivery.body)) as boolean;
  } catch {
    return false;
  }
}

let api: RunningApi;
let http: ApiClient;
let worker: Server;
let hooks: Server;
const workerCalls: Captured[] = [];
const deliveries: Captured[] = [];

async function readBody(request: IncomingMessage): Promise<string> {
  let text = '';
  for await (const chunk of request) text += chunk;
  return text;
}

async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

beforeAll(async () => {
  // A worker made with createWorker, behind a recorder of exactly what agentstate sent.
  const signedWorker = createWorker(() => ({ state: { decided: true } }), { secret: WORKER_SECRET });
  worker = createServer(async (request: IncomingMessage, response: ServerResponse) => {
    const body = await readBody(request);
    workerCalls.push({ headers: request.headers, body });
    const reply = await signedWorker.handle({ method: request.method ?? 'POST', body, headers: request.headers });
    response.writeHead(reply.status, reply.headers).end(reply.body);
  });
  hooks = createServer(async (request, response) => {
    deliveries.push({ headers: request.headers, body: await readBody(request) });
    response.writeHead(204).end();
  });
  const workerUrl = await listen(worker);
  const hookUrl = await listen(hooks);
  api = await startApi();
  http = api.client;
  await http.put('/v1/agents/signed', { worker: { url: `${workerUrl}/decide`, secret: WORKER_SECRET } });
  await http.post('/v1/webhooks', { url: `${hookUrl}/hook`, secret: HOOK_SECRET });
});

afterAll(async () => {
  await api?.stop();
  await new Promise((resolve) => worker?.close(resolve));
  await new Promise((resolve) => hooks?.close(resolve));
});

describe('a call to an http worker', () => {
  it('is accepted by createWorker when it arrives, and a replay of it 6 minutes later is refused', async () => {
    // Act
    const decided = await http.post(`/v1/sessions/${uniqueId('signed')}/decide`, { trigger: { type: 'x' }, agentId: 'signed' });
    const captured = workerCalls.at(-1) as Captured;
    const later = createWorker(() => ({ state: { replayed: true } }), { secret: WORKER_SECRET, signature: { now: sixMinutesLater } });
    const replayed = await later.handle({ method: 'POST', body: captured.body, headers: captured.headers });
    // Assess
    expect(decided.status).toBe(200);
    expect(decided.body.state).toEqual({ decided: true });
    expect(captured.headers['webhook-id']).toMatch(/:1$/);
    expect(replayed.status).toBe(401);
    expect(exampleVerifies(WORKER_SECRET, Buffer.from(captured.body), captured.headers)).toBe(true);
    expect(exampleVerifies(WORKER_SECRET, Buffer.from(captured.body), captured.headers, sixMinutesLater())).toBe(false);
  });
});

describe('a webhook delivery', () => {
  it('verifies with verifyWebhook when it arrives, and not 6 minutes later', async () => {
    // Act
    const sid = uniqueId('signed');
    await http.patch(`/v1/sessions/${sid}/state`, { n: 1 });
    const delivery = await waitFor('the delivery', () => deliveries.find((candidate) => candidate.body.includes(`"${sid}:1"`)));
    // Assess
    expect(delivery.headers['webhook-id']).toBe(`${sid}:1`);
    expect(await verifyWebhook(HOOK_SECRET, delivery)).toMatchObject({ ok: true, id: `${sid}:1` });
    expect(await verifyWebhook(HOOK_SECRET, delivery, { now: sixMinutesLater })).toEqual({ ok: false, reason: 'stale-timestamp' });
    expect(await verifyWebhook('whsec_b3RoZXI=', delivery)).toEqual({ ok: false, reason: 'bad-signature' });
  });

  it('verifies with the by-hand recipe of docs/api.md and the example worker, with a whsec_ secret and a plain one', async () => {
    // Prepare: a second endpoint with a plain secret beside the whsec_ one.
    const plainSecret = 'plain-secret';
    const plainHooks: Captured[] = [];
    const plain = createServer(async (request, response) => {
      plainHooks.push({ headers: request.headers, body: await readBody(request) });
      response.writeHead(204).end();
    });
    const plainUrl = await listen(plain);
    const registered = await http.post('/v1/webhooks', { url: `${plainUrl}/hook`, secret: plainSecret });
    try {
      // Act
      const sid = uniqueId('by-hand');
      await http.patch(`/v1/sessions/${sid}/state`, { n: 1 });
      const standard = await waitFor('the whsec_ delivery', () => deliveries.find((candidate) => candidate.body.includes(`"${sid}:1"`)));
      const plainDelivery = await waitFor('the plain delivery', () =>
        plainHooks.find((candidate) => candidate.body.includes(`"${sid}:1"`)),
      );

      // Assess: both verify as they arrive (before, the whsec_ one was refused: the recipe and
      // the example used the secret's text as the key, not the bytes it encodes)
      expect(docsRecipeVerifies(HOOK_SECRET, standard)).toBe(true);
      expect(docsRecipeVerifies(plainSecret, plainDelivery)).toBe(true);
      expect(exampleVerifies(HOOK_SECRET, Buffer.from(standard.body), standard.headers)).toBe(true);
      expect(exampleVerifies(plainSecret, Buffer.from(plainDelivery.body), plainDelivery.headers)).toBe(true);
      // … and neither accepts another secret or a changed body.
      expect(docsRecipeVerifies('whsec_b3RoZXI=', standard)).toBe(false);
      expect(docsRecipeVerifies(HOOK_SECRET, { ...standard, body: standard.body.replace('"n":1', '"n":2') })).toBe(false);
      expect(exampleVerifies('whsec_b3RoZXI=', Buffer.from(standard.body), standard.headers)).toBe(false);
    } finally {
      await http.delete(`/v1/webhooks/${registered.body.id}`);
      await new Promise((resolve) => plain.close(resolve));
    }
  });
});
