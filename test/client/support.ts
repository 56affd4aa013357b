import { createServer, request as httpRequest, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A real HTTP proxy in front of the real server, to make the network misbehave on purpose:
 * answer an error itself, forward and then lose the answer, or hang. Every request is
 * recorded with its headers, so tests can see what the client sent on each attempt.
 */

type Fault =
  /** Forward and pass the answer back. */
  | 'forward'
  /** Forward, let the server do the work, then cut the connection instead of answering. */
  | 'lose-answer'
  /** Cut the connection without forwarding. */
  | 'reset'
  /** Never answer. */
  | 'hang'
  /** Answer this status (problem+json) without forwarding. */
  | { status: number; code: string; retryAfter?: string; extras?: Record<string, unknown> };

interface Seen {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
}

export interface FaultyProxy {
  url: string;
  seen: Seen[];
  /** The faults for the next requests, in order; then `forward`. */
  plan(...faults: Fault[]): void;
  close(): Promise<void>;
}

export async function startFaultyProxy(target: string): Promise<FaultyProxy> {
  const upstream = new URL(target);
  const seen: Seen[] = [];
  let faults: Fault[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      seen.push({ method: req.method ?? 'GET', path: req.url ?? '/', headers: req.headers });
      const fault = faults.shift() ?? 'forward';
      if (fault === 'hang') return;
      if (fault === 'reset') return void req.socket.destroy();
      if (typeof fault === 'object') {
        res.writeHead(fault.status, {
          'content-type': 'application/problem+json',
          ...(fault.retryAfter ? { 'retry-after': fault.retryAfter } : {}),
        });
        return void res.end(
          JSON.stringify({
            type: 'about:blank',
            title: fault.code,
            status: fault.status,
            code: fault.code,
            detail: `injected ${fault.code}`,
            ...fault.extras,
          }),
        );
      }
      const forwarded = httpRequest(
        {
          host: upstream.hostname,
          port: upstream.port,
          method: req.method,
          path: req.url,
          headers: { ...req.headers, host: upstream.host },
        },
        (answer) => {
          const body: Buffer[] = [];
          answer.on('data', (chunk: Buffer) => body.push(chunk));
          answer.on('end', () => {
            if (fault === 'lose-answer') return void req.socket.destroy();
            res.writeHead(answer.statusCode ?? 502, answer.headers);
            res.end(Buffer.concat(body));
          });
        },
      );
      forwarded.on('error', () => req.socket.destroy());
      forwarded.end(Buffer.concat(chunks));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    plan: (...next) => {
      faults = next;
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A session id no other test uses. */
export function uniqueId(prefix: string): string {
  return `${prefix}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
}

/** Polls `check` until it returns something truthy, or fails after `timeoutMs` saying `what`. */
export async function eventually<T>(what: string, check: () => T | Promise<T>, timeoutMs = 10_000): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}
