import { TENANT_READ_MAX_AGE_MS, TenantCache } from '../../core/kernel/tenant-cache.js';
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
 * process's own registrations and shared-document commits (core/kernel/tenant-cache.ts); a
 * request naming an agent the copy lacks reads again (`missing`), so an agent registered through
 * another instance is found at once.
 */
export const tenantRegistry: Part<Pick<AgentStore, 'readTenant'>> = (wiring) => {
  const store = wiring.use(tenantAgents);
  const cache = new TenantCache('registry', (tenant) => store.readTenant(tenant), wiring.table.now);
  // When each agent some request missed was last read again for: once a second per agent, so a
  // session naming an agent nobody registered does not read the registry on every request.
  const missed = new Map<string, number>();
  return {
    readTenant: (tenant, options) => {
      if (options?.missing === undefined) return cache.get(tenant);
      const key = JSON.stringify([tenant, options.missing]);
      const now = wiring.table.now();
      const last = missed.get(key);
      if (last !== undefined && now - last < TENANT_READ_MAX_AGE_MS && now >= last) return cache.get(tenant);
      missed.delete(key);
      missed.set(key, now);
      if (missed.size > 10_000) missed.delete(missed.keys().next().value as string);
      return cache.get(tenant, 0);
    },
  };
};
