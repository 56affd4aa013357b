import { allAgentsOf, schemaReader } from '../../core/agents/agent-reader.js';
import { SessionTreeService } from '../../core/sessions/session-tree-service.js';
import type { SchemaSource } from '../../core/write/write-target.js';
import type { Part } from '../wiring.js';
import { agentRegistryReader } from './agent-store.js';
import { sessionStore } from './session-store.js';

// Sessions and the message tree (the sessions and tree groups), and the typed fields the
// session writes check (the state and commits parts share them). The state's writes and
// versions are parts/sessions.ts's, a module of its own: these groups record no version.

/** The typed fields of a session's agent, for the writes that check them: the agent store alone. */
export const schemas: Part<SchemaSource> = (wiring) => {
  const read = schemaReader(wiring.use(agentRegistryReader));
  return async (tenant, agentId) => (agentId === null ? null : read(tenant, agentId));
};

/** Sessions and the message tree without the state's writes and versions: the sessions and tree groups. */
export const sessionTree: Part<SessionTreeService> = (wiring) => {
  const registry = wiring.use(agentRegistryReader);
  return new SessionTreeService(wiring.use(sessionStore), {
    schemas: wiring.use(schemas),
    // Who is below whom: what a key limited to agents may delete.
    agents: (tenant) => allAgentsOf(registry, tenant),
  });
};
