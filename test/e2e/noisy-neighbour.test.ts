import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiClient, apiClient, uniqueId } from '../helpers/api-client.js';
import { type RunningApi, startApi } from '../helpers/e2e.js';
import { connectLive, type LiveClient, waitFor } from '../helpers/events.js';

/**
 * A noisy neighbour (issue 16): tenant A's webhook endpoint accepts connections and never
 * answers, the worst an endpoint can do (each delivery waits out its 5 s timeout, 3 times).
 * Meanwhile tenant B follows its own session over the WebSocket, and other endpoints (B's, and
 * a second one of A's) receive their deliveries. Both must go as fast as ever: live pushes
 * never wait on webhooks, and a slow or dead endpoint delays only its own deliveries (API.md
 * section 9).
 */

let api: RunningApi;
let tenantA: ApiClient;
let tenantB: ApiClient;
let blackHole: Server;
let blackHoleUrl: string;
const held: Socket[] = [];
let live: LiveClient | undefined;
const endpoints: Endpoint[] = [];

/** A webhook endpoint on loopback that answers 200, or while `holding` accepts and never answers. */
interface Endpoint {
  url: string;
  holding: boolean;
  /** Requests that arrived while holding, never answered. */
  held: number;
  /** The events it answered 200, in the order it received them, with when. */
  received: Array<{ sessionId: string; version: number; at: number }>;
  close(): Promise<void>;
}

async function endpoint(holding = false): Promise<Endpoint> {
  const sockets = new Set<Socket>();
  const state: Endpoint = { url: '', holding, held: 0, received: [], close: async () => {} };
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      if (state.holding) {
        state.held++;
        return;
      }
      const event = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      state.received.push({ sessionId: event.sessionId, version: event.version, at: Date.now() });
      res.writeHead(200).end();
    });
  });
  server.on('connection', (socket) => sockets.add(socket));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  state.close = async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise((resolve) => server.close(resolve));
  };
  endpoints.push(state);
  return state;
}

/** The versions an endpoint received of one session, in the order received. */
function versionsOf(target: Endpoint, sessionId: string): number[] {
  return target.received.filter((event) => event.sessionId === sessionId).map((event) => event.version);
}

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
  await Promise.all(endpoints.map((target) => target.close()));
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

describe('a webhook that never answers, beside other webhook endpoints', () => {
  it("delays neither another tenant's endpoint nor the same tenant's other endpoint, and each gets its sessions in order", async () => {
    // Prepare: A has the black hole and a healthy endpoint, B a healthy endpoint. A's session
    // already has an event stuck in the black hole.
    const mineToo = await endpoint();
    const theirs = await endpoint();
    const deadHook = await tenantA.post('/v1/webhooks', { url: blackHoleUrl });
    expect(deadHook.status).toBe(201);
    expect((await tenantA.post('/v1/webhooks', { url: mineToo.url })).status).toBe(201);
    expect((await tenantB.post('/v1/webhooks', { url: theirs.url })).status).toBe(201);
    const sessionA = uniqueId('a');
    const sessionB = uniqueId('b');
    const connected = held.length;
    await tenantA.patch(`/v1/sessions/${sessionA}/state`, { write: 1 });
    await waitFor('the black hole to be called', () => held.length > connected);
    await waitFor("A's other endpoint to get version 1", () => versionsOf(mineToo, sessionA).includes(1));

    // Act: while the black hole holds A's first delivery, A and B write one event after another.
    const latencies: number[] = [];
    for (let write = 2; write <= 4; write++) {
      const sent = Date.now();
      await Promise.all([
        tenantA.patch(`/v1/sessions/${sessionA}/state`, { write }),
        tenantB.patch(`/v1/sessions/${sessionB}/state`, { write }),
      ]);
      await waitFor(`A's other endpoint to get version ${write}`, () => versionsOf(mineToo, sessionA).includes(write), 4_000);
      await waitFor(`B's endpoint to get version ${write - 1}`, () => versionsOf(theirs, sessionB).includes(write - 1), 4_000);
      latencies.push(Date.now() - sent);
    }

    // Assess: each well under one delivery timeout (5 s), in version order per session; the
    // black hole is still waiting out its first delivery.
    expect(Math.max(...latencies)).toBeLessThan(2_000);
    expect(versionsOf(mineToo, sessionA)).toEqual([1, 2, 3, 4]);
    expect(versionsOf(theirs, sessionB)).toEqual([1, 2, 3]);
    const letters = await tenantA.get(`/v1/webhooks/${deadHook.body.id}/dead-letters`);
    expect(letters.body.deadLetters).toEqual([]);
  });

  it('delivers a recovered endpoint its backlog in order', async () => {
    // Prepare: an endpoint that holds every request, as the black hole does.
    const recovering = await endpoint(true);
    const sessionId = uniqueId('r');
    expect((await tenantA.post('/v1/webhooks', { url: recovering.url, sessionId })).status).toBe(201);

    // Act: four writes pile up behind the held first delivery; then the endpoint recovers.
    for (let write = 1; write <= 4; write++) await tenantA.patch(`/v1/sessions/${sessionId}/state`, { write });
    await waitFor('the first delivery to be held', () => recovering.held > 0);
    recovering.holding = false;

    // Assess: its retry, then the backlog behind it, in version order.
    await waitFor('the backlog', () => versionsOf(recovering, sessionId).length >= 4, 15_000);
    expect(versionsOf(recovering, sessionId)).toEqual([1, 2, 3, 4]);
  }, 30_000);
});
