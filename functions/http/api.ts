import middy from '@middy/core';
import type { APIGatewayProxyStructuredResultV2, Context } from 'aws-lambda';
import type { AllowedAgents } from '../core/agents/acting-agent.js';
import type { Json } from '../core/json/json.js';
import { AgentStateError } from '../core/kernel/errors.js';
import type { AnswerKeeper } from '../core/model/ports.js';
import { ensureSealingKey } from '../store/access/key-ring.js';
import { ROUTE_TIMEOUT_MS } from './contract/routes.js';
import { idempotency } from './edge/idempotency.js';
import { lambdaSizedAnswers } from './edge/lambda-payload.js';
import { type ApiEvent, actingAgent, authenticate, jsonBody, problemErrors } from './edge/middleware.js';
import { loggedRequests } from './edge/request-log.js';
import { securedHandler } from './edge/security-headers.js';
import type { HttpHandler } from './edge/types.js';
import * as parts from './parts/middleware.js';
import { type Dependencies, groupDependencies, type Parts } from './wiring.js';

/** What a route function gets: the parsed request and the services its group names (`D`). */
export interface RouteInput<D = unknown> {
  tenant: string;
  deps: D;
  /** The parsed JSON body of a write; undefined when none was sent. Read it with request.ts. */
  body: Json | undefined;
  path: (name: string) => string;
  query: (name: string) => string | undefined;
  /**
   * Every query parameter as sent, in order, a repeated one as often as it came (decoded from
   * the raw query string: API Gateway joins a repeated one's values with commas), for the
   * parameters a prefix names (`metadata.<key>`).
   */
  queryPairs: () => Array<[string, string]>;
  header: (name: string) => string | undefined;
  /** The agent the caller acts as (`X-Agent-Id`, checked against the key); null for none. */
  caller: string | null;
  /** The agents the caller's key may act as; null when it is not limited to any. */
  allowedAgents: AllowedAgents;
  /**
   * Under an `Idempotency-Key`: what a write hands its service so that the change it makes keeps
   * the answer `shape` makes of its result, and the key needs no write of its own (middleware.ts);
   * undefined without a key.
   */
  keeper: <R>(shape: (result: R) => APIGatewayProxyStructuredResultV2) => AnswerKeeper<R> | undefined;
  /** How long the function may still run (the Lambda context's; without one, the route functions' timeout from the request's start). */
  remainingMs: () => number;
}

export type RouteFunction<D = unknown> = (input: RouteInput<D>) => Promise<APIGatewayProxyStructuredResultV2>;

export interface HandlerOptions {
  /** Largest accepted body; larger is refused before parsing. */
  bodyLimitBytes?: number;
  /** The code a too-large body answers with (state routes say `state_too_large`). */
  tooLarge?: 'payload_too_large' | 'state_too_large';
  /** The limit a too-large answer names, when not the body limit (the state limit). */
  reportedLimitBytes?: number;
}

/** Bodies beyond 1 MiB are never legitimate on routes that carry no state (those set their own limit). */
const DEFAULT_BODY_LIMIT = 1024 * 1024;

/**
 * A Lambda handler serving a group of routes, dispatched by API Gateway's `routeKey`. `group`
 * names the services the routes use (wiring.ts): the function builds those and bundles
 * nothing else. The middleware stack is the same for every group: problem+json errors, API
 * key, JSON body, acting agent, Idempotency-Key (middleware.ts).
 */
export function createHttpHandler<K extends keyof Dependencies>(
  group: Parts<K>,
  routeFunctions: Record<string, RouteFunction<Pick<Dependencies, K>>>,
  options: HandlerOptions = {},
): HttpHandler {
  const dependencies = groupDependencies({
    ...group,
    idempotency: parts.idempotency,
    resolveKey: parts.resolveKey,
  } as Parts<K | 'idempotency' | 'resolveKey'>);
  const dispatch = async (event: ApiEvent, context?: Context): Promise<APIGatewayProxyStructuredResultV2> => {
    const started = Date.now();
    const route = routeFunctions[event.routeKey];
    if (!route) throw new AgentStateError('not_found', `no route for ${event.requestContext.http.method} ${event.rawPath}`);
    // Secrets and cursors are sealed with the deployment's key: found once per process.
    await ensureSealingKey();
    return route({
      tenant: event.tenant ?? '',
      deps: dependencies(),
      body: event.body,
      // Decoded once, by API Gateway (or the local server): `x%2541` arrives as `x%41`, an invalid id.
      path: (name) => event.pathParameters?.[name] ?? '',
      query: (name) => event.queryStringParameters?.[name],
      queryPairs: () => [...new URLSearchParams(event.rawQueryString ?? '')],
      header: (name) => event.headers?.[name.toLowerCase()],
      caller: event.caller ?? null,
      allowedAgents: event.allowedAgents,
      keeper: (shape) => {
        const keep = event.keepAnswer;
        return keep ? (result) => keep(shape(result)) : undefined;
      },
      remainingMs: () => context?.getRemainingTimeInMillis?.() ?? started + ROUTE_TIMEOUT_MS - Date.now(),
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
    // The acting agent before Idempotency-Key: a replay must never answer a request its key
    // may not make (the key's own permissions are checked first, and replays are per key).
    .use(actingAgent())
    .use(idempotency(() => dependencies().idempotency));
  // Outside middy, so that every answer gets them: errors, replays, early answers.
  // The request's log line outermost, so that it sees the answer as the client does.
  return loggedRequests(securedHandler(lambdaSizedAnswers(handler as unknown as HttpHandler), { tenantData: true }));
}
