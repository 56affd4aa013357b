import { TenantCache } from '../../core/kernel/tenant-cache.js';
import type { AgentStore } from '../../core/model/ports.js';
import { DynamoDbAgentReader, DynamoDbAgentStore, DynamoDbTenantAgents } from '../../store/agents/agent-store.js';
import type { Part } from '../wiring.js';

// The agent registry's store: the agents group writes it.
export const agentStore: Part<DynamoDbAgentStore> = (wiring) => new DynamoDbAgentStore(wiring.table);

// Its reads alone: the agents below a session's agent, for what a limited key may delete.
export const agentRegistryReader: Part<DynamoDbAgentReader> = (wiring) => new DynamoDbAgentReader(wiring.table);

// What a decision reads of it: the tenant's agents and shared document, in one query.
export const tenantAgents: Part<DynamoDbTenantAgents> = (wiring) => new DynamoDbTenantAgents(wiring.table);

/**
 * The tenant's agents and shared document as every decision and every write that checks typed
 * fields reads them: once a second per function instance at most, dropped at once by this
 * process's own registrations and shared-document commits (core/kernel/tenant-cache.ts).
 */
export const tenantRegistry: Part<Pick<AgentStore, 'readTenant'>> = (wiring) => {
  const store = wiring.use(tenantAgents);
  const cache = new TenantCache('registry', (tenant) => store.readTenant(tenant), wiring.table.now);
  return { readTenant: (tenant) => cache.get(tenant) };
};
