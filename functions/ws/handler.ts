import { KeyLiveness } from '../core/fanout/key-liveness.js';
import { LiveService, RevokedKeyError } from '../core/fanout/live.js';
import { isJsonObject, parseJson } from '../core/json/json.js';
import { AgentStateError, toProblem } from '../core/kernel/errors.js';
import { isValidId } from '../core/kernel/ids.js';
import { isNamespacePath } from '../core/memory/memory.js';
import { type Grant, keysFromEnv } from '../http/edge/auth.js';
import { ApiKeyStore, hashApiKey } from '../store/access/api-keys.js';
import { DynamoDbLiveStore } from '../store/events/live-store.js';
import { DynamoDbSessionLog } from '../store/log/session-log.js';
import { dynamoDbClient } from '../store/table/client.js';
import { defaultTableName } from '../store/table/table.js';
import { TableClient } from '../store/table/table-client.js';
import { reportExpected, reportUnexpected } from '../telemetry/report.js';
import { instrumented } from '../telemetry/telemetry.js';
import { type ConnectionGateway, connectionGatewayFromEnv } from './connections.js';

/**
 * The WebSocket API's one handler (API Gateway WebSocket API in AWS, functions/local/ws-server.ts
 * locally), dispatched by route:
 *
 * - `$connect` with `?token=<api-key>`: the key's tenant (and, for a key limited to some
 *   agents, those agents) is stored with the connection; an unknown key refuses the connection
 *   (401). Browsers cannot send an Authorization header on a WebSocket, hence the query string.
 * - `{"action":"subscribe","sessionId":"s1"}` → `{"type":"subscribed","sessionId":"s1"}`, then
 *   every change event of the tenant's session s1; `unsubscribe` likewise. With `"agentId"`,
 *   the events come as that agent may see them (typed fields); a limited key's connection must
 *   name one of its agents (`403 forbidden` otherwise).
 * - `$disconnect`: the connection's records go.
 *
 * A connection keeps the hash of its key (a key of the table; those of `AGENTSTATE_API_KEYS`
 * cannot be revoked): a message on a connection whose key was revoked since is answered
 * `401 unauthorized`, and the connection is closed (DeleteConnection; locally the server
 * closes the socket). The change hook does the same at the connection's next event.
 *
 * Errors answer `{"type":"error","status","code","detail"}` and leave the connection open.
 * An error answering a message that named an action and a (well-formed) session carries them
 * too, so a client with several requests in flight can tell which one failed.
 */

/** A WebSocket proxy event, with the query string `$connect` carries. */
export interface WebSocketEvent {
  requestContext: { routeKey: string; connectionId: string; eventType?: string; requestId?: string };
  queryStringParameters?: Record<string, string | undefined> | null;
  body?: string | null;
  isBase64Encoded?: boolean;
}

export interface WebSocketResult {
  statusCode: number;
  body?: string;
}

interface WebSocketDependencies {
  live: LiveService;
  /**
   * What an API key grants (its tenant, and its agents when limited), or null; `keyHash` for a
   * key that can be revoked.
   */
  resolveKey: (apiKey: string) => Promise<(Grant & { keyHash?: string }) | null>;
  /** The stage's Management API (locally the server's shim): closes a revoked key's connection. */
  gateway: ConnectionGateway | undefined;
}

let current: WebSocketDependencies | undefined;

function dependencies(): WebSocketDependencies {
  current ??= dependenciesFromEnv(process.env);
  return current;
}

function dependenciesFromEnv(env: NodeJS.ProcessEnv): WebSocketDependencies {
  const client = dynamoDbClient(env);
  const tableName = env.AGENTSTATE_TABLE ?? defaultTableName;
  // The stores this function uses, not the whole set (createStores): a smaller bundle. The
  // session's log only takes a follow's mark (core/fanout/live.ts), which sets no lifetime.
  const keyStore = new ApiKeyStore(client, tableName);
  const table = new TableClient(client, tableName);
  // As functions/http/dependencies.ts: locally keys come from AGENTSTATE_API_KEYS and the
  // table. In AWS only the table counts, so the local default key (`dev-key`) never opens a
  // connection there.
  const inAws = env.AGENTSTATE_AUTH === 'table' || Boolean(env.AWS_LAMBDA_FUNCTION_NAME);
  const fromEnv = inAws ? null : keysFromEnv(env.AGENTSTATE_API_KEYS);
  const keys = new KeyLiveness((keyHash) => keyStore.isLive(keyHash));
  return {
    live: new LiveService(new DynamoDbLiveStore(table), new DynamoDbSessionLog(table), undefined, (keyHash) => keys.isLive(keyHash)),
    resolveKey: async (apiKey) => {
      const local = await fromEnv?.(apiKey);
      if (local) return local;
      const grant = await keyStore.resolve(apiKey);
      return grant ? { ...grant, keyHash: hashApiKey(apiKey) } : null;
    },
    gateway: connectionGatewayFromEnv(env),
  };
}

/**
 * In a Lambda, every WebSocket event is one log line, the WebSocket API's access log: what
 * happened (connect, message, disconnect), on which connection, and how it was answered.
 */
export const handler = instrumented('websocket', handleEvent, (event: WebSocketEvent, { result }) => ({
  message: 'websocket',
  level: (result?.statusCode ?? 500) >= 500 ? 'warn' : 'info',
  fields: {
    eventType: event.requestContext.eventType ?? null,
    route: event.requestContext.routeKey,
    connectionId: event.requestContext.connectionId,
    status: result?.statusCode ?? 500,
    apiRequestId: event.requestContext.requestId ?? null,
    ...(result && result.statusCode >= 400 && result.body ? errorCodeOf(result.body) : {}),
  },
})) as (event: WebSocketEvent) => Promise<WebSocketResult>;

function errorCodeOf(body: string): { code?: unknown } {
  try {
    return { code: (JSON.parse(body) as { code?: unknown }).code };
  } catch {
    return {};
  }
}

async function handleEvent(event: WebSocketEvent): Promise<WebSocketResult> {
  const { routeKey, connectionId } = event.requestContext;
  let message: Record<string, unknown> | undefined;
  try {
    if (routeKey === '$connect') {
      const token = event.queryStringParameters?.token;
      const grant = token ? await dependencies().resolveKey(token) : null;
      if (!grant) return reply(new AgentStateError('unauthorized', 'connect with ?token=<api-key>'));
      await dependencies().live.connect(connectionId, grant.tenant, grant.agents, grant.keyHash ?? null);
      return { statusCode: 200 };
    }
    if (routeKey === '$disconnect') {
      await dependencies().live.disconnect(connectionId);
      return { statusCode: 200 };
    }
    message = parseMessage(event);
    switch (message.action) {
      case 'subscribe':
        return ok(
          followsNamespace(message)
            ? await dependencies().live.subscribeNamespace(connectionId, message.namespace, message.mode, message.agentId)
            : await dependencies().live.subscribe(connectionId, message.sessionId, message.agentId, message.mode),
        );
      case 'unsubscribe':
        return ok(
          followsNamespace(message)
            ? await dependencies().live.unsubscribeNamespace(connectionId, message.namespace)
            : await dependencies().live.unsubscribe(connectionId, message.sessionId),
        );
      default:
        throw new AgentStateError(
          'invalid_request',
          'send {"action":"subscribe","sessionId":"…"} or {"action":"unsubscribe","sessionId":"…"}',
          {
            field: 'action',
          },
        );
    }
  } catch (error) {
    if (error instanceof RevokedKeyError) return closeRevoked(connectionId, reply(error, message));
    const known = error instanceof AgentStateError ? error : new AgentStateError('internal', 'internal error', {}, { cause: error });
    if (known.code === 'internal') reportUnexpected(`WebSocket ${routeKey} failed`, error);
    else if (known.status >= 500) reportExpected(`WebSocket ${routeKey}: ${known.status} ${known.code}: ${known.message}`);
    return reply(known, message);
  }
}

/**
 * A message on a connection whose key was revoked: the answer is posted first (API Gateway
 * cannot send a route's answer on a connection closed while the route ran), then the
 * connection is closed. Without a gateway (none configured), the answer alone.
 */
async function closeRevoked(connectionId: string, answer: WebSocketResult): Promise<WebSocketResult> {
  const gateway = dependencies().gateway;
  if (!gateway) return answer;
  try {
    await gateway.post(connectionId, answer.body as string);
    await gateway.close(connectionId);
  } catch (error) {
    reportUnexpected('WebSocket: could not close the connection of a revoked key', error);
    return answer;
  }
  return { statusCode: answer.statusCode };
}

function parseMessage(event: WebSocketEvent): Record<string, unknown> {
  const text = event.isBase64Encoded && event.body ? Buffer.from(event.body, 'base64').toString('utf8') : (event.body ?? '');
  let parsed: unknown;
  try {
    // Read as HTTP bodies are: a member named twice is refused, not taken as its last value.
    parsed = parseJson(text);
  } catch {
    throw new AgentStateError('invalid_json', 'messages are JSON objects, each member once, e.g. {"action":"subscribe","sessionId":"s1"}');
  }
  if (!isJsonObject(parsed)) throw new AgentStateError('invalid_request', 'a message is a JSON object with an "action"');
  return parsed;
}

/**
 * Whether a (un)subscribe names a memory namespace (`{"action":"subscribe","namespace":["users","u1"]}`)
 * rather than a session; one message names one or the other.
 */
function followsNamespace(message: Record<string, unknown>): boolean {
  if (message.namespace === undefined) return false;
  if (message.sessionId !== undefined) {
    throw new AgentStateError('invalid_request', 'a subscription names a sessionId or a namespace, not both', { field: 'namespace' });
  }
  return true;
}

function ok(body: unknown): WebSocketResult {
  return { statusCode: 200, body: JSON.stringify(body) };
}

function reply(error: AgentStateError, message?: Record<string, unknown>): WebSocketResult {
  // The problem document's members, under a message `type` of its own.
  const { type: _problemType, title: _title, status, code, detail, ...extras } = toProblem(error);
  const request = {
    ...(message?.action === 'subscribe' || message?.action === 'unsubscribe' ? { action: message.action } : {}),
    // Echoed only when it is an id: the answer never repeats arbitrary input.
    ...(isValidId(message?.sessionId) ? { sessionId: message.sessionId } : {}),
    ...(isNamespacePath(message?.namespace) ? { namespace: message.namespace } : {}),
  };
  return { statusCode: status, body: JSON.stringify({ ...extras, ...request, type: 'error', status, code, detail }) };
}
