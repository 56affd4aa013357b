import { decode, encode } from './codec.js';
import { signingKeys, type VerifyWebhookOptions, verifyWith } from './signature.js';
import type { DecisionRequest, DecisionResponse, Json } from './types.js';

/**
 * The worker side of `decide`: agentstate POSTs a DecisionRequest to the agent's worker,
 * signed as Standard Webhooks specifies (`webhook-id`, `webhook-timestamp`,
 * `webhook-signature: v1,<base64 HMAC-SHA256(secret, "<id>.<timestamp>.<body>")>`, see
 * signature.ts). `createWorker` verifies that signature (constant-time, before parsing) and
 * refuses a timestamp more than 5 minutes off, so a captured request cannot be replayed; then
 * it parses and checks the request, runs `decide`, and answers its DecisionResponse. Adapters
 * serve it from Node's http server and from AWS Lambda.
 *
 * ```ts
 * const worker = createWorker(async (request) => ({ state: { turns: 1 } }), { secret: process.env.WORKER_SECRET });
 * http.createServer(toNodeHandler(worker)).listen(4100);   // or: export const handler = toLambdaHandler(worker);
 * ```
 */

// biome-ignore lint/suspicious/noConfusingVoidType: \`void\` lets a worker that answers nothing be a function with no return statement.
export type Decide<S = Json> = (request: DecisionRequest<S>) => DecisionResponse<S> | void | Promise<DecisionResponse<S> | void>;

export interface WorkerOptions {
  /**
   * The agent's worker secret (several while rotating). Required: a missing secret (e.g. an
   * unset environment variable) throws, unless `allowUnsigned` says requests need no signature.
   */
  secret: string | readonly string[] | undefined;
  /** Accept requests without a valid signature (local experiments only). @default false */
  allowUnsigned?: boolean;
  /** The largest body accepted. @default 6 MiB (Lambda's payload limit) */
  maxBodyBytes?: number;
  /** Called with errors `decide` throws (the answer is a 500 without details). @default console.error */
  onError?: (error: unknown, request: DecisionRequest<unknown>) => void;
  /** How far a signed timestamp may be from this worker's clock, and the clock. @default 5 minutes, Date.now */
  signature?: VerifyWebhookOptions;
  /**
   * Decode the request's `state`, `agent`, `proposed`, `profile` and `shared` with the client's
   * codec (tagged values such as `{"$as":"Date","$v":"…"}` arrive as a `Date`, a `Map`, …, as a
   * session handle reads them), and encode the answer's `state` and `agent` the same way, so a
   * worker and the clients of its sessions see the same values. `false` hands over the JSON as
   * sent. @default true
   */
  codec?: boolean;
}

/** An HTTP answer of the worker. */
export interface WorkerReply {
  status: number;
  headers: Record<string, string>;
  body: string;
}

export interface AgentStateWorker {
  /** Verifies, parses and decides one HTTP request: raw body and headers (any case). */
  handle(request: {
    body: string | Uint8Array;
    headers: Record<string, string | string[] | undefined>;
    method?: string;
  }): Promise<WorkerReply>;
  /** Decides a DecisionRequest that arrived without a signature through a trusted channel (a direct Lambda invocation). */
  invoke(request: unknown): Promise<DecisionResponse>;
}

/** The header that carries the signature `createWorker` checks (Standard Webhooks). */
export const SIGNATURE_HEADER = 'webhook-signature';

const DEFAULT_MAX_BODY_BYTES = 6 * 1024 * 1024;

export function createWorker<S = Json>(decide: Decide<S>, options: WorkerOptions): AgentStateWorker {
  const secrets = (typeof options.secret === 'string' ? [options.secret] : [...(options.secret ?? [])]).filter(
    (secret) => secret.length > 0,
  );
  if (secrets.length === 0 && !options.allowUnsigned) {
    throw new TypeError('createWorker needs the agent secret ({ secret }); pass { allowUnsigned: true } to accept unsigned requests');
  }
  const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  const keys = signingKeys(secrets);
  const onError = options.onError ?? ((error: unknown) => console.error('agentstate worker: decide failed', error));

  const codec = options.codec ?? true;

  async function run(request: DecisionRequest<S>): Promise<DecisionResponse> {
    const answer: unknown = await decide(codec ? decodedRequest(request) : request);
    if (answer === undefined) return {};
    // agentstate would refuse anything else as a malformed answer (502): say why here.
    if (answer === null || typeof answer !== 'object' || Array.isArray(answer))
      throw new TypeError('decide must return a DecisionResponse object (or nothing)');
    return codec ? encodedAnswer(answer as DecisionResponse) : (answer as DecisionResponse);
  }

  return {
    async handle({ body, headers, method }) {
      if (method !== undefined && method.toUpperCase() !== 'POST')
        return reply(405, { error: 'POST a DecisionRequest' }, { allow: 'POST' });
      const bytes = typeof body === 'string' ? new TextEncoder().encode(body) : body;
      if (bytes.byteLength > maxBodyBytes) return reply(413, { error: 'request too large' });
      if (secrets.length > 0) {
        const verdict = await verifyWith(await keys, { body: bytes, headers }, options.signature);
        if (!verdict.ok) {
          const error = verdict.reason === 'stale-timestamp' ? 'stale or missing webhook-timestamp' : 'bad signature';
          return reply(401, { error });
        }
      }
      let parsed: unknown;
      try {
        parsed = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
      } catch {
        return reply(400, { error: 'the body is not JSON' });
      }
      const problem = decisionRequestProblem(parsed);
      if (problem) return reply(400, { error: problem });
      try {
        return reply(200, await run(parsed as DecisionRequest<S>));
      } catch (error) {
        onError(error, parsed as DecisionRequest<unknown>);
        return reply(500, { error: 'decide failed' });
      }
    },

    async invoke(request) {
      const problem = decisionRequestProblem(request);
      if (problem) throw new TypeError(`not a DecisionRequest: ${problem}`);
      return run(request as DecisionRequest<S>);
    },
  };
}

/* ------------------------------------------------------------------ Node http */

/** The parts of Node's `IncomingMessage` the adapter reads. */
export interface NodeRequestLike extends AsyncIterable<Uint8Array | string> {
  method?: string | undefined;
  headers: Record<string, string | string[] | undefined>;
}

/** The parts of Node's `ServerResponse` the adapter writes. */
export interface NodeResponseLike {
  headersSent?: boolean;
  writeHead(status: number, headers: Record<string, string>): unknown;
  end(body?: string): unknown;
}

/** A `(req, res)` listener for `http.createServer` (or express, …) serving the worker. */
export function toNodeHandler(
  worker: AgentStateWorker,
  options: { maxBodyBytes?: number } = {},
): (request: NodeRequestLike, response: NodeResponseLike) => Promise<void> {
  const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  return async (request, response) => {
    let answer: WorkerReply;
    try {
      const chunks: Uint8Array[] = [];
      let size = 0;
      let tooLarge = false;
      for await (const chunk of request) {
        const bytes = typeof chunk === 'string' ? new TextEncoder().encode(chunk) : chunk;
        size += bytes.byteLength;
        if (size > maxBodyBytes) {
          tooLarge = true;
          break;
        }
        chunks.push(bytes);
      }
      answer = tooLarge
        ? reply(413, { error: 'request too large' })
        : await worker.handle({
            body: concat(chunks, size),
            headers: request.headers,
            ...(request.method ? { method: request.method } : {}),
          });
    } catch {
      answer = reply(500, { error: 'decide failed' });
    }
    if (response.headersSent) return;
    response.writeHead(answer.status, { ...answer.headers, 'content-length': String(new TextEncoder().encode(answer.body).byteLength) });
    response.end(answer.body);
  };
}

/* ------------------------------------------------------------------ AWS Lambda */

/** An API Gateway (REST v1 or HTTP v2) or Lambda function URL event. */
export interface LambdaHttpEvent {
  body?: string | null;
  isBase64Encoded?: boolean;
  headers?: Record<string, string | undefined> | null;
  /** REST API (v1). */
  httpMethod?: string;
  /** HTTP API (v2) and function URLs. */
  requestContext?: { http?: { method?: string } } & Record<string, unknown>;
}

/** What an HTTP-invoked Lambda answers. */
export interface LambdaHttpResult {
  statusCode: number;
  headers: Record<string, string>;
  body: string;
}

/**
 * A Lambda handler serving the worker, for each way agentstate can reach it:
 * - behind API Gateway (REST or HTTP API) or a function URL (`https://` worker URL): the event
 *   carries the raw body and the signature header, verified as over HTTP;
 * - a direct invocation (`lambda:<arn>` worker URL): the event is the DecisionRequest itself
 *   and the answer is the DecisionResponse. IAM authorizes such calls (only principals allowed
 *   to invoke the function can), and there is no signature to check.
 */
export function toLambdaHandler(worker: AgentStateWorker): (event: unknown) => Promise<LambdaHttpResult | DecisionResponse> {
  return async (event) => {
    if (!isHttpEvent(event)) return worker.invoke(event);
    const raw = event.body ?? '';
    const body = event.isBase64Encoded ? base64Bytes(raw) : raw;
    const method = event.requestContext?.http?.method ?? event.httpMethod;
    const answer = await worker.handle({ body, headers: event.headers ?? {}, ...(method ? { method } : {}) });
    return { statusCode: answer.status, headers: answer.headers, body: answer.body };
  };
}

function isHttpEvent(event: unknown): event is LambdaHttpEvent {
  if (event === null || typeof event !== 'object') return false;
  const candidate = event as Record<string, unknown>;
  // A DecisionRequest has session_id and trigger; an HTTP event has headers and a request context.
  if ('session_id' in candidate && 'trigger' in candidate) return false;
  return 'requestContext' in candidate || 'httpMethod' in candidate || 'headers' in candidate;
}

/* ------------------------------------------------------------------ helpers */

/** The request with its values decoded (the trigger and the messages are passed on as sent). */
function decodedRequest<S>(request: DecisionRequest<S>): DecisionRequest<S> {
  const raw = request as DecisionRequest<Json>;
  return {
    ...request,
    state: decode<S>(raw.state),
    agent: decode(raw.agent),
    proposed: decode(raw.proposed),
    profile: decode(raw.profile),
    shared: decode(raw.shared),
  };
}

/** The answer with its `state` and `agent` encoded; `null` and absent members keep their meaning. */
function encodedAnswer(answer: DecisionResponse): DecisionResponse {
  return {
    ...answer,
    ...(answer.state === undefined || answer.state === null ? {} : { state: encode(answer.state) }),
    ...(answer.agent === undefined ? {} : { agent: encode(answer.agent) }),
  };
}

function base64Bytes(text: string): Uint8Array {
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let index = 0; index < binary.length; index++) bytes[index] = binary.charCodeAt(index);
  return bytes;
}

function concat(chunks: readonly Uint8Array[], size: number): Uint8Array {
  const out = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    out.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return out;
}

function reply(status: number, body: unknown, headers: Record<string, string> = {}): WorkerReply {
  return { status, headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) };
}

/** Why `value` is not a DecisionRequest, or undefined when it is one. */
function decisionRequestProblem(value: unknown): string | undefined {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return 'a DecisionRequest is a JSON object';
  const request = value as Record<string, unknown>;
  if (typeof request.session_id !== 'string') return 'session_id must be a string';
  if (typeof request.decision_id !== 'string') return 'decision_id must be a string';
  const trigger = request.trigger;
  if (trigger === null || typeof trigger !== 'object' || typeof (trigger as { type?: unknown }).type !== 'string')
    return 'trigger must be an object with a string type';
  if (!Array.isArray(request.messages)) return 'messages must be an array';
  return undefined;
}
