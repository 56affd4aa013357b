import { createHmac } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { type AddressInfo, createServer as createNetServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentStateError } from '../../functions/core/kernel/errors.js';
import { postWebhook, validateWebhookUrl } from '../../functions/workers/webhook-sender.js';
import { expectedSignature } from '../helpers/events.js';

describe('validateWebhookUrl', () => {
  const local = { allowLoopbackHttp: true };
  const aws = { allowLoopbackHttp: false };

  it.each([
    ['https://hooks.example.com/agentstate', local],
    ['https://hooks.example.com/agentstate', aws],
    ['https://93.184.216.34/hook', aws],
    ['http://localhost:3000/hook', local],
    ['http://127.0.0.1:3000/hook', local],
    ['http://[::1]:3000/hook', local],
  ])('accepts %s', (url, mode) => {
    expect(() => validateWebhookUrl(url, mode)).not.toThrow();
  });

  it.each([
    ['http://localhost:3000/hook', aws, 'http:// is not allowed'],
    ['http://example.com/hook', local, 'only to a loopback host'],
    ['https://10.0.0.8/hook', aws, 'private'],
    ['https://169.254.169.254/latest', aws, 'link-local'],
    ['https://[::1]/hook', aws, 'loopback'],
    ['https://localhost/hook', aws, 'loopback'],
    ['https://u:p@example.com/hook', aws, 'credentials'],
    ['lambda:arn:aws:lambda:us-east-1:123456789012:function:f', aws, 'https://'],
    ['module:examples/worker.ts', local, 'https://'],
    ['ftp://example.com', local, 'https://'],
    [`https://example.com/${'a'.repeat(2100)}`, aws, 'longer than'],
  ])('refuses %s', (url, mode, reason) => {
    let error: unknown;
    try {
      validateWebhookUrl(url, mode);
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(AgentStateError);
    expect((error as AgentStateError).code).toBe('invalid_request');
    expect((error as AgentStateError).extras).toEqual({ field: 'url' });
    expect((error as AgentStateError).message).toContain(reason);
  });
});

describe('postWebhook', () => {
  let server: Server;
  let base: string;
  /** `rest`: after the status and a first chunk, the body never ends (`hang`) or the socket is cut (`cut`). */
  let answer: { status: number; delayMs?: number; location?: string; rest?: 'hang' | 'cut' };
  const seen: Array<{ headers: IncomingHttpHeaders; body: string }> = [];

  beforeAll(async () => {
    server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        seen.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
        const { rest } = answer;
        if (rest) {
          res.writeHead(answer.status).write('the first part of an answer');
          if (rest === 'cut') setTimeout(() => res.socket?.destroy(), 20);
          return;
        }
        setTimeout(
          () => res.writeHead(answer.status, answer.location ? { location: answer.location } : {}).end('answer'),
          answer.delayMs ?? 0,
        );
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => {
    server.closeAllConnections();
    server.close();
  });

  it('POSTs the body, signed, with the event id and attempt', async () => {
    answer = { status: 204 };
    const body = JSON.stringify({ id: 's1:1', next: { é: 'ü' } });

    const result = await postWebhook(
      { url: `${base}/hook`, secret: 'k' },
      body,
      { eventId: 's1:1', attempt: 2 },
      { allowLoopbackHttp: true },
    );

    expect(result).toEqual({ ok: true, status: 204 });
    const request = seen.at(-1);
    expect(request?.body).toBe(body);
    expect(request?.headers).toMatchObject({
      'content-type': 'application/json',
      'x-agentstate-event-id': 's1:1',
      'x-agentstate-delivery-attempt': '2',
      'x-agentstate-signature': expectedSignature('k', body),
      'webhook-id': 's1:1',
    });
    const timestamp = String(request?.headers['webhook-timestamp']);
    expect(Math.abs(Number(timestamp) - Date.now() / 1000)).toBeLessThan(5);
    const signed = createHmac('sha256', 'k').update(`s1:1.${timestamp}.${body}`).digest('base64');
    expect(request?.headers['webhook-signature']).toBe(`v1,${signed}`);
  });

  it('sends no signature without a secret', async () => {
    answer = { status: 200 };
    await postWebhook({ url: `${base}/hook`, secret: null }, '{}', { eventId: 'e', attempt: 1 }, { allowLoopbackHttp: true });
    expect(seen.at(-1)?.headers).not.toHaveProperty('x-agentstate-signature');
    expect(seen.at(-1)?.headers).not.toHaveProperty('webhook-signature');
  });

  it.each([
    [{ status: 500 }, 'HTTP 500'],
    [{ status: 410 }, 'HTTP 410'],
    [{ status: 302, location: 'https://elsewhere.example' }, 'HTTP 302 (a redirect; redirects are not followed)'],
  ])('fails on %j', async (given, error) => {
    answer = given;
    expect(
      await postWebhook({ url: `${base}/hook`, secret: null }, '{}', { eventId: 'e', attempt: 1 }, { allowLoopbackHttp: true }),
    ).toEqual({ ok: false, error });
  });

  it('gives up on an endpoint that does not answer in time', async () => {
    answer = { status: 200, delayMs: 500 };
    const result = await postWebhook(
      { url: `${base}/hook`, secret: null },
      '{}',
      { eventId: 'e', attempt: 1 },
      { allowLoopbackHttp: true, timeoutMs: 50 },
    );
    expect(result).toEqual({ ok: false, error: 'no answer within 50 ms' });
  });

  it.each([
    ['answers 200 and never ends its body', { status: 200, rest: 'hang' }, { ok: true, status: 200 }],
    ['answers 200 and cuts the connection in its body', { status: 200, rest: 'cut' }, { ok: true, status: 200 }],
    ['answers 500 and never ends its body', { status: 500, rest: 'hang' }, { ok: false, error: 'HTTP 500' }],
  ] as const)('decides by the status when an endpoint %s', async (_case, given, expected) => {
    // Prepare
    answer = { ...given };

    // Act
    const result = await postWebhook(
      { url: `${base}/hook`, secret: null },
      '{}',
      { eventId: 'e', attempt: 1 },
      { allowLoopbackHttp: true, timeoutMs: 200 },
    );

    // Assess: the status was in well within the time (before, a body that never ended was
    // "no answer within 200 ms": retried, then dead-lettered, though the endpoint took it)
    expect(result).toEqual(expected);
  });

  it('takes a 200 whose body never ends as delivered at once, not when its time runs out', async () => {
    // Prepare: a minute to answer, twice the test's own time: only an answer taken at its
    // status ends this test in time (before, it waited for the body until the minute ran out,
    // holding the webhook's lane 5 s per event with the default time).
    answer = { status: 200, rest: 'hang' };

    // Act
    const result = await postWebhook(
      { url: `${base}/hook`, secret: null },
      '{}',
      { eventId: 'e', attempt: 1 },
      { allowLoopbackHttp: true, timeoutMs: 60_000 },
    );

    // Assess
    expect(result).toEqual({ ok: true, status: 200 });
  });

  it('fails on an endpoint that cannot be reached', async () => {
    const result = await postWebhook(
      { url: 'http://127.0.0.1:1/hook', secret: null },
      '{}',
      { eventId: 'e', attempt: 1 },
      { allowLoopbackHttp: true },
    );
    expect(result).toEqual({ ok: false, error: 'could not connect (ECONNREFUSED)' });
  });

  it('says a receiver that reset the connection mid-request was reached, not that it could not be', async () => {
    // Prepare: a receiver that takes the connection, reads the request's first bytes, and resets it.
    const receiver = createNetServer((socket) => socket.once('data', () => socket.resetAndDestroy()));
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    const { port } = receiver.address() as AddressInfo;

    // Act
    const result = await postWebhook(
      { url: `http://127.0.0.1:${port}/hook`, secret: null },
      '{}',
      { eventId: 'e', attempt: 1 },
      { allowLoopbackHttp: true },
    );
    await new Promise((resolve) => receiver.close(resolve));

    // Assess: before, "could not connect (ECONNRESET)"
    expect(result).toEqual({ ok: false, error: 'connection lost before an answer (ECONNRESET)' });
  });

  it('in AWS mode, refuses a host name that resolves to a private address, without connecting', async () => {
    const before = seen.length;
    const result = await postWebhook(
      { url: 'https://internal.example.com/hook', secret: null },
      '{}',
      { eventId: 'e', attempt: 1 },
      { allowLoopbackHttp: false, resolveHost: async () => ['10.1.2.3'] },
    );
    expect(result).toEqual({ ok: false, error: 'refused: internal.example.com resolves to a non-public address' });
    expect(seen.length).toBe(before);
  });

  it('in AWS mode, does not deliver to a URL registered under local rules', async () => {
    const result = await postWebhook(
      { url: `${base}/hook`, secret: null },
      '{}',
      { eventId: 'e', attempt: 1 },
      { allowLoopbackHttp: false },
    );
    expect(result.ok).toBe(false);
    expect((result as { error: string }).error).toContain('not delivered');
  });
});
