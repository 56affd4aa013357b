import { buildSchema, type Schema } from '../model/fields.js';
import type { AgentRecord, DocumentRecord } from '../model/model.js';
import type { AgentStore } from '../model/ports.js';
import { agentNotFound } from './agent-access.js';

/**
 * What a decision and the writes that check typed fields read of the agent registry: the
 * tenant's agents and the typed fields they declare. No registration, change or listing rule
 * is here (agent-service.ts holds them), so the functions that only read agents (decide, the
 * session groups, the stream consumers) do not carry them.
 */

/** The tenant's agents and shared document as one decision reads them (`AgentReader.snapshot`). */
export interface AgentSnapshot {
  readonly agents: readonly AgentRecord[];
  /** The tenant's shared document, null when none. */
  readonly shared: DocumentRecord | null;
  /** The agent `agentId` (else `404 agent_not_found`). */
  agent(agentId: string): AgentRecord;
  schemaFor(agentId: string | null): Schema | null;
}

/** The registry as decide reads it. */
export class AgentReader {
  constructor(private readonly store: Pick<AgentStore, 'readTenant'>) {}

  /**
   * The tenant's agents and its shared document from one query (a decision needs both): an
   * agent by id (secret included, for the worker call) and the typed fields of any session
   * agent, without a read each.
   */
  async snapshot(tenant: string, options: { missing?: string } = {}): Promise<AgentSnapshot> {
    const { agents, shared } = await this.store.readTenant(tenant, options);
    return {
      agents,
      shared,
      agent: (agentId) => {
        const found = agents.find((candidate) => candidate.agentId === agentId);
        if (!found) throw agentNotFound(agentId);
        return found;
      },
      schemaFor: (agentId) => (agentId === null ? null : buildSchema(agentId, agents)),
    };
  }
}

/**
 * Every agent of a tenant (a tenant has few): one query per 500. `consistent`: with every write
 * that landed before the read (what a registration checks its rules against).
 */
export async function allAgentsOf(
  store: Pick<AgentStore, 'listAgents'>,
  tenant: string,
  options: { consistent?: boolean } = {},
): Promise<AgentRecord[]> {
  const agents: AgentRecord[] = [];
  let cursor: string | undefined;
  do {
    const page = await store.listAgents(tenant, { limit: 500, ...options, ...(cursor ? { cursor } : {}) });
    agents.push(...page.items);
    cursor = page.next;
  } while (cursor);
  return agents;
}

/** The typed fields of a session whose agent is `agentId`; null when its hierarchy declares none. */
export type SchemaReader = (tenant: string, agentId: string) => Promise<Schema | null>;

/**
 * `AgentReader.schemaFor` over the store's `listAgents` alone, for the change hook and the
 * session writes: the tenant's agents, then `buildSchema`. Not cached here; callers memoize.
 */
export function schemaReader(store: Pick<AgentStore, 'listAgents'>): SchemaReader {
  return async (tenant, agentId) => buildSchema(agentId, await allAgentsOf(store, tenant));
}
