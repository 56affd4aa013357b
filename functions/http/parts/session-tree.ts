import { allAgentsOf } from '../../core/agents/agent-reader.js';
import { buildSchema } from '../../core/model/fields.js';
import { headState } from '../../core/sessions/head-state.js';
import { SessionCopier } from '../../core/sessions/session-copy.js';
import { SessionTreeService } from '../../core/sessions/session-tree-service.js';
import type { SchemaSource } from '../../core/write/write-target.js';
import type { Part } from '../wiring.js';
import { agentRegistryReader, tenantRegistry } from './agent-store.js';
import { sessionStore } from './session-store.js';
import { writeQueue } from './write-queue.js';

// Sessions and the message tree (the sessions and tree groups), and the typed fields the
// session writes check (the state and commits parts share them). The state's writes and
// versions are parts/sessions.ts's, a module of its own: these groups record no version.

/**
 * The typed fields of a session's agent, for the writes that check them: from the registry as
 * this instance last read it (at most a second ago, parts/agent-store.ts `tenantRegistry`).
 */
export const schemas: Part<SchemaSource> = (wiring) => {
  const registry = wiring.use(tenantRegistry);
  return async (tenant, agentId) => {
    if (agentId === null) return null;
    const { agents } = await registry.readTenant(tenant);
    // An agent registered through another instance within the second: read again, not untyped.
    const known = agents.some((agent) => agent.agentId === agentId)
      ? agents
      : (await registry.readTenant(tenant, { missing: agentId })).agents;
    return buildSchema(agentId, known);
  };
};

/** Sessions and the message tree without the state's writes and versions: the sessions and tree groups. */
export const sessionTree: Part<SessionTreeService> = (wiring) => {
  const registry = wiring.use(agentRegistryReader);
  return new SessionTreeService(wiring.use(sessionStore), {
    schemas: wiring.use(schemas),
    // Who is below whom: what a key limited to agents may delete.
    agents: (tenant) => allAgentsOf(registry, tenant),
    // A blind PATCH of the session that lost a race takes turns with the session's other blind
    // writers: without the queue, 100 at once raced for every place (about 20 transactions a
    // write) and a third of them answered 409 once the retry budget ran out.
    queue: wiring.use(writeQueue),
  });
};

/** The message tree's group: the above, and appends that carry the new head's state (head-state.ts). */
export const messageTree: Part<SessionTreeService> = (wiring) => {
  const registry = wiring.use(agentRegistryReader);
  return new SessionTreeService(wiring.use(sessionStore), {
    schemas: wiring.use(schemas),
    agents: (tenant) => allAgentsOf(registry, tenant),
    headState,
    // Blind appends that lost a race take turns with the session's other blind writers.
    queue: wiring.use(writeQueue),
  });
};

/** Copies of sessions (API.md section 12): appends of the message tree's, with each state as the source has it. */
export const sessionCopier: Part<SessionCopier> = (wiring) => {
  const registry = wiring.use(agentRegistryReader);
  const store = wiring.use(sessionStore);
  return new SessionCopier({
    tree: wiring.use(messageTree),
    readVersion: (scope, version) => store.getVersion(scope, version),
    storedStates: (scope, versions) => store.storedStates(scope, versions),
    agents: (tenant) => allAgentsOf(registry, tenant),
    open: (scope) => store.openCopy(scope),
  });
};
