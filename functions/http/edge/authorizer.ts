import type { APIGatewayRequestAuthorizerEventV2, APIGatewaySimpleAuthorizerWithContextResult } from 'aws-lambda';
import { ApiKeyStore, type KeyGrant } from '../../store/access/api-keys.js';
import { dynamoDbClient } from '../../store/table/client.js';
import { defaultTableName } from '../../store/table/table.js';
import { instrumented } from '../../telemetry/telemetry.js';
import { bearerToken } from './auth.js';

/**
 * What the handlers find in `event.requestContext.authorizer.lambda` once a key is accepted.
 * `agents` is a comma-separated list of agent ids (ids never contain a comma), present only
 * when the key is limited to some agents; a plain string keeps the context portable.
 */
export interface AuthorizerContext {
  tenant: string;
  agents?: string;
}

export type AuthorizerResult = APIGatewaySimpleAuthorizerWithContextResult<AuthorizerContext | Record<string, never>>;

/**
 * An unknown key is let through *without a tenant*: the handler then answers the contract's
 * `401 unauthorized` problem document. A refusal here would make API Gateway answer its own
 * `403 {"message":"Forbidden"}`, which no client of API.md expects.
 */
const noTenant: AuthorizerResult = { isAuthorized: true, context: {} };

/**
 * The API Gateway Lambda authorizer (simple responses, payload 2.0): `Authorization: Bearer
 * <key>` → the key's tenant. Unknown, revoked and malformed keys get no tenant; a lookup that
 * fails throws, so API Gateway answers 500 and nothing is let through. API Gateway caches an
 * answer per Authorization header for the authorizer's TTL.
 */
export function createAuthorizer(resolve: (apiKey: string) => Promise<KeyGrant | null>) {
  return async (event: APIGatewayRequestAuthorizerEventV2): Promise<AuthorizerResult> => {
    const token = bearerToken(event.headers?.authorization ?? event.identitySource?.[0]);
    if (!token) return noTenant;
    const grant = await resolve(token);
    if (!grant) return noTenant;
    return {
      isAuthorized: true,
      context: { tenant: grant.tenant, ...(grant.agents ? { agents: grant.agents.join(',') } : {}) },
    };
  };
}

let store: ApiKeyStore | undefined;

const authorize = createAuthorizer(async (apiKey) => {
  store ??= new ApiKeyStore(dynamoDbClient(process.env), process.env.AGENTSTATE_TABLE ?? defaultTableName);
  return store.resolve(apiKey);
});

/** One log line per uncached authorization: which tenant the key named, if any (never the key). */
export const handler = instrumented('authorizer', authorize, (event: APIGatewayRequestAuthorizerEventV2, { result }) => ({
  message: 'authorization',
  level: 'info',
  fields: {
    route: event.routeKey,
    apiRequestId: event.requestContext.requestId,
    tenant: (result?.context as Partial<AuthorizerContext> | undefined)?.tenant ?? null,
  },
})) as (event: APIGatewayRequestAuthorizerEventV2) => Promise<AuthorizerResult>;
