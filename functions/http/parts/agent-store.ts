import { DynamoDbAgentReader, DynamoDbAgentStore, DynamoDbTenantAgents } from '../../store/agents/agent-store.js';
import type { Part } from '../wiring.js';

// The agent registry's store: the agents group writes it.
export const agentStore: Part<DynamoDbAgentStore> = (wiring) => new DynamoDbAgentStore(wiring.table);

// Its reads alone: every write that checks typed fields (no registration in those bundles).
export const agentRegistryReader: Part<DynamoDbAgentReader> = (wiring) => new DynamoDbAgentReader(wiring.table);

// What a decision reads of it: the tenant's agents and shared document, in one query.
export const tenantAgents: Part<DynamoDbTenantAgents> = (wiring) => new DynamoDbTenantAgents(wiring.table);
