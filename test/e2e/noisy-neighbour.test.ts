import { createServer, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiClient, apiClient, uniqueId } from '../helpers/api-client.js';
import { type RunningApi, startApi } from '../helpers/e2e.js';
import { connectLive, type LiveClient, waitFor } from '../helpers/events.js';

/**
 * A noisy neighbour (issue 16): tenant A's webhook endpoint accepts connections and never
 * answers, the worst an endpoint can do (each delivery waits out its 5 s timeout, 3 times).
 * Meanwhile tenant B follows its own session over the WebSocket. B's events must arrive as
 * fast as ever: live pushes never wait on webhooks (API.md section 9).
 */

let api: RunningApi;
let tenantA: ApiClient;
let tenantB: ApiClient;
let blackHole: Server;
let blackHoleUrl: string;
const held: Socket[] = [];
let live: LiveClient | undefined;

beforeAll(async () => {
  // Accepts, reads, and never answers.
  blackHole = createServer(() => {});
  blackHole.on('connection', (socket) => held.push(socket));
  await new Promise<void>((resolve) => blackHole.listen(0, '127.0.0.1', resolve));
  blackHoleUrl = `http://127.0.0.1:${(blackHole.address() as AddressInfo).port}/hook`;
  api = await startApi();
  tenantA = api.client;
  tenantB = apiClient(api.url, 'other-key');
});

afterAll(async () => {
  await live?.close();
  for (const socket of held) socket.destroy();
  await new Promise((resolve) => blackHole?.close(resolve));
  await api?.stop();
});

describe("a webhook that never answers, beside another tenant's live sync", () => {
  it("delays none of the other tenant's WebSocket events", async () => {
    // Prepare: A's webhook is the black hole; B follows its session.
    expect((await tenantA.post('/v1/webhooks', { url: blackHoleUrl })).status).toBe(201);
    const sessionB = uniqueId('b');
    live = await connectLive(`${api.url.replace('http', 'ws')}/v1/ws?token=other-key`);
    live.send({ action: 'subscribe', sessionId: sessionB });
    await waitFor('the subscription', () => live?.messages.some((message) => message.type === 'subscribed'));

    // Act: A writes (its deliveries start hanging), then B writes, one event after another.
    for (let write = 1; write <= 3; write++) await tenantA.patch(`/v1/sessions/${uniqueId('a')}/state`, { write });
    await waitFor('the black hole to be called', () => held.length > 0);
    const latencies: number[] = [];
    for (let write = 1; write <= 3; write++) {
      const sent = Date.now();
      await tenantB.patch(`/v1/sessions/${sessionB}/state`, { write });
      await waitFor(`B's event ${write}`, () => live?.events().some((event) => event.version === write), 4_000);
      latencies.push(Date.now() - sent);
    }

    // Assess: well under one delivery timeout (5 s) each; before the fix they took 5–15 s.
    expect(Math.max(...latencies)).toBeLessThan(2_000);
  });
});
