import { createHmac } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocket } from 'ws';
import { eventViolations } from './contract.js';

/** Polls `check` until it returns something truthy, or fails after `timeoutMs` saying `what`. */
export async function waitFor<T>(what: string, check: () => T | Promise<T>, timeoutMs = 10_000, everyMs = 25): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}

interface Delivery {
  headers: IncomingHttpHeaders;
  /** The body exactly as received, for signature checks. */
  raw: string;
  body: any;
  /** The status the receiver answered. */
  status: number;
  at: number;
}

export interface Receiver {
  /** `http://127.0.0.1:<port>/hook` */
  url: string;
  /** Every request, answered or not. */
  deliveries: Delivery[];
  /** Bodies of the requests that were answered 2xx. */
  accepted(): any[];
  /** The status the next requests get. */
  answer(status: number): void;
  /** Where a delivered event breaks docs/openapi.json (contract.ts `eventViolations`). */
  violations: string[];
  close(): Promise<void>;
}

/** A webhook endpoint on loopback that records what it is sent. */
async function startReceiver(status = 200): Promise<Receiver> {
  let answer = status;
  const deliveries: Delivery[] = [];
  const violations: string[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      const body = JSON.parse(raw);
      violations.push(...eventViolations(body, 'webhook'));
      deliveries.push({ headers: req.headers, raw, body, status: answer, at: Date.now() });
      res.writeHead(answer).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    deliveries,
    accepted: () => deliveries.filter((delivery) => delivery.status < 300).map((delivery) => delivery.body),
    answer: (next) => {
      answer = next;
    },
    violations,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** `sha256=<hex HMAC-SHA256(secret, body)>`, computed the way a receiver verifies it. */
export function expectedSignature(secret: string, raw: string): string {
  return `sha256=${createHmac('sha256', secret).update(raw, 'utf8').digest('hex')}`;
}

export interface LiveClient {
  socket: WebSocket;
  /** Every message received, parsed. */
  messages: any[];
  /** The `state.changed` events received. */
  events(): any[];
  send(message: unknown): void;
  /** Where a change event received breaks docs/openapi.json (contract.ts `eventViolations`). */
  violations: string[];
  close(): Promise<void>;
}

/** Connects to the WebSocket API; rejects with the HTTP status when the upgrade is refused. */
export function connectLive(url: string): Promise<LiveClient> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url);
    const messages: any[] = [];
    const violations: string[] = [];
    socket.on('message', (data) => {
      const message = JSON.parse(data.toString());
      // The connection's own answers (`subscribed`, `error`, …) are not change events.
      if (typeof message?.type === 'string' && message.type.endsWith('.changed')) violations.push(...eventViolations(message, 'WebSocket'));
      messages.push(message);
    });
    socket.once('unexpected-response', (_request, response) => {
      reject(Object.assign(new Error(`upgrade refused: ${response.statusCode}`), { status: response.statusCode }));
      socket.terminate();
    });
    socket.once('error', reject);
    socket.once('open', () =>
      resolve({
        socket,
        messages,
        events: () => messages.filter((message) => message.type === 'state.changed'),
        send: (message) => socket.send(JSON.stringify(message)),
        violations,
        close: () =>
          new Promise((done) => {
            if (socket.readyState === WebSocket.CLOSED) return done();
            socket.once('close', () => done());
            socket.close();
          }),
      }),
    );
  });
}

/**
 * The webhook receivers and WebSocket clients one test file opens against its server, all
 * closed by `close()` in its `afterAll`, which then fails the file if any event they received
 * broke the OpenAPI document's event schemas (as e2e.ts does for HTTP exchanges).
 */
export class EventFixtures {
  private readonly receivers: Receiver[] = [];
  private readonly clients: LiveClient[] = [];

  /** `baseUrl`: the server's `http://…` address, read when a client connects. */
  constructor(private readonly baseUrl: () => string) {}

  async receiver(status = 200): Promise<Receiver> {
    const started = await startReceiver(status);
    this.receivers.push(started);
    return started;
  }

  /** A WebSocket connection with `token` as its API key. */
  async live(token: string): Promise<LiveClient> {
    const client = await connectLive(`${this.baseUrl().replace('http://', 'ws://')}/v1/ws?token=${token}`);
    this.clients.push(client);
    return client;
  }

  async close(): Promise<void> {
    await Promise.all(this.clients.map((client) => client.close()));
    await Promise.all(this.receivers.map((receiver) => receiver.close()));
    const violations = [...this.receivers, ...this.clients].flatMap((channel) => channel.violations);
    if (violations.length > 0) {
      throw new Error(`events broke docs/openapi.json:\n${[...new Set(violations)].join('\n')}`);
    }
  }
}
