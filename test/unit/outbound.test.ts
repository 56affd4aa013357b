import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentStateError } from '../../functions/core/kernel/errors.js';
import { callWorker } from '../../functions/workers/call-worker.js';
import { classifyAddress, isPublicAddress, publicOnlyLookup } from '../../functions/workers/outbound.js';
import { postWebhook, validateWebhookUrl } from '../../functions/workers/webhook-sender.js';
import { validateWorkerUrl } from '../../functions/workers/worker-registration.js';

/* ------------------------------------------------------------------ address classification */

describe('classifyAddress', () => {
  it.each([
    ['10.0.0.1', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['192.168.1.1', 'private'],
    ['127.0.0.1', 'loopback'],
    ['127.255.0.9', 'loopback'],
    ['169.254.169.254', 'link-local'],
    ['::1', 'loopback'],
    ['fe80::1', 'link-local'],
    ['fe80::1%eth0', 'link-local'],
    ['febf::1', 'link-local'],
    ['fc00::1', 'unique-local'],
    ['fd12:3456::1', 'unique-local'],
    ['::ffff:10.0.0.1', 'private'],
    ['::ffff:a00:1', 'private'],
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:169.254.169.254', 'link-local'],
    ['64:ff9b::a9fe:a9fe', 'link-local'],
    ['2002:a00:1::', 'private'],
    ['100.64.0.1', 'cgnat'],
    ['100.127.255.255', 'cgnat'],
    ['0.0.0.0', 'unspecified'],
    ['0.1.2.3', 'unspecified'],
    ['::', 'unspecified'],
    ['224.0.0.1', 'multicast'],
    ['ff02::1', 'multicast'],
    ['255.255.255.255', 'reserved'],
    ['192.0.2.1', 'reserved'],
    ['198.18.0.1', 'reserved'],
    ['2001:db8::1', 'reserved'],
    ['::10.0.0.1', 'reserved'],
    ['not-an-ip', 'invalid'],
    ['256.1.1.1', 'invalid'],
  ])('%s is %s', (address, expected) => {
    expect(classifyAddress(address)).toBe(expected);
    expect(isPublicAddress(address)).toBe(false);
  });

  it.each([
    ['8.8.8.8'],
    ['1.1.1.1'],
    ['100.63.255.255'],
    ['100.128.0.0'],
    ['172.15.255.255'],
    ['172.32.0.0'],
    ['169.253.0.1'],
    ['2606:4700::1'],
    ['2a00:1450:4001:81d::200e'],
    ['::ffff:8.8.8.8'],
    ['64:ff9b::808:808'],
    ['2002:808:808::1'],
  ])('%s is public', (address) => {
    expect(classifyAddress(address)).toBe('public');
    expect(isPublicAddress(address)).toBe(true);
  });
});

describe('publicOnlyLookup', () => {
  /** Runs the lookup the way net.connect does and returns what it called back with. */
  const run = (addresses: string[], lookupOptions: { all?: boolean; family?: number }) =>
    new Promise<{ error: unknown; address: unknown; family: unknown }>((resolve) => {
      const lookup = publicOnlyLookup(async () => addresses);
      lookup(
        'worker.example.test',
        lookupOptions as never,
        ((error: unknown, address: unknown, family: unknown) => resolve({ error, address, family })) as never,
      );
    });

  it('hands net.connect the public addresses, in both callback forms', async () => {
    expect(await run(['8.8.8.8', '2606:4700::1'], { all: true })).toEqual({
      error: null,
      address: [
        { address: '8.8.8.8', family: 4 },
        { address: '2606:4700::1', family: 6 },
      ],
      family: undefined,
    });
    expect(await run(['8.8.8.8', '2606:4700::1'], {})).toEqual({ error: null, address: '8.8.8.8', family: 4 });
    expect(await run(['8.8.8.8', '2606:4700::1'], { family: 6 })).toEqual({ error: null, address: '2606:4700::1', family: 6 });
  });

  it('fails when any address is not public, or none is left', async () => {
    const refused = await run(['8.8.8.8', '10.1.2.3'], { all: true });
    expect(refused.error).toBeInstanceOf(AgentStateError);
    expect((refused.error as AgentStateError).code).toBe('worker_failed');
    expect(((await run([], {})).error as NodeJS.ErrnoException).code).toBe('ENOTFOUND');
  });
});

/* ------------------------------------------------------------------ one rule for workers and webhooks */

/** What `action` threw, failing the test when it did not throw an AgentStateError. */
function thrownBy(action: () => unknown): AgentStateError {
  try {
    action();
  } catch (error) {
    expect(error).toBeInstanceOf(AgentStateError);
    return error as AgentStateError;
  }
  throw new Error('expected the action to throw');
}

describe('workers and webhooks under the same SSRF rules', () => {
  const aws = { allowLoopbackHttp: false };

  it.each([
    ['https://10.0.0.1/', 'private'],
    ['https://172.16.0.1/', 'private'],
    ['https://127.0.0.1/', 'loopback'],
    ['https://169.254.169.254/latest/meta-data', 'link-local'],
    ['https://[::1]/', 'loopback'],
    ['https://[fe80::1]/', 'link-local'],
    ['https://[fc00::1]/', 'unique-local'],
    ['https://[::ffff:10.0.0.1]/', 'private'],
    ['https://100.64.0.1/', 'cgnat'],
    ['https://0.0.0.0/', 'unspecified'],
    ['https://0x7f.1/', 'loopback'],
    ['https://2130706433/', 'loopback'],
    ['https://LOCALHOST./', 'loopback'],
    ['https://api.localhost/', 'loopback'],
  ])('refuses %s to both where it is registered in AWS mode (a %s address)', (url, kind) => {
    // Act
    const worker = thrownBy(() => validateWorkerUrl(url, aws));
    const webhook = thrownBy(() => validateWebhookUrl(url, aws));

    // Assess: the same refusal, each in its own words
    expect(worker.code).toBe('invalid_request');
    expect(worker.message).toBe(`worker.url must not point at a ${kind} address`);
    expect(webhook.code).toBe('invalid_request');
    expect(webhook.message).toBe(`url must not point at a ${kind} address`);
    expect(webhook.extras).toEqual({ field: 'url' });
  });

  it.each([[['10.0.0.5']], [['::ffff:169.254.169.254']], [['8.8.8.8', '127.0.0.1']], [['fd00::1']]])(
    'refuses to connect either to a host name that resolves to %j',
    async (addresses) => {
      // Prepare: DNS answers with addresses that are not all public (no real DNS or traffic)
      const resolveHost = async () => addresses;

      // Act
      const worker = callWorker({ url: 'https://worker.example.test/decide' }, '{}', { ...aws, resolveHost });
      const webhook = postWebhook(
        { url: 'https://hooks.example.test/hook', secret: null },
        '{}',
        { eventId: 'e', attempt: 1 },
        { ...aws, resolveHost },
      );

      // Assess
      await expect(worker).rejects.toMatchObject({
        code: 'worker_failed',
        message: "the worker's host worker.example.test resolves to a non-public address; refused",
      });
      expect(await webhook).toEqual({ ok: false, error: 'refused: hooks.example.test resolves to a non-public address' });
    },
  );
});

describe('connection pools', () => {
  let base: string;
  const held: ServerResponse[] = [];
  const server = createServer((request, response) => {
    request.resume();
    request.on('end', () => {
      if (request.url === '/slow') held.push(response);
      else response.writeHead(200, { 'content-type': 'application/json' }).end('{"state":{}}');
    });
  });

  beforeAll(async () => {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => {
    server.closeAllConnections();
    server.close();
  });

  it('keeps a worker call out of the sockets that stuck webhook deliveries to the same host hold', async () => {
    // Prepare: as many deliveries as a webhook pool holds sockets for one host, all left hanging
    const local = { allowLoopbackHttp: true };
    const deliveries = Array.from({ length: 16 }, (_, attempt) =>
      postWebhook({ url: `${base}/slow`, secret: null }, '{}', { eventId: 'e', attempt }, { ...local, timeoutMs: 10_000 }),
    );
    while (held.length < 16) await new Promise((resolve) => setTimeout(resolve, 10));

    // Act: a worker on the same host, with a timeout far shorter than the deliveries'
    const answer = await callWorker({ url: `${base}/echo`, timeoutMs: 2_000 }, '{}', local);

    // Assess: it was answered while every delivery still waited
    expect(answer).toEqual({ state: {} });
    expect(held.every((response) => !response.writableEnded)).toBe(true);
    for (const response of held) response.writeHead(204).end();
    expect((await Promise.all(deliveries)).every((result) => result.ok)).toBe(true);
  });
});
