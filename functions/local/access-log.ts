import type { RequestListener } from 'node:http';

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
      log(`${req.method ?? 'GET'} ${target} ${res.statusCode} ${ms < 10 ? ms.toFixed(1) : Math.round(ms)} ms`);
    });
    listener(req, res);
  };
}
