import type { RequestListener } from 'node:http';
import { corsPolicy } from '../http/edge/cors.js';

/**
 * What API Gateway does for an HTTP API with a CORS configuration, for the local server
 * (functions/http/edge/cors.ts): an `OPTIONS` preflight from an allowed origin is answered `204`
 * with the policy, before any route or key is looked at; an answer to an allowed origin says
 * which origin may read it and which headers. A request from any other origin gets no CORS
 * header at all, so the browser keeps the answer from the page. No origins: CORS is off and
 * nothing here changes a request.
 */
export function withCors(listener: RequestListener, origins: readonly string[]): RequestListener {
  if (origins.length === 0) return listener;
  const anyOrigin = origins.includes('*');
  const allowed = (origin: string | undefined): origin is string => origin !== undefined && (anyOrigin || origins.includes(origin));
  return (req, res) => {
    const origin = req.headers.origin;
    const preflight = req.method === 'OPTIONS' && req.headers['access-control-request-method'] !== undefined;
    // Caches must not hand one origin's answer to another.
    res.setHeader('vary', 'Origin');
    if (preflight) {
      const headers: Record<string, string> = { 'content-length': '0' };
      if (allowed(origin)) {
        headers['access-control-allow-origin'] = anyOrigin ? '*' : origin;
        headers['access-control-allow-methods'] = corsPolicy.allowMethods.join(', ');
        headers['access-control-allow-headers'] = corsPolicy.allowHeaders.join(', ');
        headers['access-control-max-age'] = String(corsPolicy.maxAgeSeconds);
      }
      res.writeHead(204, headers);
      res.end();
      return;
    }
    if (allowed(origin)) {
      res.setHeader('access-control-allow-origin', anyOrigin ? '*' : origin);
      res.setHeader('access-control-expose-headers', corsPolicy.exposeHeaders.join(', '));
    }
    listener(req, res);
  };
}
