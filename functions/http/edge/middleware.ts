import type { MiddlewareObj } from '@middy/core';
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2, Context } from 'aws-lambda';
import { type ActingAgentWording, requireActingAgent } from '../../core/agents/acting-agent.js';
import { type Json, JsonTextError, parseJson, stringifyJson } from '../../core/json/json.js';
import { AgentStateError, LateDetailError, toProblem } from '../../core/kernel/errors.js';
import { requireId } from '../../core/kernel/ids.js';
import type { KeptAnswer } from '../../core/model/ports.js';
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
  /**
   * Under an `Idempotency-Key` the request claimed: how a write keeps its answer in the change
   * it makes (the idempotency middleware then keeps it nowhere else).
   */
  keepAnswer?: (response: APIGatewayProxyStructuredResultV2) => KeptAnswer | null;
};
export type Middleware = MiddlewareObj<ApiEvent, APIGatewayProxyStructuredResultV2, Error, Context>;

/**
 * How long a client should wait before it retries a throttled request (API.md section 14):
 * DynamoDB refills a partition's and a table's capacity each second, and @agentstate/client
 * waits at least this long before its retry.
 */
const THROTTLED_RETRY_AFTER_SECONDS = 1;

export function problemResponse(error: AgentStateError): APIGatewayProxyStructuredResultV2 {
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

export const WRITE_METHODS = new Set(['POST', 'PUT', 'PATCH']);

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
