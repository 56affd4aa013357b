import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { type InvocationSummary, instrumented, type Metric } from '../../telemetry/telemetry.js';
import type { HttpHandler } from './types.js';

const WRITE_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/**
 * Every request of a keyed route group, as one JSON log line in a Lambda (with Lambda's
 * request id, `function_request_id`):
 *
 *   {"level":"INFO","message":"request","method":"PATCH","route":"PATCH /v1/sessions/{sid}/state",
 *    "path":"/v1/sessions/demo/state","status":200,"tenant":"acme","sessionId":"demo",
 *    "agentId":null,"apiRequestId":"…","latencyMs":41.3,"function_request_id":"…",…}
 *
 * An error answer adds its `code` and `detail` (a 5xx is a warning, an internal error an
 * error with its stack, logged where it was caught). `apiRequestId` is API Gateway's id of the
 * request, the `requestId` of the stage's access log. Outermost, around the headers and the
 * middy stack, so it sees every answer: errors, replays, early answers.
 */
export function loggedRequests(handler: HttpHandler): HttpHandler {
  return instrumented('request', handler, summarizeRequest) as HttpHandler;
}

function summarizeRequest(
  event: APIGatewayProxyEventV2,
  { result }: { result?: APIGatewayProxyStructuredResultV2 | string },
): InvocationSummary {
  const response = typeof result === 'object' ? result : undefined;
  const status = response?.statusCode ?? 500;
  const method = event.requestContext.http.method;
  const authorizer = (event.requestContext as { authorizer?: { lambda?: { tenant?: unknown } } }).authorizer?.lambda;
  const problem = status >= 400 ? problemOf(response?.body) : undefined;
  const metrics: Array<readonly [Metric, number]> = [];
  if (WRITE_METHODS.has(method) && status < 400) metrics.push(['Writes', 1]);
  if (status === 412) metrics.push(['VersionMismatches', 1]);
  return {
    message: 'request',
    level: status >= 500 ? 'warn' : 'info',
    fields: {
      method,
      route: event.routeKey,
      path: event.rawPath,
      status,
      tenant: typeof authorizer?.tenant === 'string' ? authorizer.tenant : null,
      sessionId: event.pathParameters?.sid ?? null,
      agentId: event.headers?.['x-agent-id'] ?? null,
      apiRequestId: event.requestContext.requestId,
      ...(problem ?? {}),
    },
    metrics,
    annotations: { route: event.routeKey, status },
  };
}

function problemOf(body: string | undefined): { code?: unknown; detail?: unknown } | undefined {
  try {
    const { code, detail } = JSON.parse(body ?? '') as { code?: unknown; detail?: unknown };
    return { code, detail };
  } catch {
    return undefined;
  }
}
