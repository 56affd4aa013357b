import { ErasureService, type ErasureStore } from '../../core/erasure/erasure.js';
import type { Part } from '../wiring.js';
import { sessionStore } from './session-store.js';

// Erasures of users (API.md section 12), in the sessions group. The store is a chunk of its
// own, imported by the first erasure: no other request of the group loads it.

export const erasures: Part<ErasureService> = (wiring) => {
  const sessions = wiring.use(sessionStore);
  let loaded: Promise<ErasureStore> | undefined;
  const store = () => {
    loaded ??= import('../../store/erasure/erasure-store.js').then(
      ({ DynamoDbErasureStore, erasureWaitFrom }) => new DynamoDbErasureStore(wiring.table, sessions, erasureWaitFrom(wiring.env)),
      (error: unknown) => {
        loaded = undefined;
        throw error;
      },
    );
    return loaded;
  };
  return new ErasureService({
    start: async (tenant, userId) => (await store()).start(tenant, userId),
    get: async (tenant, erasureId) => (await store()).get(tenant, erasureId),
  });
};
