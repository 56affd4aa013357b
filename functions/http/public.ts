import middy from '@middy/core';
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { AgentStateError } from '../core/kernel/errors.js';
import { type ApiEvent, problemErrors } from './edge/middleware.js';
import { securedHandler } from './edge/security-headers.js';
import type { HttpHandler } from './edge/types.js';

/** What a public route function gets: no tenant, no body, no services. */
export interface PublicInput {
  path: (name: string) => string;
  header: (name: string) => string | undefined;
}

export type PublicRouteFunction = (input: PublicInput) => Promise<APIGatewayProxyStructuredResultV2>;

/**
 * A Lambda handler for routes that need no API key and touch no table: `/health` and the
 * inspector's files. It routes and answers errors exactly as `createHttpHandler` does, but
 * imports neither the services nor the AWS SDK nor zod, so these functions bundle to a few
 * kilobytes and start without loading a megabyte they never use.
 */
export function createPublicHandler(routeFunctions: Record<string, PublicRouteFunction>): HttpHandler {
  const dispatch = async (event: APIGatewayProxyEventV2): Promise<APIGatewayProxyStructuredResultV2> => {
    const route = routeFunctions[event.routeKey];
    if (!route) throw new AgentStateError('not_found', `no route for ${event.requestContext.http.method} ${event.rawPath}`);
    return route({
      path: (name) => event.pathParameters?.[name] ?? '',
      header: (name) => event.headers?.[name.toLowerCase()],
    });
  };
  const handler = middy<ApiEvent, APIGatewayProxyStructuredResultV2>(
    dispatch as (event: ApiEvent) => Promise<APIGatewayProxyStructuredResultV2>,
  ).use(problemErrors()) as unknown as HttpHandler;
  return securedHandler(handler, { tenantData: false });
}
