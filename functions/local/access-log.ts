import type { RequestListener } from 'node:http';
import type { WebSocketHandler } from './ws-server.js';

/**
 * One line per request for the local server, written when the answer is finished:
 *
 *   GET /v1/sessions/demo/state 200 3 ms
 *
 * The query string is kept (it says which node or version was read), except a `token`, which
 * is a key. Errors the handlers expect (a worker that failed, a conflict) are these lines and
 * nothing more; only an internal error adds its stack, from the handler's own log.
 */
export function withAccessLog(listener: RequestListener, log: (line: string) => void): RequestListener {
  return (req, res) => {
    const started = process.hrtime.bigint();
    const target = (req.url ?? '/').replace(/([?&]token=)[^&]*/g, '$1…');
    res.on('finish', () => {
      const ms = Number(process.hrtime.bigint() - started) / 1e6;
      log(`${req.method ?? 'GET'} ${target} ${res.statusCode} ${duration(ms)}`);
    });
    listener(req, res);
  };
}

/**
 * The WebSocket API's access log: one line per event the handler answered, with its route
 * and connection (the key in the `$connect` URL is never printed):
 *
 *   WS $connect Zm9vYmFyYmF6 200 4.2 ms
 *   WS subscribe Zm9vYmFyYmF6 200 1.9 ms
 *   WS $disconnect Zm9vYmFyYmF6 200 0.8 ms
 */
export function withWebSocketAccessLog(handler: WebSocketHandler, log: (line: string) => void): WebSocketHandler {
  return async (event) => {
    const started = process.hrtime.bigint();
    const { routeKey, connectionId } = event.requestContext;
    let status = 500;
    try {
      const result = await handler(event);
      status = result.statusCode;
      return result;
    } finally {
      log(`WS ${routeKey} ${connectionId} ${status} ${duration(Number(process.hrtime.bigint() - started) / 1e6)}`);
    }
  };
}

function duration(ms: number): string {
  return `${ms < 10 ? ms.toFixed(1) : Math.round(ms)} ms`;
}
