import { allAgentsOf } from '../../core/agents/agent-reader.js';
import { headState } from '../../core/sessions/head-state.js';
import { SessionService } from '../../core/sessions/session-service.js';
import type { Part } from '../wiring.js';
import { agentRegistryReader } from './agent-store.js';
import { sessionStore } from './session-store.js';
import { schemas } from './session-tree.js';
import { writeQueue } from './write-queue.js';

// The service over the session's log with the state's writes and versions (the state group).

export const sessions: Part<SessionService> = (wiring) => {
  const registry = wiring.use(agentRegistryReader);
  return new SessionService(wiring.use(sessionStore), {
    schemas: wiring.use(schemas),
    // Who is below whom: the sessions a key limited to agents may write in.
    agents: (tenant) => allAgentsOf(registry, tenant),
    headState,
    queue: wiring.use(writeQueue),
  });
};
