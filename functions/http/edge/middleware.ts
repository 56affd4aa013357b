import { createHash } from 'node:crypto';
import type { MiddlewareObj } from '@middy/core';
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2, Context } from 'aws-lambda';
import { type ActingAgentWording, requireActingAgent } from '../../core/agents/acting-agent.js';
import { canonicalJson, type Json, JsonTextError, parseJson, stringifyJson } from '../../core/json/json.js';
import { AgentStateError, LateDetailError, toProblem } from '../../core/kernel/errors.js';
import { requireId } from '../../core/kernel/ids.js';
import type { IdempotencyStore, StoredResponse } from '../../core/model/ports.js';
import { reportExpected, reportUnexpected } from '../../telemetry/report.js';
import { bearerToken, type KeyResolver, unauthorized } from './auth.js';

/** The event after our middlewares ran: the caller's tenant is known, the body parsed. */
export type ApiEvent = Omit<APIGatewayProxyEventV2, 'body'> & {
  /** A write's parsed JSON body (undefined when none was sent); other requests' raw text. */
  body?: Json;
  tenant?: string;
  /** The agents the key may act as; null when it may act as any (or as none). */
  allowedAgents?: string[] | null;
  /** The agent the caller acts as (`X-Agent-Id`, checked against the key); null for none. */
  caller?: string | null;
};
type Middleware = MiddlewareObj<ApiEvent, APIGatewayProxyStructuredResultV2, Error, Context>;

/**
 * How long a client should wait before it retries a throttled request (API.md section 14):
 * DynamoDB refills a partition's and a table's capacity each second, and @agentstate/client
 * waits at least this long before its retry.
 */
const THROTTLED_RETRY_AFTER_SECONDS = 1;

function problemResponse(error: AgentStateError): APIGatewayProxyStructuredResultV2 {
  return {
    statusCode: error.status,
    headers: {
      'content-type': 'application/problem+json',
      ...(error.code === 'throttled' ? { 'retry-after': String(THROTTLED_RETRY_AFTER_SECONDS) } : {}),
    },
    body: stringifyJson(toProblem(error)),
  };
}

/**
 * Turns every error into an RFC 9457 problem document. Domain errors keep their code; anything
 * else is a `500 internal` whose details go to the log, never to the client.
 */
export function problemErrors(): Middleware {
  return {
    onError: async (request) => {
      if (request.response !== undefined && request.error === undefined) return;
      const error = asAgentStateError(request.error instanceof LateDetailError ? await detailOf(request.error) : request.error);
      // A bug shows its stack; an error the service answers by design (a worker that failed,
      // the table unavailable) is one line, and the request's own log line says it in a Lambda.
      if (error.code === 'internal') reportUnexpected('request failed', request.error);
      else if (error.status >= 500) reportExpected(`${error.status} ${error.code}: ${error.message}`);
      request.response = problemResponse(error);
    },
  };
}

/**
 * A late error's detail, or the error as it was thrown when working the detail out failed (the
 * code that does so is a chunk loaded on first use, and a broken package may lack it): the
 * caller still gets the answer its request earned, and the log says what is broken.
 */
async function detailOf(error: LateDetailError): Promise<AgentStateError> {
  try {
    return await error.described();
  } catch (cause) {
    reportUnexpected(`could not work out the detail of a ${error.status} ${error.code}`, cause);
    return error;
  }
}

function asAgentStateError(error: unknown): AgentStateError {
  if (error instanceof AgentStateError) return error;
  return new AgentStateError('internal', 'internal error', {}, { cause: error });
}

/**
 * Resolves `Authorization: Bearer <key>` to a tenant. Behind API Gateway's Lambda authorizer
 * the tenant arrives in the authorizer context; locally the key map resolves it.
 */
export function authenticate(resolveKey: () => KeyResolver): Middleware {
  return {
    before: async (request) => {
      const context = (request.event.requestContext as { authorizer?: { lambda?: { tenant?: unknown; agents?: unknown } } }).authorizer
        ?.lambda;
      if (typeof context?.tenant === 'string') {
        request.event.tenant = context.tenant;
        // The authorizer passes agents as a comma-separated string (ids have no commas).
        request.event.allowedAgents = typeof context.agents === 'string' && context.agents ? context.agents.split(',') : null;
        return;
      }
      const token = bearerToken(request.event.headers?.authorization);
      const grant = token ? await resolveKey()(token) : null;
      if (!grant) throw unauthorized();
      request.event.tenant = grant.tenant;
      request.event.allowedAgents = grant.agents;
    },
  };
}

/** How a limited key's refusal reads for `X-Agent-Id` and the other ways a request names its agent. */
export const HEADER_WORDING: ActingAgentWording = {
  missing: 'this key acts as an agent: send X-Agent-Id with one of its agents',
  refused: (agentId) => `this key may not act as agent ${agentId}`,
};

/**
 * `X-Agent-Id`, the agent the caller acts as: a valid id (`400 invalid_id`), and for a key
 * limited to some agents one of them, always present (`403 forbidden`, API.md section 7).
 * Handlers find it as `event.caller`.
 */
export function actingAgent(): Middleware {
  return {
    before: async (request) => {
      const { event } = request;
      const agentId = event.headers?.['x-agent-id'];
      if (agentId !== undefined) requireId(agentId, 'X-Agent-Id');
      requireActingAgent(event.allowedAgents, agentId, HEADER_WORDING);
      event.caller = agentId ?? null;
    },
  };
}

const WRITE_METHODS = new Set(['POST', 'PUT', 'PATCH']);

/**
 * Parses JSON bodies of writes (API.md section 1), refusing, in this order: an oversize body
 * before reading it (`413`); a type other than `application/json` or `application/…+json`, or
 * a `charset` other than UTF-8 (`415`); bytes that are not UTF-8, and text that is not JSON or
 * has an object with a key twice (`400 invalid_json`). Numbers are kept verbatim (core/json/json.ts).
 * A write without a body reaches the handler with `body` undefined, so each route decides
 * whether it needs one.
 */
export function jsonBody(options: {
  limitBytes: number;
  tooLarge?: 'payload_too_large' | 'state_too_large';
  /** The limit to name in the problem, when it is not the body limit itself (the state limit). */
  reportedLimitBytes?: number;
}): Middleware {
  return {
    before: async (request) => {
      const { event } = request;
      if (!WRITE_METHODS.has(event.requestContext.http.method)) return;
      const raw = event.body;
      if (raw === undefined || raw === null || raw === '') {
        event.body = undefined;
        return;
      }
      const encoded = String(raw);
      const bytes = event.isBase64Encoded ? Buffer.byteLength(encoded, 'base64') : Buffer.byteLength(encoded, 'utf8');
      if (bytes > options.limitBytes) {
        const code = options.tooLarge ?? 'payload_too_large';
        const limitBytes = options.reportedLimitBytes ?? options.limitBytes;
        const what = code === 'state_too_large' ? 'state' : 'body';
        throw new AgentStateError(code, `the body is ${bytes} bytes; the ${what} limit is ${limitBytes} bytes`, { limitBytes });
      }
      requireJsonMediaType(event.headers?.['content-type']);
      const text = event.isBase64Encoded ? utf8Text(Buffer.from(encoded, 'base64')) : encoded;
      try {
        event.body = parseJson(text);
      } catch (error) {
        if (error instanceof JsonTextError) throw new AgentStateError('invalid_json', `the body is not valid JSON: ${error.message}`);
        throw error;
      }
    },
  };
}

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * The body's bytes as text, refused with `400 invalid_json` when they are not UTF-8 (never
 * patched over with U+FFFD). Behind API Gateway this sees every body it passes as bytes
 * (base64), which is every JSON type but `application/json`; the local server passes any body
 * that is not UTF-8 as bytes.
 */
function utf8Text(bytes: Buffer): string {
  try {
    return utf8.decode(bytes);
  } catch {
    throw new AgentStateError('invalid_json', 'the body is not valid UTF-8');
  }
}

/** `application/json` or `application/<anything>+json`, with no charset or UTF-8; else `415`. */
function requireJsonMediaType(header: string | undefined): void {
  const [type = '', ...parameters] = (header ?? '').split(';');
  const mediaType = type.trim().toLowerCase();
  if (!/^application\/(?:[\w.!#$&^-]+\+)?json$/.test(mediaType)) {
    throw new AgentStateError(
      'unsupported_media_type',
      'send the body as application/json (or application/merge-patch+json for a merge patch)',
    );
  }
  for (const parameter of parameters) {
    const [name = '', value = ''] = parameter.split('=');
    if (name.trim().toLowerCase() !== 'charset') continue;
    const charset = value
      .trim()
      .replace(/^"(.*)"$/, '$1')
      .toLowerCase();
    if (charset !== 'utf-8') {
      throw new AgentStateError('unsupported_media_type', `JSON bodies are UTF-8; charset=${charset} is not supported`);
    }
  }
}

const IDEMPOTENCY_LOCK_MS = 60_000;
const idempotencyKeyPattern = /^[\x21-\x7e]{1,255}$/;

/**
 * `Idempotency-Key` on POST, PUT and PATCH (API.md section 1): the first request under a key
 * runs and its answer is kept for 24 hours; a retry gets that answer back and writes nothing;
 * the same key with a different request is `422 idempotency_key_reused`. A request that fails
 * (`5xx`, which writes nothing) lets go of its key, so its retry runs again. A request that
 * neither answered nor let go within its lock (it died, or its answer could not be kept) may
 * have written: its retries are refused with `409 conflict`, never run again.
 *
 * Replays belong to the API key that made the first request: the key is part of what makes
 * two requests "the same", so another key of the tenant reusing the Idempotency-Key gets
 * `422`, never the stored answer (which its own authorization checks might have refused).
 * It runs after the acting agent (`X-Agent-Id`) is checked against the key.
 */
export function idempotency(store: () => IdempotencyStore): Middleware {
  const claims = new WeakMap<object, { key: string; fingerprint: string }>();
  return {
    before: async (request) => {
      const { event } = request;
      const key = event.headers?.['idempotency-key'];
      if (key === undefined || !WRITE_METHODS.has(event.requestContext.http.method)) return;
      if (!idempotencyKeyPattern.test(key)) {
        throw new AgentStateError('invalid_request', 'Idempotency-Key must be 1–255 visible ASCII characters', {
          field: 'Idempotency-Key',
        });
      }
      const tenant = event.tenant as string;
      const fingerprint = fingerprintOf(event);
      const holder = await store().claim(tenant, key, fingerprint, IDEMPOTENCY_LOCK_MS);
      if (holder.outcome === 'claimed') {
        claims.set(request, { key, fingerprint });
        return;
      }
      if (holder.fingerprint !== fingerprint) {
        throw new AgentStateError('idempotency_key_reused', 'this Idempotency-Key was used with a different request in the last 24 hours');
      }
      if (holder.outcome === 'done') {
        const { statusCode, headers, body } = holder.response;
        return { statusCode, headers: { ...headers, 'idempotency-replayed': 'true' }, body };
      }
      if (holder.outcome === 'unfinished') {
        // Its holder may have written before it died: running the request again could undo
        // what was acknowledged since. Refused until the key expires; the caller decides.
        throw new AgentStateError(
          'conflict',
          'the first request with this Idempotency-Key never finished, so whether it was applied is unknown; it is not run again. Read what you meant to change, then send a new key',
          { field: 'Idempotency-Key' },
        );
      }
      throw new AgentStateError('conflict', 'a request with this Idempotency-Key is still in progress; retry later');
    },
    after: async (request) => {
      const claim = claims.get(request);
      const response = request.response;
      if (!claim || !response) return;
      const tenant = request.event.tenant as string;
      const statusCode = response.statusCode ?? 200;
      if (statusCode >= 500) {
        await store().release(tenant, claim.key, claim.fingerprint);
        return;
      }
      const stored: StoredResponse = {
        statusCode,
        headers: Object.fromEntries(Object.entries(response.headers ?? {}).map(([name, value]) => [name, String(value)])),
        body: response.body ?? '',
      };
      try {
        await store().complete(tenant, claim.key, claim.fingerprint, stored);
      } catch (error) {
        // The write is done: answer it. The key stays claimed until its lock lapses, so a
        // retry in the meantime is told to wait rather than running the write twice.
        console.warn('agentstate: could not store an idempotent response', error);
      }
    },
    onError: async (request) => {
      const claim = claims.get(request);
      if (!claim) return;
      try {
        await store().release(request.event.tenant as string, claim.key, claim.fingerprint);
      } catch (error) {
        // The lock then expires by itself; the original error is what the client must see.
        console.warn('agentstate: could not release an idempotency key', error);
      }
    },
  };
}

/**
 * What makes two requests "the same": the API key, method, path, query, acting agent, the
 * preconditions (If-Match, If-None-Match), whether the body is a JSON Patch (`[]` is a JSON
 * Patch that changes nothing, or a merge patch that replaces the state) and the body's JSON
 * meaning. The key enters as a digest of its digest, so the claim item holds nothing that
 * resolves a key (keys are stored as sha256 digests, api-keys.ts). If-None-Match and the JSON
 * Patch mark enter only when present, so every other request keeps the fingerprint it had
 * before they were compared, and a retry made across that upgrade still replays.
 */
function fingerprintOf(event: ApiEvent): string {
  const query = new URLSearchParams(event.rawQueryString ?? '');
  query.sort();
  const token = bearerToken(event.headers?.authorization) ?? '';
  const keyDigest = createHash('sha256').update(createHash('sha256').update(token, 'utf8').digest()).digest('hex');
  return createHash('sha256')
    .update(keyDigest)
    .update('\n')
    .update(event.requestContext.http.method)
    .update('\n')
    .update(event.rawPath)
    .update('\n')
    .update(query.toString())
    .update('\n')
    .update(event.headers?.['x-agent-id'] ?? '')
    .update('\n')
    .update(event.headers?.['if-match'] ?? '')
    .update('\n')
    .update(event.body === undefined ? '' : canonicalJson(event.body))
    .update(meaningMarks(event))
    .digest('hex');
}

/** What else changes a request's meaning, as `\n`-led lines; empty for most requests. */
function meaningMarks(event: ApiEvent): string {
  const ifNoneMatch = event.headers?.['if-none-match'];
  const mediaType = (event.headers?.['content-type'] ?? '').split(';')[0]?.trim().toLowerCase();
  return `${ifNoneMatch === undefined ? '' : `\nif-none-match:${ifNoneMatch}`}${mediaType === 'application/json-patch+json' ? '\njson-patch' : ''}`;
}
