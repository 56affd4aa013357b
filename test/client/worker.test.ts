import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createWorker, type DecisionRequest, toLambdaHandler, toNodeHandler, verifyWebhook } from '@agentstate/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signBody, standardWebhookHeaders } from '../../functions/workers/outbound.js';

/**
 * The worker helper: signature checks over the raw body, parsing, and the Node and Lambda
 * adapters. (test/client/client.test.ts has agentstate itself calling such a worker.)
 */

const SECRET = 'worker-secret';

const decisionRequest: DecisionRequest = {
  session_id: 's1',
  decision_id: 'd1',
  agent_id: 'counter',
  routed_from: null,
  routing: [],
  turn_id: null,
  trigger: { type: 'client.messages', messages: [{ role: 'user', content: 'hi' }] },
  proposed: {},
  state: { turns: 1 },
  agent: null,
  messages: [{ id: 'u1', role: 'user', content: 'hi', parentId: 'root' }],
  ancestry: ['root', 'u1'],
  attempts: 1,
  version: 1,
  head: 'u1',
  profile: null,
  shared: null,
};

/** The headers agentstate signs a call with (Standard Webhooks), by agentstate's own signer, at `at`. */
const sign = (body: string, secret = SECRET, at = new Date()) => standardWebhookHeaders(secret, 'd1:1', body, at);
const minutes = (count: number) => new Date(Date.now() + count * 60_000);

const errors: unknown[] = [];
const worker = createWorker<{ turns: number }>(
  (request) => {
    if (request.trigger.type === 'explode') throw new Error('secret internals');
    return { state: { turns: request.state.turns + 1 } };
  },
  { secret: SECRET, onError: (error) => errors.push(error) },
);

let server: Server;
let url: string;

beforeAll(async () => {
  server = createServer(toNodeHandler(worker));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/decide`;
});
afterAll(() => new Promise((resolve) => server.close(resolve)));

/** POSTs exactly `body` with the given signature headers. */
async function post(body: string, signature: Record<string, string> | undefined, method = 'POST') {
  const response = await fetch(url, {
    method,
    headers: { 'content-type': 'application/json', ...signature },
    ...(method === 'POST' ? { body } : {}),
  });
  return { status: response.status, body: await response.json() };
}

describe('toNodeHandler(createWorker(decide, {secret}))', () => {
  it('accepts a good signature and answers the DecisionResponse', async () => {
    const body = JSON.stringify(decisionRequest);
    expect(await post(body, sign(body))).toEqual({ status: 200, body: { state: { turns: 2 } } });
  });

  it('checks the signature over the raw bytes: the same JSON spaced differently fails', async () => {
    const signed = JSON.stringify(decisionRequest);
    const respaced = JSON.stringify(decisionRequest, null, 2);
    expect(await post(respaced, sign(signed))).toEqual({ status: 401, body: { error: 'bad signature' } });
  });

  const body = JSON.stringify(decisionRequest);
  const good = () => sign(body);
  it.each([
    ['no signature', undefined],
    ['another secret', sign(body, 'other')],
    ['a truncated signature', { ...good(), 'webhook-signature': String(good()['webhook-signature']).slice(0, -4) }],
    ['another scheme', { ...good(), 'webhook-signature': String(good()['webhook-signature']).replace('v1,', 'v2,') }],
    ['not base64', { ...good(), 'webhook-signature': `v1,${'!'.repeat(44)}` }],
    ['another id than the one signed', { ...good(), 'webhook-id': 'd2:1' }],
    ['only the 0.x body signature, which signs no time', { 'x-agentstate-signature': signBody(SECRET, body) }],
  ])('refuses %s with 401', async (_name, signature) => {
    expect((await post(body, signature)).status).toBe(401);
  });

  it.each([
    ['a captured request replayed 6 minutes later', minutes(-6)],
    ['a timestamp 6 minutes ahead', minutes(6)],
  ])('refuses %s with 401: a signature verifies for 5 minutes only', async (_name, at) => {
    expect(await post(body, sign(body, SECRET, at))).toEqual({ status: 401, body: { error: 'stale or missing webhook-timestamp' } });
  });

  it('accepts a timestamp within 5 minutes either way, and one of several signatures', async () => {
    expect((await post(body, sign(body, SECRET, minutes(-4)))).status).toBe(200);
    expect((await post(body, sign(body, SECRET, minutes(4)))).status).toBe(200);
    const headers = sign(body);
    const several = { ...headers, 'webhook-signature': `v1,${'A'.repeat(43)}= ${headers['webhook-signature']}` };
    expect((await post(body, several)).status).toBe(200);
  });

  it('refuses a signed body that is not a DecisionRequest (400) or not JSON (400)', async () => {
    const notRequest = JSON.stringify({ hello: 'world' });
    expect(await post(notRequest, sign(notRequest))).toEqual({ status: 400, body: { error: 'session_id must be a string' } });
    expect((await post('{oops', sign('{oops'))).status).toBe(400);
  });

  it('answers 500 without details when decide throws, and reports the error', async () => {
    const body = JSON.stringify({ ...decisionRequest, trigger: { type: 'explode' } });
    expect(await post(body, sign(body))).toEqual({ status: 500, body: { error: 'decide failed' } });
    expect(String(errors.at(-1))).toContain('secret internals');
  });

  it('answers 405 to anything but POST', async () => {
    expect((await post('', undefined, 'GET')).status).toBe(405);
  });
});

describe('createWorker options', () => {
  it('needs a secret unless unsigned requests are allowed on purpose', async () => {
    expect(() => createWorker(() => ({}), { secret: undefined })).toThrow(/needs the agent secret/);
    expect(() => createWorker(() => ({}), { secret: '' })).toThrow(/needs the agent secret/);
    const open = createWorker(() => ({ state: 1 }), { secret: undefined, allowUnsigned: true });
    expect((await open.handle({ body: JSON.stringify(decisionRequest), headers: {} })).status).toBe(200);
  });

  it('accepts any of several secrets while one is rotated', async () => {
    const rotating = createWorker(() => ({}), { secret: ['new-secret', 'old-secret'] });
    const body = JSON.stringify(decisionRequest);
    expect((await rotating.handle({ body, headers: sign(body, 'old-secret') })).status).toBe(200);
    expect((await rotating.handle({ body, headers: sign(body, 'new-secret') })).status).toBe(200);
    expect((await rotating.handle({ body, headers: sign(body, 'older') })).status).toBe(401);
  });

  it('answers 500 when decide returns something that is not a DecisionResponse', async () => {
    const reported: unknown[] = [];
    const sloppy = createWorker(() => 'yes' as never, { secret: SECRET, onError: (error) => reported.push(error) });
    const body = JSON.stringify(decisionRequest);
    expect((await sloppy.handle({ body, headers: sign(body) })).status).toBe(500);
    expect(String(reported[0])).toContain('must return a DecisionResponse object');
  });

  it('refuses bodies over maxBodyBytes', async () => {
    const small = createWorker(() => ({}), { secret: SECRET, maxBodyBytes: 10 });
    const body = JSON.stringify(decisionRequest);
    expect((await small.handle({ body, headers: sign(body) })).status).toBe(413);
  });
});

describe('toLambdaHandler', () => {
  const handler = toLambdaHandler(worker);
  const body = JSON.stringify(decisionRequest);

  it('serves a function URL / HTTP API (v2) event, base64 body included', async () => {
    const result = await handler({
      version: '2.0',
      requestContext: { http: { method: 'POST' } },
      headers: sign(body),
      body: Buffer.from(body).toString('base64'),
      isBase64Encoded: true,
    });
    expect(result).toEqual({
      statusCode: 200,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ state: { turns: 2 } }),
    });
  });

  it('serves a REST API (v1) event and refuses a bad signature', async () => {
    const ok = await handler({ httpMethod: 'POST', headers: sign(body), body, isBase64Encoded: false });
    const bad = await handler({
      httpMethod: 'POST',
      headers: sign(body, 'nope'),
      body,
      isBase64Encoded: false,
    });
    expect(ok).toMatchObject({ statusCode: 200 });
    expect(bad).toMatchObject({ statusCode: 401 });
  });

  it('answers a direct invocation (lambda:<arn> workers) with the DecisionResponse itself', async () => {
    expect(await handler(decisionRequest)).toEqual({ state: { turns: 2 } });
    await expect(handler({ nope: true, headers: undefined })).resolves.toMatchObject({ statusCode: 401 });
    await expect(handler('not an event')).rejects.toThrow(/not a DecisionRequest/);
  });
});

describe('verifyWebhook', () => {
  // The example of the Standard Webhooks specification: a whsec_ secret, its message, its signature.
  const spec = {
    secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
    body: '{"test": 2432232314}',
    headers: {
      'webhook-id': 'msg_p5jXN8AQM9LWM0D4loKWxJek',
      'webhook-timestamp': '1614265330',
      'webhook-signature': 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
    },
  };
  const at = (seconds: number) => ({ now: () => seconds * 1000 });

  it("verifies the specification's own example at its time, and refuses it 5 minutes and a second later", async () => {
    expect(await verifyWebhook(spec.secret, spec, at(1614265330))).toEqual({
      ok: true,
      id: 'msg_p5jXN8AQM9LWM0D4loKWxJek',
      timestamp: 1614265330,
    });
    expect(await verifyWebhook(spec.secret, spec, at(1614265330 + 301))).toEqual({ ok: false, reason: 'stale-timestamp' });
    expect(await verifyWebhook('whsec_b3RoZXI=', spec, at(1614265330))).toEqual({ ok: false, reason: 'bad-signature' });
  });

  it("signs as the specification does: agentstate's signer reproduces its example", () => {
    expect(standardWebhookHeaders(spec.secret, spec.headers['webhook-id'], spec.body, new Date(1614265330 * 1000))).toEqual(spec.headers);
  });
});

describe('the worker codec', () => {
  const tagged = { ...decisionRequest, state: { at: { $as: 'Date', $v: '2026-01-01T00:00:00.000Z' }, $$note: 'kept' } };

  it('decodes the values a worker is handed and encodes those it answers', async () => {
    // Prepare
    const seen: unknown[] = [];
    const coded = createWorker<unknown>(
      (request) => {
        seen.push(request.state);
        return { state: { at: new Date('2026-02-01T00:00:00.000Z'), ids: new Set([1n]) }, agent: { model: 'small' } };
      },
      { secret: SECRET },
    );

    // Act
    const answer = await coded.invoke(tagged);

    // Assess
    expect(seen).toEqual([{ at: new Date('2026-01-01T00:00:00.000Z'), $note: 'kept' }]);
    expect(answer).toEqual({
      state: { at: { $as: 'Date', $v: '2026-02-01T00:00:00.000Z' }, ids: { $as: 'Set', $v: [{ $as: 'BigInt', $v: '1' }] } },
      agent: { model: 'small' },
    });
  });

  it('hands over the JSON as sent with codec: false', async () => {
    const seen: unknown[] = [];
    const raw = createWorker((request) => void seen.push(request.state), { secret: SECRET, codec: false });

    await raw.invoke(tagged);

    expect(seen).toEqual([tagged.state]);
  });
});
