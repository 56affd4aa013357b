/**
 * The example worker (examples/worker.ts) served over HTTP, the way a worker runs in production.
 *
 *   PORT=4100 WORKER_SECRET=s3cret npx tsx examples/http-worker.ts
 *
 * Register it locally (http:// is accepted only for localhost by the local server; in AWS the
 * URL must be https:// and public):
 *
 *   curl -s -X PUT $AS/v1/agents/demo-agent -H "$KEY" -H 'content-type: application/json' \
 *     -d '{"worker":{"url":"http://localhost:4100/decide","secret":"s3cret"}}'
 *
 * agentstate POSTs each DecisionRequest as JSON, signed as Standard Webhooks specifies when the
 * agent has a secret: `webhook-id`, `webhook-timestamp` (unix seconds) and
 * `webhook-signature: v1,<base64 HMAC-SHA256(secret, "<id>.<timestamp>.<body>")>`. With
 * WORKER_SECRET set, this server answers 401 to a request without a valid signature, or whose
 * timestamp is more than 5 minutes off (a replayed capture). The signature is computed over the
 * exact bytes received: verify before parsing. (@agentstate/client's `createWorker` does all of
 * this for you.)
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { fileURLToPath } from 'node:url';
import { type DecisionRequest, decide } from './worker.js';

const MAX_BODY_BYTES = 6 * 1024 * 1024;

/** How far `webhook-timestamp` may be from this machine's clock. */
const TOLERANCE_SECONDS = 5 * 60;

type Headers = Record<string, string | string[] | undefined>;
const one = (value: string | string[] | undefined) => (Array.isArray(value) ? value[0] : value);

/**
 * True when the request carries a Standard Webhooks signature of `body` with `secret` (one of
 * the space-separated `v1,` signatures, compared in constant time) and a timestamp within
 * 5 minutes of `now` (epoch ms).
 */
export function verifySignature(secret: string, body: Buffer, headers: Headers, now = Date.now()): boolean {
  const id = one(headers['webhook-id']);
  const timestamp = one(headers['webhook-timestamp']);
  const signatures = one(headers['webhook-signature']);
  if (!id || !timestamp || !signatures || !/^\d+$/.test(timestamp)) return false;
  if (Math.abs(now / 1000 - Number(timestamp)) > TOLERANCE_SECONDS) return false;
  // A whsec_<base64> secret (Standard Webhooks' form) signs with the bytes it encodes.
  const key = /^whsec_[A-Za-z0-9+/]+={0,2}$/.test(secret) ? Buffer.from(secret.slice(6), 'base64') : secret;
  const expected = createHmac('sha256', key).update(`${id}.${timestamp}.`).update(body).digest();
  return signatures.split(' ').some((entry) => {
    const given = Buffer.from(entry.startsWith('v1,') ? entry.slice(3) : '', 'base64');
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
}

function send(response: ServerResponse, status: number, value: unknown): void {
  const text = JSON.stringify(value);
  response.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  response.end(text);
}

async function readBody(request: IncomingMessage): Promise<Buffer | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) return undefined;
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

/** A request handler for the worker; `secret` (if any) must have signed every request. */
export function workerHandler(secret: string | undefined) {
  return async (request: IncomingMessage, response: ServerResponse): Promise<void> => {
    try {
      if (request.method !== 'POST') return send(response, 405, { error: 'POST a DecisionRequest' });
      const body = await readBody(request);
      if (body === undefined) return send(response, 413, { error: 'request too large' });
      if (secret && !verifySignature(secret, body, request.headers)) {
        return send(response, 401, { error: 'bad signature' });
      }
      let decisionRequest: DecisionRequest;
      try {
        decisionRequest = JSON.parse(body.toString('utf8')) as DecisionRequest;
      } catch {
        return send(response, 400, { error: 'body is not JSON' });
      }
      send(response, 200, await decide(decisionRequest));
    } catch (error) {
      console.error('decide failed:', error);
      if (!response.headersSent) send(response, 500, { error: 'decide failed' });
    }
  };
}

// Started directly (not imported): serve on PORT.
if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const port = Number(process.env.PORT ?? 4100);
  const secret = process.env.WORKER_SECRET || undefined;
  const server = createServer((request, response) => void workerHandler(secret)(request, response));
  server.listen(port, () => {
    console.log(`example worker on http://localhost:${port}/decide${secret ? ' (signatures required)' : ''}`);
  });
  const stop = () => server.close(() => process.exit(0));
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}
