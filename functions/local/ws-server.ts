import { randomBytes, randomUUID } from 'node:crypto';
import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { type RawData, WebSocket, WebSocketServer } from 'ws';
import type { ConnectionGateway } from '../ws/connections.js';
import type { WebSocketEvent, WebSocketResult } from '../ws/handler.js';

/**
 * Local stand-in for the stack's API Gateway WebSocket API, on the local server's own port
 * (`ws://localhost:PORT/v1/ws`): it turns the upgrade, each message and the close into the
 * events API Gateway sends to functions/ws/handler.ts, and it is the local Management API
 * that the change hook posts to (`gateway`). As in API Gateway:
 *
 * - `$connect` decides: a non-2xx answer refuses the upgrade with that status;
 * - the server may close a connection (`gateway.close`, DeleteConnection in AWS): its key was revoked;
 * - the route is `$request.body.action` (`subscribe`, `unsubscribe`), else `$default`; a
 *   route's answer body is sent back to the client (two-way routes);
 * - messages are at most 128 KB; a connection lasts at most 2 hours and closes after
 *   10 minutes without messages.
 */

export const WEBSOCKET_PATH = '/v1/ws';
const MAX_MESSAGE_BYTES = 128 * 1024;
const MAX_CONNECTION_MS = 2 * 60 * 60 * 1000;
const IDLE_TIMEOUT_MS = 10 * 60 * 1000;
const ROUTES = new Set(['subscribe', 'unsubscribe']);

export type WebSocketHandler = (event: WebSocketEvent) => Promise<WebSocketResult>;

export interface LocalWebSocketApi {
  /** The local Management API: PostToConnection for the change hook. */
  gateway: ConnectionGateway;
  /** Serves upgrades with this handler from now on (until then they answer 503). */
  serve(handler: WebSocketHandler): void;
  /** Closes every connection (each gets its `$disconnect`) and stops accepting new ones. */
  close(): Promise<void>;
}

interface Connection {
  socket: WebSocket;
  /** Messages are handled one after the other, so answers keep their order. */
  queue: Promise<void>;
  closed: Promise<void>;
}

export function attachWebSocketApi(server: Server): LocalWebSocketApi {
  const wss = new WebSocketServer({ noServer: true, maxPayload: MAX_MESSAGE_BYTES });
  const connections = new Map<string, Connection>();
  let handler: WebSocketHandler | undefined;
  let closing = false;

  const refuse = (socket: Duplex, status: number, reason: string, body = '') => {
    socket.end(
      `HTTP/1.1 ${status} ${reason}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
    );
  };

  const context = (routeKey: string, connectionId: string, eventType: 'CONNECT' | 'MESSAGE' | 'DISCONNECT') => ({
    routeKey,
    connectionId,
    eventType,
    requestId: randomBytes(10).toString('base64'),
    messageId: randomUUID(),
  });

  server.on('upgrade', (request: IncomingMessage, socket: Duplex, head: Buffer) => {
    const url = new URL(request.url ?? '/', 'http://localhost');
    if (url.pathname !== WEBSOCKET_PATH) return refuse(socket, 404, 'Not Found');
    if (!handler || closing) return refuse(socket, 503, 'Service Unavailable');
    const serve = handler;
    const connectionId = randomBytes(12).toString('base64url');
    const queryStringParameters = Object.fromEntries(url.searchParams);
    void serve({ requestContext: context('$connect', connectionId, 'CONNECT'), queryStringParameters, isBase64Encoded: false }).then(
      (result) => {
        if (result.statusCode < 200 || result.statusCode >= 300) {
          return refuse(socket, result.statusCode, result.statusCode === 401 ? 'Unauthorized' : 'Forbidden', result.body ?? '');
        }
        wss.handleUpgrade(request, socket, head, (ws) => accept(ws, connectionId, serve));
      },
      (error: unknown) => {
        console.error('agentstate: WebSocket $connect failed', error);
        refuse(socket, 500, 'Internal Server Error');
      },
    );
  });

  function accept(socket: WebSocket, connectionId: string, serve: WebSocketHandler): void {
    let idle: NodeJS.Timeout;
    const touch = () => {
      clearTimeout(idle);
      idle = setTimeout(() => socket.close(1001, 'Going away: idle for 10 minutes'), IDLE_TIMEOUT_MS).unref();
    };
    const lifetime = setTimeout(() => socket.close(1001, 'Going away: connections last at most 2 hours'), MAX_CONNECTION_MS).unref();
    touch();

    let markClosed!: () => void;
    const connection: Connection = { socket, queue: Promise.resolve(), closed: new Promise((resolve) => (markClosed = resolve)) };
    connections.set(connectionId, connection);

    socket.on('message', (data: RawData) => {
      touch();
      const body = Buffer.isBuffer(data) ? data.toString('utf8') : Buffer.concat(data as Buffer[]).toString('utf8');
      connection.queue = connection.queue
        .then(async () => {
          const result = await serve({ requestContext: context(routeOf(body), connectionId, 'MESSAGE'), body, isBase64Encoded: false });
          if (result.body !== undefined && socket.readyState === WebSocket.OPEN) socket.send(result.body);
        })
        .catch((error: unknown) => console.error('agentstate: WebSocket message failed', error));
    });
    socket.on('close', () => {
      clearTimeout(idle);
      clearTimeout(lifetime);
      connections.delete(connectionId);
      void connection.queue
        .then(() => serve({ requestContext: context('$disconnect', connectionId, 'DISCONNECT'), isBase64Encoded: false }))
        .catch((error: unknown) => console.error('agentstate: WebSocket $disconnect failed', error))
        .finally(markClosed);
    });
    // ws reports a broken frame (one over 128 KB, bad UTF-8) here after it has already sent
    // the close frame with its code, and a socket error after it has already dropped the
    // socket. Dropping it here as well would reset a client still sending its message, and a
    // proxy on the way may then lose the close frame: the client would see 1006, not 1009.
    // ws instead reads and discards the rest and ends the connection (within 30 s at most).
    socket.on('error', () => {});
  }

  const gateway: ConnectionGateway = {
    post: (connectionId, data) => {
      const connection = connections.get(connectionId);
      if (!connection || connection.socket.readyState !== WebSocket.OPEN) return Promise.resolve('gone');
      return new Promise((resolve) => connection.socket.send(data, (error) => resolve(error ? 'gone' : 'sent')));
    },
    // As API Gateway's DeleteConnection: the server closes the socket (1008, policy violation),
    // and the close runs the connection's $disconnect.
    close: async (connectionId) => {
      connections.get(connectionId)?.socket.close(1008, "Policy violation: the connection's API key was revoked");
    },
  };

  return {
    gateway,
    serve: (next) => {
      handler = next;
    },
    close: async () => {
      closing = true;
      const open = [...connections.values()];
      for (const { socket } of open) socket.close(1001, 'Going away: the server is stopping');
      // Each close runs its $disconnect; wait for them (briefly) so no record is left behind.
      await Promise.race([
        Promise.all(open.map((connection) => connection.closed)),
        new Promise((resolve) => setTimeout(resolve, 3_000).unref()),
      ]);
      for (const { socket } of open) socket.terminate();
      await new Promise<void>((resolve) => wss.close(() => resolve()));
    },
  };
}

/** API Gateway's route selection for `$request.body.action`. */
function routeOf(body: string): string {
  try {
    const action = (JSON.parse(body) as { action?: unknown } | null)?.action;
    return typeof action === 'string' && ROUTES.has(action) ? action : '$default';
  } catch {
    return '$default';
  }
}
