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
 * agentstate POSTs each DecisionRequest as JSON, signed with
 * `X-AgentState-Signature: sha256=<hex HMAC-SHA256(secret, body)>` when the agent has a secret.
 * With WORKER_SECRET set, this server answers 401 to a request without a valid signature.
 * The signature is computed over the exact bytes received: verify before parsing.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { fileURLToPath } from 'node:url';
import { type DecisionRequest, decide } from './worker.js';

const MAX_BODY_BYTES = 6 * 1024 * 1024;

/** True when `header` is `sha256=<hex HMAC-SHA256(secret, body)>`, compared in constant time. */
export function verifySignature(secret: string, body: Buffer, header: string | undefined): boolean {
  if (typeof header !== 'string') return false;
  const expected = Buffer.from(`sha256=${createHmac('sha256', secret).update(body).digest('hex')}`, 'utf8');
  const given = Buffer.from(header, 'utf8');
  return given.length === expected.length && timingSafeEqual(given, expected);
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
      if (secret && !verifySignature(secret, body, request.headers['x-agentstate-signature'] as string | undefined)) {
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
