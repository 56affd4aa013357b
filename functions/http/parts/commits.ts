import { allAgentsOf } from '../../core/agents/agent-reader.js';
import { CommitService, DEFAULT_RUN_TTL_SECONDS } from '../../core/commits/commit-service.js';
import type { Part } from '../wiring.js';
import { agentRegistryReader } from './agent-store.js';
import { documentStore } from './document-store.js';
import { sessionStore } from './session-store.js';
import { schemas } from './session-tree.js';
import { writeQueue } from './write-queue.js';

export const commits: Part<CommitService> = (wiring) => {
  const registry = wiring.use(agentRegistryReader);
  return new CommitService(
    { sessions: wiring.use(sessionStore), documents: wiring.use(documentStore) },
    {
      schemas: wiring.use(schemas),
      runTtlSeconds: runTtlSeconds(wiring.env),
      // Whose sessions, and which document grants, a key limited to agents commits under.
      agents: (tenant) => allAgentsOf(registry, tenant),
      queue: wiring.use(writeQueue),
    },
  );
};

/** `AGENTSTATE_RUN_TTL_SECONDS`: how long a run document outlives its last write. */
function runTtlSeconds(env: NodeJS.ProcessEnv): number {
  const value = Number(env.AGENTSTATE_RUN_TTL_SECONDS);
  return Number.isSafeInteger(value) && value > 0 ? value : DEFAULT_RUN_TTL_SECONDS;
}
