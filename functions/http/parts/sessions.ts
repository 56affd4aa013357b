import { schemaReader } from '../../core/agent-reader.js';
import { SessionService } from '../../core/session-service.js';
import { SessionTreeService } from '../../core/session-tree-service.js';
import type { SchemaSource } from '../../core/write-target.js';
import type { Part } from '../wiring.js';
import { agentRegistryReader } from './agent-store.js';
import { sessionStore } from './session-store.js';

// The service over the session's log (the sessions, tree and state groups), and the typed fields
// its writes check (the commits part shares them).

/** The typed fields of a session's agent, for the writes that check them: the agent store alone. */
export const schemas: Part<SchemaSource> = (wiring) => {
  const read = schemaReader(wiring.use(agentRegistryReader));
  return async (tenant, agentId) => (agentId === null ? null : read(tenant, agentId));
};

export const sessions: Part<SessionService> = (wiring) => new SessionService(wiring.use(sessionStore), { schemas: wiring.use(schemas) });

/** Sessions and the message tree without the state's writes and versions: the sessions and tree groups. */
export const sessionTree: Part<SessionTreeService> = (wiring) =>
  new SessionTreeService(wiring.use(sessionStore), { schemas: wiring.use(schemas) });
