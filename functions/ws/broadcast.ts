import type { LiveBroadcaster } from '../core/change-fanout.js';
import { type ChangeEvent, serializeWithin } from '../core/events.js';
import type { LiveFollower, LiveStore } from '../core/live.js';
import type { ConnectionGateway } from './connections.js';

/** API Gateway's WebSocket message limit is 128 KB; larger events go out without their states. */
const WEBSOCKET_MESSAGE_LIMIT_BYTES = 128 * 1000;

/**
 * Where the broadcaster finds a session's followers: with the agent each follows it as
 * (`followers`, every LiveStore), or only their connection ids (`subscribers`: followers
 * without agents, whole events).
 */
export type FollowerSource = Pick<LiveStore, 'deleteConnection'> & (Pick<LiveStore, 'followers'> | Pick<LiveStore, 'subscribers'>);

/**
 * Sends a session's events to its followers: one Query for the followers, then each
 * connection gets the events in order, connections in parallel. A follower that subscribed as
 * an agent gets the events as that agent may see them (`eventsFor`); when those cannot be
 * made, it gets nothing (and the failure is reported), never the whole events. A connection
 * that is gone (410) is removed with everything it followed.
 */
export function liveBroadcaster(store: FollowerSource, gateway: ConnectionGateway): LiveBroadcaster {
  return async (scope, events, eventsFor) => {
    const followers: LiveFollower[] =
      'followers' in store
        ? await store.followers(scope)
        : (await store.subscribers(scope)).map((connectionId) => ({ connectionId, agentId: null }));
    if (followers.length === 0) return;
    const serialize = (list: readonly ChangeEvent[]) => list.map((event) => serializeWithin(event, WEBSOCKET_MESSAGE_LIMIT_BYTES));
    const messages = new Map<string | null, Promise<string[]>>([[null, Promise.resolve(serialize(events))]]);
    const messagesFor = (agentId: string | null): Promise<string[]> => {
      let found = messages.get(agentId);
      if (!found) {
        found = eventsFor ? eventsFor(agentId).then(serialize) : Promise.reject(new Error(`no view of the events for agent ${agentId}`));
        messages.set(agentId, found);
      }
      return found;
    };
    const results = await Promise.allSettled(
      followers.map(async ({ connectionId, agentId }) => {
        for (const message of await messagesFor(agentId)) {
          if ((await gateway.post(connectionId, message)) === 'gone') {
            await store.deleteConnection(connectionId);
            return;
          }
        }
      }),
    );
    const failures = results.filter((result): result is PromiseRejectedResult => result.status === 'rejected');
    if (failures.length > 0) {
      throw new Error(`${failures.length} of ${followers.length} live connections failed: ${String(failures[0]?.reason)}`);
    }
  };
}
