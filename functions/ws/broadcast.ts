import type { LiveBroadcaster } from '../core/change-fanout.js';
import { serializeWithin } from '../core/events.js';
import type { LiveStore } from '../core/live.js';
import type { ConnectionGateway } from './connections.js';

/** API Gateway's WebSocket message limit is 128 KB; larger events go out without their states. */
export const WEBSOCKET_MESSAGE_LIMIT_BYTES = 128 * 1000;

/**
 * Sends a session's events to its followers: one Query for the followers, then each
 * connection gets the events in order, connections in parallel. A connection that is gone
 * (410) is removed with everything it followed.
 */
export function liveBroadcaster(store: Pick<LiveStore, 'subscribers' | 'deleteConnection'>, gateway: ConnectionGateway): LiveBroadcaster {
  return async (scope, events) => {
    const connections = await store.subscribers(scope);
    if (connections.length === 0) return;
    const messages = events.map((event) => serializeWithin(event, WEBSOCKET_MESSAGE_LIMIT_BYTES));
    const results = await Promise.allSettled(
      connections.map(async (connectionId) => {
        for (const message of messages) {
          if ((await gateway.post(connectionId, message)) === 'gone') {
            await store.deleteConnection(connectionId);
            return;
          }
        }
      }),
    );
    const failures = results.filter((result): result is PromiseRejectedResult => result.status === 'rejected');
    if (failures.length > 0) {
      throw new Error(`${failures.length} of ${connections.length} live connections failed: ${String(failures[0]?.reason)}`);
    }
  };
}
