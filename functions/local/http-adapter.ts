import { isUtf8 } from 'node:buffer';
import { randomBytes, randomUUID } from 'node:crypto';
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2, Context } from 'aws-lambda';
import { AgentStateError, type ErrorCode, toProblem } from '../core/kernel/errors.js';
import { type Route, type RouteGroup, routeKey, routes } from '../http/contract/routes.js';
import type { HttpHandler } from '../http/edge/types.js';
import { runAs } from './running-function.js';

/**
 * Local stand-in for API Gateway HTTP API (payload format 2.0) in front of the Lambda
 * handlers: node:http request → event → handler → structured result → node:http response.
 * It follows what API Gateway does, not what would be convenient, so code that works here
 * works behind the real thing.
 */

/** Lambda's synchronous invocation payload limit; API Gateway gives up at the same size. */
export const MAX_BODY_BYTES = 6 * 1024 * 1024;

/** API Gateway's longest integration timeout; the handlers' context reports time left against it. */
const TIMEOUT_MS = 29_000;

export interface RouteMatch {
  route: Route;
  /** Decoded, as API Gateway passes them. */
  pathParameters: Record<string, string>;
}

interface CompiledRoute {
  route: Route;
  segments: Array<{ literal: string } | { param: string }>;
  /** A last `{name+}`: it takes every remaining segment (at least one). */
  greedy: string | null;
  literals: number;
}

// Literal segments beat parameters, as in API Gateway: `/a/b` wins over `/a/{x}`, and both
// over a greedy `/a/{x+}`.
const compiled: CompiledRoute[] = routes
  .map((route) => {
    const parts = route.path.split('/').slice(1);
    const greedy = /^\{(\w+)\+\}$/.exec(parts[parts.length - 1] ?? '')?.[1] ?? null;
    const segments = (greedy ? parts.slice(0, -1) : parts).map((segment) => {
      const param = /^\{(\w+)\}$/.exec(segment)?.[1];
      return param ? { param } : { literal: segment };
    });
    return { route, segments, greedy, literals: segments.filter((segment) => 'literal' in segment).length };
  })
  .sort((a, b) => b.literals - a.literals || Number(a.greedy !== null) - Number(b.greedy !== null));

/**
 * The route for a method and raw (still percent-encoded) path, or null. Segments are matched
 * before decoding, so `%2F` stays inside its path parameter instead of splitting it. A greedy
 * parameter gets its segments each decoded and joined by `/`, as API Gateway passes it.
 * Throws `invalid_request` for malformed percent-encoding inside a parameter.
 */
export function matchRoute(method: string, rawPath: string): RouteMatch | null {
  const parts = rawPath.split('/').slice(1);
  for (const { route, segments, greedy } of compiled) {
    if (route.method !== method) continue;
    if (greedy ? parts.length <= segments.length : segments.length !== parts.length) continue;
    const pathParameters: Record<string, string> = {};
    const matches = segments.every((segment, index) => {
      const part = parts[index] as string;
      if ('literal' in segment) return segment.literal === part;
      if (part === '') return false;
      pathParameters[segment.param] = decodePathSegment(part);
      return true;
    });
    if (!matches) continue;
    if (greedy) {
      const rest = parts.slice(segments.length);
      if (rest.some((part) => part === '')) continue;
      // Each segment decoded once, on its own: a `/` sent as `%2F` is a character of its
      // segment, never a separator, so it stays `%2F` (which no id may hold: 400 invalid_id).
      pathParameters[greedy] = rest.map((part) => decodePathSegment(part).replaceAll('/', '%2F')).join('/');
    }
    return { route, pathParameters };
  }
  return null;
}

export interface RawRequest {
  method: string;
  /** The request target: path and query string, as sent. */
  url: string;
  /** node's `IncomingMessage.rawHeaders`: names as sent, repeats kept, alternating name/value. */
  rawHeaders: string[];
  httpVersion: string;
  sourceIp: string;
  body: Buffer;
}

export interface EventDetails {
  requestId: string;
  now: Date;
}

/** Builds the event API Gateway would send to the Lambda integration of `match.route`. */
export function toApiGatewayEvent(
  request: RawRequest,
  match: RouteMatch,
  details: EventDetails = { requestId: newRequestId(), now: new Date() },
): APIGatewayProxyEventV2 {
  const { rawPath, rawQueryString } = splitTarget(request.url);
  const { headers, cookies } = collectHeaders(request.rawHeaders);
  const key = routeKey(match.route);
  const hostname = (headers.host ?? 'localhost').replace(/:\d+$/, '');
  const port = /:(\d+)$/.exec(headers.host ?? '')?.[1] ?? '80';

  // API Gateway's own headers; Powertools and friends read them.
  headers['x-forwarded-for'] = headers['x-forwarded-for'] ? `${headers['x-forwarded-for']}, ${request.sourceIp}` : request.sourceIp;
  headers['x-forwarded-port'] = port;
  headers['x-forwarded-proto'] = 'http';
  headers['x-amzn-trace-id'] ??= traceId(details.now);

  const queryStringParameters = parseQuery(rawQueryString);
  return {
    version: '2.0',
    routeKey: key,
    rawPath,
    rawQueryString,
    ...(cookies.length > 0 ? { cookies } : {}),
    headers,
    ...(queryStringParameters ? { queryStringParameters } : {}),
    ...(Object.keys(match.pathParameters).length > 0 ? { pathParameters: match.pathParameters } : {}),
    requestContext: {
      accountId: '000000000000',
      apiId: 'local',
      domainName: hostname,
      domainPrefix: hostname.split('.')[0] ?? hostname,
      http: {
        method: request.method,
        path: rawPath,
        protocol: `HTTP/${request.httpVersion}`,
        sourceIp: request.sourceIp,
        userAgent: headers['user-agent'] ?? '',
      },
      requestId: details.requestId,
      routeKey: key,
      stage: '$default',
      time: clfTime(details.now),
      timeEpoch: details.now.getTime(),
    },
    ...eventBody(request.body, headers['content-type']),
  };
}

/** The media types API Gateway HTTP APIs hand a function as text; every other body arrives as base64. */
const TEXT_MEDIA_TYPE = /^(?:text\/[^;]*|application\/(?:json|xml|javascript))\s*(?:;|$)/i;

/**
 * The body as API Gateway passes it: text for text types, base64 for the rest (a merge patch
 * included). Bytes that are not UTF-8 go as base64 whatever the type, so the handler sees them
 * as sent and can refuse them, rather than text with U+FFFD where they were.
 */
function eventBody(body: Buffer, contentType: string | undefined): { body?: string; isBase64Encoded: boolean } {
  if (body.length === 0) return { isBase64Encoded: false };
  if (TEXT_MEDIA_TYPE.test(contentType ?? '') && isUtf8(body)) return { body: body.toString('utf8'), isBase64Encoded: false };
  return { body: body.toString('base64'), isBase64Encoded: true };
}

/** Writes a handler's result the way API Gateway maps it to an HTTP response. */
function writeResult(res: ServerResponse, result: APIGatewayProxyStructuredResultV2, requestId: string): void {
  const body =
    result.body === undefined ? undefined : result.isBase64Encoded ? Buffer.from(result.body, 'base64') : Buffer.from(result.body, 'utf8');
  res.statusCode = result.statusCode ?? 200;
  // The handlers set it on their answers; this covers the adapter's own (404, 413, 500).
  res.setHeader('x-content-type-options', 'nosniff');
  for (const [name, value] of Object.entries(result.headers ?? {})) res.setHeader(name, String(value));
  if (result.cookies && result.cookies.length > 0) res.setHeader('set-cookie', result.cookies);
  res.setHeader('apigw-requestid', requestId);
  res.end(body);
}

export interface RequestListenerOptions {
  /** Where handler failures are logged. @default console.error */
  logError?: (message: string, error: unknown) => void;
}

/** A node:http request listener serving `handlers` by the route table, as API Gateway would. */
export function createRequestListener(handlers: Record<RouteGroup, HttpHandler>, options: RequestListenerOptions = {}): RequestListener {
  const logError = options.logError ?? ((message, error) => console.error(message, error));
  return (req, res) => {
    void serve(req, res, handlers, logError);
  };
}

async function serve(
  req: IncomingMessage,
  res: ServerResponse,
  handlers: Record<RouteGroup, HttpHandler>,
  logError: (message: string, error: unknown) => void,
): Promise<void> {
  const requestId = newRequestId();
  const method = req.method ?? 'GET';
  const target = req.url ?? '/';
  const { rawPath } = splitTarget(target);

  let match: RouteMatch | null;
  let body: Buffer | 'too-large';
  try {
    match = matchRoute(method, rawPath);
    // API Gateway answers an unknown path and a known path with another method alike.
    if (!match) return writeProblem(res, 'not_found', `no route for ${method} ${rawPath}`, requestId);
    body = await readBody(req, MAX_BODY_BYTES);
  } catch (error) {
    if (AgentStateError.match(error)) return writeProblem(res, error.code, error.message, requestId);
    return void res.destroy(); // the client went away mid-body: nobody to answer
  }
  if (body === 'too-large') {
    // The rest of the body is read and dropped, not kept. Hanging up instead would make the
    // kernel reset the connection over the unread bytes, and the client would lose the 413
    // (curl, which sends `Expect: 100-continue`, does). node's requestTimeout bounds a body
    // that never ends.
    req.resume();
    return writeProblem(res, 'payload_too_large', `request body exceeds ${MAX_BODY_BYTES} bytes`, requestId);
  }

  try {
    const event = toApiGatewayEvent(
      {
        method,
        url: target,
        rawHeaders: req.rawHeaders,
        httpVersion: req.httpVersion,
        sourceIp: req.socket.remoteAddress?.replace(/^::ffff:/, '') ?? '127.0.0.1',
        body,
      },
      match,
      { requestId, now: new Date() },
    );
    const { group } = match.route;
    const result = await runAs(group, () => handlers[group](event, lambdaContext(group)));
    if (typeof result !== 'object' || result === null) throw new Error(`handler returned ${String(result)}`);
    writeResult(res, result, requestId);
  } catch (error) {
    // Like a Lambda that throws behind API Gateway: a 500 that shows nothing of the failure.
    logError(`agentstate: ${method} ${target} failed (request ${requestId}):`, error);
    if (res.headersSent) return void res.destroy();
    writeProblem(res, 'internal', 'internal error', requestId);
  }
}

function writeProblem(res: ServerResponse, code: ErrorCode, detail: string, requestId: string): void {
  const problem = toProblem(new AgentStateError(code, detail));
  writeResult(
    res,
    {
      statusCode: problem.status,
      headers: { 'content-type': 'application/problem+json' },
      body: JSON.stringify(problem),
    },
    requestId,
  );
}

/**
 * Reads the body up to `limit` bytes. A declared Content-Length over the limit is refused
 * before reading anything; a chunked body is refused as soon as it crosses the limit, so at
 * most `limit` bytes are ever held.
 */
function readBody(req: IncomingMessage, limit: number): Promise<Buffer | 'too-large'> {
  if (Number(req.headers['content-length'] ?? 0) > limit) return Promise.resolve('too-large');
  return new Promise((resolveBody, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size <= limit) return void chunks.push(chunk);
      cleanUp();
      chunks.length = 0;
      resolveBody('too-large');
    };
    const onEnd = () => {
      cleanUp();
      resolveBody(Buffer.concat(chunks));
    };
    const onFailure = (error?: Error) => {
      cleanUp();
      reject(error ?? new Error('client aborted the request'));
    };
    const cleanUp = () => {
      req.off('data', onData).off('end', onEnd).off('error', onFailure).off('aborted', onFailure);
    };
    req.on('data', onData).on('end', onEnd).on('error', onFailure).on('aborted', onFailure);
  });
}

function splitTarget(target: string): { rawPath: string; rawQueryString: string } {
  const question = target.indexOf('?');
  return question === -1
    ? { rawPath: target, rawQueryString: '' }
    : { rawPath: target.slice(0, question), rawQueryString: target.slice(question + 1) };
}

function decodePathSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw new AgentStateError('invalid_request', `malformed percent-encoding in path segment "${segment}"`);
  }
}

/**
 * Header names lowercased, repeats joined by ',' (node's own `req.headers` drops repeats of
 * some headers and joins others with ', '). Cookies move to their own list, as in format 2.0.
 */
function collectHeaders(rawHeaders: string[]): { headers: Record<string, string>; cookies: string[] } {
  const headers: Record<string, string> = {};
  const cookies: string[] = [];
  for (let index = 0; index + 1 < rawHeaders.length; index += 2) {
    const name = (rawHeaders[index] as string).toLowerCase();
    const value = rawHeaders[index + 1] as string;
    if (name === 'cookie') {
      cookies.push(
        ...value
          .split(';')
          .map((cookie) => cookie.trim())
          .filter((cookie) => cookie.length > 0),
      );
      continue;
    }
    headers[name] = name in headers ? `${headers[name]},${value}` : value;
  }
  return { headers, cookies };
}

/** Decoded values, repeated keys joined by ','; undefined when there are none, as API Gateway omits it. */
function parseQuery(rawQueryString: string): Record<string, string> | undefined {
  if (rawQueryString === '') return undefined;
  const parameters: Record<string, string> = {};
  for (const [name, value] of new URLSearchParams(rawQueryString)) {
    parameters[name] = name in parameters ? `${parameters[name]},${value}` : value;
  }
  return Object.keys(parameters).length > 0 ? parameters : undefined;
}

/**
 * API Gateway request ids look like `Jx7T5gKCoAMEVbA=`. The id is also sent back as
 * `apigw-requestid` and printed with a handler's failure, to tie the two together.
 */
function newRequestId(): string {
  return randomBytes(10).toString('base64');
}

function traceId(now: Date): string {
  const seconds = Math.floor(now.getTime() / 1000).toString(16);
  return `Root=1-${seconds}-${randomBytes(12).toString('hex')}`;
}

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

/** `12/Mar/2020:19:03:58 +0000`, the Common Log Format time of `requestContext.time`. */
function clfTime(now: Date): string {
  const pad = (value: number) => String(value).padStart(2, '0');
  return (
    `${pad(now.getUTCDate())}/${MONTHS[now.getUTCMonth()]}/${now.getUTCFullYear()}:` +
    `${pad(now.getUTCHours())}:${pad(now.getUTCMinutes())}:${pad(now.getUTCSeconds())} +0000`
  );
}

/** The Lambda context the handlers get; middy reads `getRemainingTimeInMillis` for its timeout. */
function lambdaContext(group: RouteGroup): Context {
  const deadline = Date.now() + TIMEOUT_MS;
  const functionName = `agentstate-local-${group}`;
  const unsupported = () => {
    throw new Error('callback-style completion is not supported; return a promise');
  };
  return {
    callbackWaitsForEmptyEventLoop: false,
    functionName,
    functionVersion: '$LATEST',
    invokedFunctionArn: `arn:aws:lambda:us-east-1:000000000000:function:${functionName}`,
    memoryLimitInMB: '1024',
    awsRequestId: randomUUID(),
    logGroupName: `/aws/lambda/${functionName}`,
    logStreamName: 'local',
    getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
    done: unsupported,
    fail: unsupported,
    succeed: unsupported,
  };
}
