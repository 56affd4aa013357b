import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { ChangeEvent } from '../../functions/core/events/events.js';
import { eventBridgeClient, eventBridgePublisher } from '../../functions/streams/event-bus.js';
import { connectionGatewayFromEnv } from '../../functions/ws/connections.js';
import { stateChangedEvent } from '../helpers/event-fixtures.js';

/**
 * The change hook's outbound AWS clients (EventBridge, the API Gateway Management API) against
 * endpoints that accept a request and never answer: each call gives up within seconds, so a
 * hang fails only what it held — those entries, that connection — and the rest of the batch
 * goes through. Before, both clients had the SDK's defaults (no request timeout), and one
 * silent endpoint held the change hook for its whole 60 s, failing the batch as a function error.
 */

/** An endpoint that answers PutEvents, except requests that carry `STALL`: those it never answers. */
let endpoint: Server;
let endpointUrl: string;
let received = 0;
const held: IncomingMessage[] = [];
const env = { ...process.env };

beforeAll(async () => {
  vi.spyOn(console, 'warn').mockImplementation(() => {});
  endpoint = createServer(async (request, response) => {
    let body = '';
    for await (const chunk of request) body += chunk;
    if (body.includes('STALL') || request.url?.includes('@connections')) {
      held.push(request);
      return;
    }
    const entries = (JSON.parse(body) as { Entries: unknown[] }).Entries;
    received += entries.length;
    response.writeHead(200, { 'content-type': 'application/x-amz-json-1.1' });
    response.end(JSON.stringify({ FailedEntryCount: 0, Entries: entries.map((_, index) => ({ EventId: `e${index}` })) }));
  });
  await new Promise<void>((resolve) => endpoint.listen(0, '127.0.0.1', resolve));
  endpointUrl = `http://127.0.0.1:${(endpoint.address() as AddressInfo).port}`;
  Object.assign(process.env, {
    AWS_ENDPOINT_URL_EVENTBRIDGE: endpointUrl,
    AWS_REGION: 'us-east-1',
    AWS_ACCESS_KEY_ID: 'test',
    AWS_SECRET_ACCESS_KEY: 'test',
  });
});
afterAll(async () => {
  vi.restoreAllMocks();
  process.env = env;
  endpoint.closeAllConnections();
  await new Promise((resolve) => endpoint.close(resolve));
});

function event(version: number, note: string): { tenant: string; event: ChangeEvent } {
  return { tenant: 't', event: stateChangedEvent(version, { next: { note }, patch: { note }, occurredAt: new Date(0).toISOString() }) };
}

describe('EventBridge that hangs', () => {
  it('fails only the entries of the request it holds, within seconds, and puts the others', async () => {
    // Prepare: 11 events, two requests (10 + 1); the endpoint holds the second.
    const events = [...Array.from({ length: 10 }, (_, index) => event(index + 1, 'fine')), event(11, 'STALL')];
    const publish = eventBridgePublisher(eventBridgeClient(), 'bus', async () => {});
    const started = Date.now();

    // Act
    const failed = await publish(events);

    // Assess
    expect(failed).toEqual([10]);
    expect(received).toBe(10);
    expect(Date.now() - started).toBeLessThan(15_000);
  }, 30_000);
});

describe('an API Gateway Management endpoint that hangs', () => {
  it('fails the post within seconds instead of holding the batch', async () => {
    // Prepare
    const gateway = connectionGatewayFromEnv({ AGENTSTATE_WEBSOCKET_ENDPOINT: endpointUrl });
    const started = Date.now();

    // Act
    const posted = await gateway?.post('connection-1', '{"type":"state.changed"}').catch((error: unknown) => error);

    // Assess
    expect(posted).toBeInstanceOf(Error);
    expect(Date.now() - started).toBeLessThan(10_000);
  }, 30_000);
});
