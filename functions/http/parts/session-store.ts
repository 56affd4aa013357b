import { sessionDefaultsFrom } from '../../core/model/lifetime.js';
import { DynamoDbSessionStore } from '../../store/sessions/session-store.js';
import type { Part } from '../wiring.js';

// The session's log (functions/store/sessions/session-store.ts): a module of its own, so that the agents
// group, which reads sessions only to check a field's type change, imports it on first use.

export const sessionStore: Part<DynamoDbSessionStore> = (wiring) =>
  new DynamoDbSessionStore(wiring.table, undefined, sessionDefaultsFrom(wiring.env));
