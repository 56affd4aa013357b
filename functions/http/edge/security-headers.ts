import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { bearerToken } from './auth.js';
import type { HttpHandler } from './types.js';

/**
 * The headers every answer carries (API.md section 1), added around a whole handler so that
 * no route, error, replay or early answer of a middleware can leave them out:
 *
 * - `X-Content-Type-Options: nosniff` on every response: a browser never reads a JSON answer
 *   (or an error quoting what a caller sent) as HTML or script;
 * - `Cache-Control: no-store` on every answer of a keyed route (tenant data, and errors about
 *   it), unless the route chose its own: no shared cache or browser disk keeps a tenant's data;
 * - `WWW-Authenticate: Bearer realm="agentstate"` on a `401` (RFC 6750 section 3; with
 *   `error="invalid_token"` when a token was sent but is not a valid key).
 */

const NOSNIFF = { 'x-content-type-options': 'nosniff' } as const;

type Result = APIGatewayProxyStructuredResultV2;

function hasHeader(result: Result, name: string): boolean {
  return Object.keys(result.headers ?? {}).some((header) => header.toLowerCase() === name);
}

/** The same result with the headers above added (never replacing ones the route set). */
function withSecurityHeaders(result: Result, request: { tenantData: boolean; authorization: string | undefined }): Result {
  const headers: Record<string, string | number | boolean> = { ...NOSNIFF, ...result.headers };
  if (request.tenantData && !hasHeader(result, 'cache-control')) headers['cache-control'] = 'no-store';
  if (result.statusCode === 401 && !hasHeader(result, 'www-authenticate')) {
    headers['www-authenticate'] =
      bearerToken(request.authorization) === null ? 'Bearer realm="agentstate"' : 'Bearer realm="agentstate", error="invalid_token"';
  }
  return { ...result, headers };
}

/** `handler` with `withSecurityHeaders` on each of its answers. */
export function securedHandler(handler: HttpHandler, options: { tenantData: boolean }): HttpHandler {
  return async (event: APIGatewayProxyEventV2, context) =>
    withSecurityHeaders(await handler(event, context), { tenantData: options.tenantData, authorization: event.headers?.authorization });
}
