import {
  ApiGatewayManagementApiClient,
  DeleteConnectionCommand,
  GoneException,
  PostToConnectionCommand,
} from '@aws-sdk/client-apigatewaymanagementapi';
import { AWS_CALL_TIMEOUTS } from '../store/table/client.js';
import { traced } from '../telemetry/telemetry.js';

/**
 * Sends a message to one WebSocket connection: in AWS through the API Gateway Management API
 * (PostToConnection), locally through the local server's shim (functions/local/ws-server.ts).
 * `'gone'` means the client has disconnected, and its records may be removed.
 */
export interface ConnectionGateway {
  post(connectionId: string, data: string): Promise<'sent' | 'gone'>;
  /**
   * Closes the connection from the server's side (its API key was revoked): in AWS
   * DeleteConnection, locally the socket's close. A connection already gone is no error.
   */
  close(connectionId: string): Promise<void>;
}

function isGone(error: unknown): boolean {
  const status = (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
  return error instanceof GoneException || (error as Error).name === 'GoneException' || status === 410;
}

/** The gateway of a deployed WebSocket API stage (its callback URL, `https://…/<stage>`). */
export function managementApiGateway(client: ApiGatewayManagementApiClient): ConnectionGateway {
  return {
    async post(connectionId, data) {
      try {
        await client.send(new PostToConnectionCommand({ ConnectionId: connectionId, Data: new TextEncoder().encode(data) }));
        return 'sent';
      } catch (error) {
        if (isGone(error)) return 'gone';
        throw error;
      }
    },
    async close(connectionId) {
      try {
        await client.send(new DeleteConnectionCommand({ ConnectionId: connectionId }));
      } catch (error) {
        if (!isGone(error)) throw error;
      }
    },
  };
}

let local: ConnectionGateway | undefined;

/** The local server registers its shim here, before it feeds the stream to the change hook. */
export function useLocalConnectionGateway(gateway: ConnectionGateway | undefined): void {
  local = gateway;
}

/**
 * The gateway for this process: the stage's Management API when
 * `AGENTSTATE_WEBSOCKET_ENDPOINT` is set (AWS), else the local shim, if the local server
 * registered one; undefined when there is no WebSocket API at all.
 */
export function connectionGatewayFromEnv(env: NodeJS.ProcessEnv): ConnectionGateway | undefined {
  const endpoint = env.AGENTSTATE_WEBSOCKET_ENDPOINT;
  // Each post bounded: a connection that hangs costs seconds, never the whole batch's time.
  if (endpoint) {
    return managementApiGateway(traced(new ApiGatewayManagementApiClient({ endpoint, maxAttempts: 2, requestHandler: AWS_CALL_TIMEOUTS })));
  }
  return local
    ? {
        post: (connectionId, data) => (local as ConnectionGateway).post(connectionId, data),
        close: (connectionId) => (local as ConnectionGateway).close(connectionId),
      }
    : undefined;
}
