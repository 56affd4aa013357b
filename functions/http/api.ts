import middy from '@middy/core';
import type { APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import * as z from 'zod';
import { AgentStateError } from '../core/errors.js';
import { requireId } from '../core/ids.js';
import type { SessionScope } from '../core/model.js';
import { dependencies, type Dependencies } from './dependencies.js';
import { authenticate, idempotency, jsonBody, problemErrors, type ApiEvent } from './middleware.js';
import { safeDecode } from './public.js';
import type { HttpHandler } from './types.js';

export { json, noContent } from './responses.js';

/** What a route function gets: the parsed request and the service dependencies. */
export interface RouteInput {
  event: ApiEvent;
  tenant: string;
  deps: Dependencies;
  /** The parsed JSON body of a write; undefined when none was sent. */
  body: unknown;
  path: (name: string) => string;
  query: (name: string) => string | undefined;
  header: (name: string) => string | undefined;
  /** The agent the caller acts as (`X-Agent-Id`, checked against the key); null for none. */
  caller: string | null;
}

export type RouteFunction = (input: RouteInput) => Promise<APIGatewayProxyStructuredResultV2>;

export interface HandlerOptions {
  /** Largest accepted body; larger is refused before parsing. */
  bodyLimitBytes?: number;
  /** The code a too-large body answers with (state routes say `state_too_large`). */
  tooLarge?: 'payload_too_large' | 'state_too_large';
  /** The limit a too-large answer names, when not the body limit (the state limit). */
  reportedLimitBytes?: number;
}

/** Bodies beyond 1 MiB are never legitimate here: the largest thing stored is 256 KiB of state. */
const DEFAULT_BODY_LIMIT = 1024 * 1024;

/**
 * A Lambda handler serving a group of routes, dispatched by API Gateway's `routeKey`. The
 * middleware stack is the same for every group: problem+json errors, API key, JSON body,
 * Idempotency-Key.
 */
export function createHttpHandler(routeFunctions: Record<string, RouteFunction>, options: HandlerOptions = {}): HttpHandler {
  const dispatch = async (event: ApiEvent): Promise<APIGatewayProxyStructuredResultV2> => {
    const route = routeFunctions[event.routeKey];
    if (!route) throw new AgentStateError('not_found', `no route for ${event.requestContext.http.method} ${event.rawPath}`);
    const agentId = event.headers?.['x-agent-id'];
    if (agentId !== undefined) requireId(agentId, 'X-Agent-Id');
    // A key limited to some agents must say which of them it acts as (API.md section 7).
    const allowed = event.allowedAgents;
    if (allowed && (agentId === undefined || !allowed.includes(agentId))) {
      throw new AgentStateError(
        'forbidden',
        agentId === undefined
          ? 'this key acts as an agent: send X-Agent-Id with one of its agents'
          : `this key may not act as agent ${agentId}`,
        { agents: allowed },
      );
    }
    return route({
      event,
      tenant: event.tenant ?? '',
      deps: dependencies(),
      body: event.body,
      path: (name) => safeDecode(event.pathParameters?.[name] ?? ''),
      query: (name) => event.queryStringParameters?.[name],
      header: (name) => event.headers?.[name.toLowerCase()],
      caller: agentId ?? null,
    });
  };

  const handler = middy<ApiEvent, APIGatewayProxyStructuredResultV2>(dispatch)
    .use(problemErrors())
    .use(authenticate(() => dependencies().resolveKey))
    .use(
      jsonBody({
        limitBytes: options.bodyLimitBytes ?? DEFAULT_BODY_LIMIT,
        tooLarge: options.tooLarge,
        reportedLimitBytes: options.reportedLimitBytes,
      }),
    )
    .use(idempotency(() => dependencies().idempotency));
  return handler as unknown as HttpHandler;
}

// ---- request parsing --------------------------------------------------------------------

export function sessionScope(input: RouteInput): SessionScope {
  return { tenant: input.tenant, sessionId: requireId(input.path('sid'), 'sessionId') };
}

/** Validates a body with a zod schema; problems become `400 invalid_request` listing each. */
export function parseBody<T>(schema: z.ZodType<T>, body: unknown): T {
  const result = schema.safeParse(body);
  if (result.success) return result.data;
  const errors = result.error.issues.map((issue) => ({ path: issue.path.join('.'), message: issue.message }));
  const first = errors[0];
  throw new AgentStateError(
    'invalid_request',
    first ? `${first.path || 'body'}: ${first.message}` : 'the body is not valid for this route',
    { errors },
  );
}

/** `limit` and `cursor` of a list (API.md section 1). */
export function pagination(input: RouteInput): { limit: number; cursor?: string } {
  const raw = input.query('limit');
  let limit = 50;
  if (raw !== undefined) {
    limit = Number(raw);
    if (!/^\d+$/.test(raw) || limit < 1 || limit > 500) {
      throw new AgentStateError('invalid_request', 'limit must be an integer from 1 to 500', { field: 'limit' });
    }
  }
  const cursor = input.query('cursor');
  return cursor === undefined ? { limit } : { limit, cursor };
}

/** A non-negative integer from a path or query parameter. */
export function versionNumber(raw: string, field: string): number {
  const value = Number(raw);
  if (!/^\d{1,15}$/.test(raw) || !Number.isSafeInteger(value)) {
    throw new AgentStateError('invalid_request', `${field} must be a non-negative integer`, { field });
  }
  return value;
}

/** Zod schema of an identifier; failures are reported as `400 invalid_id` by `requireIds`. */
export const idSchema = z.string().regex(/^[A-Za-z0-9._:~@-]{1,128}$/, 'must be 1–128 characters of A-Z a-z 0-9 . _ : ~ @ -');

/**
 * Identifier problems deserve their own code (`invalid_id`) even inside bodies, so bodies with
 * ids are checked for them before the rest of the schema.
 */
export function requireIds(body: unknown, fields: readonly string[]): void {
  if (typeof body !== 'object' || body === null) return;
  for (const field of fields) {
    const value = (body as Record<string, unknown>)[field];
    if (value !== undefined && value !== null) requireId(value, field);
  }
}
