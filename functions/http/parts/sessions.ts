import { schemaReader } from '../../core/agent-service.js';
import { SessionService } from '../../core/session-service.js';
import type { SchemaSource } from '../../core/write-target.js';
import { DynamoDbAgentStore } from '../../store/agent-store.js';
import { DynamoDbDocumentStore } from '../../store/document-store.js';
import { DynamoDbSessionStore } from '../../store/session-store.js';
import type { Part } from '../wiring.js';

// The session's log and the service over it (the sessions, tree and state groups), and the
// stores that the commits, agents and decide parts share with it.

export const sessionStore: Part<DynamoDbSessionStore> = (wiring) => new DynamoDbSessionStore(wiring.table);
export const documentStore: Part<DynamoDbDocumentStore> = (wiring) => new DynamoDbDocumentStore(wiring.table);
export const agentStore: Part<DynamoDbAgentStore> = (wiring) => new DynamoDbAgentStore(wiring.table);

/** The typed fields of a session's agent, for the writes that check them: the agent store alone. */
export const schemas: Part<SchemaSource> = (wiring) => {
  const read = schemaReader(wiring.use(agentStore));
  return async (tenant, agentId) => (agentId === null ? null : read(tenant, agentId));
};

export const sessions: Part<SessionService> = (wiring) => new SessionService(wiring.use(sessionStore), { schemas: wiring.use(schemas) });
