/**
 * Calls the Lambda handlers in-process with the very event the local server would build for
 * an HTTP request (functions/local/http-adapter.ts): route matching, path decoding, header
 * folding and the 2.0 payload shape are the adapter's own code, not a copy of it.
 *
 * Used by the benchmark and by the fuzz and fault tests, which need the handlers without a
 * socket in between.
 */
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2, Context } from 'aws-lambda';
import { AgentStateError, toProblem } from '../functions/core/kernel/errors.js';
import type { RouteGroup } from '../functions/http/contract/routes.js';
import type { HttpHandler } from '../functions/http/edge/types.js';
import { matchRoute, type RouteMatch, toApiGatewayEvent } from '../functions/local/http-adapter.js';

export interface InProcessRequest {
  method: string;
  /** Path and query string, percent-encoded as on the wire, e.g. `/v1/sessions/s1/state?node=a1`. */
  url: string;
  /** Header names as sent; values as sent. */
  headers?: Record<string, string> | Array<[string, string]>;
  /** The body as sent: text (UTF-8 on the wire) or bytes. */
  body?: string | Buffer;
}

export interface InProcessResponse {
  status: number;
  headers: Record<string, string>;
  text: string;
  /** The parsed body, or undefined when it is empty or not JSON. */
  // biome-ignore lint/suspicious/noExplicitAny: the tests that call the handlers read the body each route answers, field by field.
  json: any;
}

/** An event ready for its handler, or the answer the adapter gives before any handler runs. */
export type Prepared =
  | { kind: 'event'; group: RouteGroup; event: APIGatewayProxyEventV2; context: Context }
  | { kind: 'answered'; response: InProcessResponse };

let requestCounter = 0;

/** Builds the API Gateway v2 event for a request, exactly as the local server would. */
export function prepare(request: InProcessRequest): Prepared {
  const [rawPath] = request.url.split('?', 1) as [string];
  let match: RouteMatch | null;
  try {
    match = matchRoute(request.method, rawPath);
  } catch (error) {
    if (AgentStateError.match(error)) return { kind: 'answered', response: problem(error) };
    throw error;
  }
  if (!match) {
    return {
      kind: 'answered',
      response: problem(new AgentStateError('not_found', `no route for ${request.method} ${rawPath}`)),
    };
  }
  const pairs = Array.isArray(request.headers) ? request.headers : Object.entries(request.headers ?? {});
  const body =
    request.body === undefined ? Buffer.alloc(0) : Buffer.isBuffer(request.body) ? request.body : Buffer.from(request.body, 'utf8');
  const hasLength = pairs.some(([name]) => name.toLowerCase() === 'content-length');
  const rawHeaders = [
    'host',
    'localhost:4000',
    ...pairs.flat(),
    ...(body.length > 0 && !hasLength ? ['content-length', String(body.length)] : []),
  ];
  const requestId = `bench-${++requestCounter}`;
  const event = toApiGatewayEvent(
    { method: request.method, url: request.url, rawHeaders, httpVersion: '1.1', sourceIp: '127.0.0.1', body },
    match,
    { requestId, now: new Date() },
  );
  return { kind: 'event', group: match.route.group, event, context: lambdaContext(match.route.group, requestId) };
}

/** Runs a prepared request through its handler. */
export async function run(handlers: Record<RouteGroup, HttpHandler>, prepared: Prepared): Promise<InProcessResponse> {
  if (prepared.kind === 'answered') return prepared.response;
  const handler = handlers[prepared.group];
  if (!handler) throw new Error(`no handler for route group ${prepared.group}`);
  return toResponse(await handler(prepared.event, prepared.context));
}

/** `prepare` then `run`. */
export function invoke(handlers: Record<RouteGroup, HttpHandler>, request: InProcessRequest): Promise<InProcessResponse> {
  return run(handlers, prepare(request));
}

function toResponse(result: APIGatewayProxyStructuredResultV2): InProcessResponse {
  const text = result.body === undefined ? '' : result.isBase64Encoded ? Buffer.from(result.body, 'base64').toString('utf8') : result.body;
  let json: unknown;
  try {
    json = text === '' ? undefined : JSON.parse(text);
  } catch {
    json = undefined;
  }
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(result.headers ?? {})) headers[name.toLowerCase()] = String(value);
  return { status: result.statusCode ?? 200, headers, text, json };
}

function problem(error: AgentStateError): InProcessResponse {
  const body = toProblem(error);
  return {
    status: error.status,
    headers: { 'content-type': 'application/problem+json' },
    text: JSON.stringify(body),
    json: body,
  };
}

/** A Lambda context as the local server makes one (middy reads the remaining time). */
function lambdaContext(group: string, requestId: string): Context {
  const deadline = Date.now() + 29_000;
  const unsupported = () => {
    throw new Error('callback-style completion is not supported');
  };
  return {
    callbackWaitsForEmptyEventLoop: false,
    functionName: `agentstate-bench-${group}`,
    functionVersion: '$LATEST',
    invokedFunctionArn: `arn:aws:lambda:us-east-1:000000000000:function:agentstate-bench-${group}`,
    memoryLimitInMB: '1024',
    awsRequestId: requestId,
    logGroupName: `/aws/lambda/agentstate-bench-${group}`,
    logStreamName: 'bench',
    getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
    done: unsupported,
    fail: unsupported,
    succeed: unsupported,
  };
}
