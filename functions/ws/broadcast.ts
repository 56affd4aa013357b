import { type ChangeEvent, type EventMode, serializeWithin } from '../core/events/events.js';
import type { LiveBroadcaster } from '../core/fanout/change-fanout.js';
import type { KeyCheck, LiveFollower, LiveStore } from '../core/fanout/live.js';
import type { MemoryBroadcaster } from '../core/fanout/memory-fanout.js';
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
 *
 * With `keyLive`, each follower's key is checked first (key-liveness.ts: at most once per
 * instance and second, not per event): a follower whose key was revoked is sent nothing, and
 * its connection is closed and removed (`closeRevoked`).
 */
export function liveBroadcaster(store: FollowerSource, gateway: ConnectionGateway, keyLive?: KeyCheck): LiveBroadcaster {
  return async (scope, events, eventsFor) => {
    const followers: LiveFollower[] =
      'followers' in store
        ? await store.followers(scope)
        : (await store.subscribers(scope)).map(
            (connectionId): LiveFollower => ({ connectionId, agentId: null, mode: 'full', keyHash: null }),
          );
    if (followers.length === 0) return;
    const serialize = (list: readonly ChangeEvent[], mode: EventMode) =>
      list.map((event) => serializeWithin(event, WEBSOCKET_MESSAGE_LIMIT_BYTES, mode));
    const views = new Map<string | null, Promise<readonly ChangeEvent[]>>([[null, Promise.resolve(events)]]);
    const viewFor = (agentId: string | null): Promise<readonly ChangeEvent[]> => {
      let found = views.get(agentId);
      if (!found) {
        found = eventsFor ? eventsFor(agentId) : Promise.reject(new Error(`no view of the events for agent ${agentId}`));
        views.set(agentId, found);
      }
      return found;
    };
    const messages = new Map<string, Promise<string[]>>();
    const messagesFor = (agentId: string | null, mode: EventMode): Promise<string[]> => {
      const key = `${mode}\u0000${agentId ?? ''}`;
      let found = messages.get(key);
      if (!found) {
        found = viewFor(agentId).then((list) => serialize(list, mode));
        messages.set(key, found);
      }
      return found;
    };
    const results = await Promise.allSettled(
      followers.map(async ({ connectionId, agentId, mode, keyHash }) => {
        if (await revoked(keyHash, keyLive)) return closeRevoked(store, gateway, connectionId);
        for (const message of await messagesFor(agentId, mode)) {
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

/**
 * Sends a memory namespace's events to the connections that follow it or a namespace above it
 * (`{"action":"subscribe","namespace":[…]}`): one Query per level of the namespace, then each
 * connection gets the events in order, in the mode it asked for. A connection that is gone is
 * removed with everything it followed.
 */
export function memoryBroadcaster(
  store: Pick<LiveStore, 'namespaceFollowers' | 'deleteConnection'>,
  gateway: ConnectionGateway,
  keyLive?: KeyCheck,
): MemoryBroadcaster {
  return async (tenant, namespace, events) => {
    const followers = await store.namespaceFollowers(tenant, namespace);
    if (followers.length === 0) return;
    const messages = (mode: EventMode) => events.map((event) => serializeWithin(event, WEBSOCKET_MESSAGE_LIMIT_BYTES, mode));
    const byMode = { full: messages('full'), patch: messages('patch') };
    await Promise.all(
      followers.map(async ({ connectionId, mode, keyHash }) => {
        if (await revoked(keyHash, keyLive)) return closeRevoked(store, gateway, connectionId);
        for (const message of byMode[mode]) {
          if ((await gateway.post(connectionId, message)) === 'gone') {
            await store.deleteConnection(connectionId);
            return;
          }
        }
      }),
    );
  };
}

/** Whether a follower's key (null: one that cannot be revoked) was revoked, as `keyLive` knows it. */
async function revoked(keyHash: string | null, keyLive: KeyCheck | undefined): Promise<boolean> {
  return keyHash !== null && keyLive !== undefined && !(await keyLive(keyHash));
}

/**
 * A revoked key's connection: closed (DeleteConnection; locally the socket's close), and its
 * records removed here too, so that no other event looks it up again before its $disconnect.
 */
async function closeRevoked(store: Pick<LiveStore, 'deleteConnection'>, gateway: ConnectionGateway, connectionId: string): Promise<void> {
  await gateway.close(connectionId);
  await store.deleteConnection(connectionId);
}
