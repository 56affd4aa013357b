import { AgentStateError } from './errors.js';
import { encodedSize, type Json } from './json.js';
import type { AgentRecord, Page, WorkerRecord } from './model.js';
import type { AgentStore } from './ports.js';

/** An agent config is copied into every version, so it stays small. */
export const AGENT_CONFIG_LIMIT_BYTES = 64 * 1024;
/** Agents form a hierarchy through `parentId`; deeper than this is a mistake, not a design. */
const MAX_HIERARCHY_DEPTH = 32;

/** An agent as clients see it: the worker's secret is never returned, only whether one is set. */
export interface AgentView {
  agentId: string;
  parentId: string | null;
  worker: { url: string; timeoutMs: number | null; hasSecret: boolean } | null;
  config: Json;
  createdAt: string;
  updatedAt: string;
}

export interface AgentInput {
  parentId?: string | null;
  worker?: { url: string; secret?: string | null; timeoutMs?: number | null } | null;
  config?: Json;
}

/** Checks a worker URL where it is registered (scheme, loopback-only http, allowed Lambdas). */
export type WorkerUrlPolicy = (url: string) => void;

/** The agent registry of API.md section 7 (typed fields come later). */
export class AgentService {
  constructor(
    private readonly store: AgentStore,
    private readonly checkWorkerUrl: WorkerUrlPolicy,
    private readonly now: () => Date = () => new Date(),
  ) {}

  /** Creates or replaces an agent. */
  async putAgent(tenant: string, agentId: string, input: AgentInput): Promise<{ agent: AgentView; created: boolean }> {
    const config = input.config ?? null;
    const bytes = encodedSize(config);
    if (bytes > AGENT_CONFIG_LIMIT_BYTES) {
      throw new AgentStateError('invalid_request', `config is ${bytes} bytes of JSON; the limit is ${AGENT_CONFIG_LIMIT_BYTES}`, {
        field: 'config',
        limitBytes: AGENT_CONFIG_LIMIT_BYTES,
      });
    }
    if (input.worker) this.checkWorkerUrl(input.worker.url);
    const parentId = input.parentId ?? null;
    const [existing] = await Promise.all([
      this.store.getAgent(tenant, agentId),
      parentId === null ? Promise.resolve() : this.assertNoCycle(tenant, agentId, parentId),
    ]);
    const at = this.now().toISOString();
    const worker: WorkerRecord | null = input.worker
      ? { url: input.worker.url, secret: input.worker.secret ?? null, timeoutMs: input.worker.timeoutMs ?? null }
      : null;
    const record: AgentRecord = {
      agentId,
      parentId,
      worker,
      config,
      createdAt: existing?.createdAt ?? at,
      updatedAt: at,
    };
    const created = await this.store.putAgent(tenant, record);
    return { agent: agentView(record), created };
  }

  async getAgent(tenant: string, agentId: string): Promise<AgentView> {
    return agentView(await this.requireAgent(tenant, agentId));
  }

  /** The stored agent, secret included, for the decide flow. */
  async requireAgent(tenant: string, agentId: string): Promise<AgentRecord> {
    const agent = await this.store.getAgent(tenant, agentId);
    if (!agent) throw new AgentStateError('agent_not_found', `agent ${agentId} does not exist`, { agentId });
    return agent;
  }

  async listAgents(tenant: string, options: { limit: number; cursor?: string }): Promise<Page<AgentView>> {
    const page = await this.store.listAgents(tenant, options);
    return { items: page.items.map(agentView), ...(page.next ? { next: page.next } : {}) };
  }

  /** The parent must exist, and the new edge must not close a loop in the hierarchy. */
  private async assertNoCycle(tenant: string, agentId: string, parentId: string): Promise<void> {
    if (parentId === agentId) {
      throw new AgentStateError('invalid_request', 'an agent cannot be its own parent', { field: 'parentId' });
    }
    let current: string | null = parentId;
    for (let depth = 0; current !== null; depth++) {
      if (depth >= MAX_HIERARCHY_DEPTH) {
        throw new AgentStateError('invalid_request', `agent hierarchies may be at most ${MAX_HIERARCHY_DEPTH} deep`, {
          field: 'parentId',
        });
      }
      const ancestor = await this.store.getAgent(tenant, current);
      if (!ancestor) {
        throw new AgentStateError('agent_not_found', `parent agent ${current} does not exist`, { agentId: current });
      }
      if (ancestor.parentId === agentId) {
        throw new AgentStateError('invalid_request', `making ${parentId} the parent of ${agentId} would form a cycle`, {
          field: 'parentId',
        });
      }
      current = ancestor.parentId;
    }
  }
}

export function agentView(agent: AgentRecord): AgentView {
  return {
    agentId: agent.agentId,
    parentId: agent.parentId,
    worker: agent.worker
      ? { url: agent.worker.url, timeoutMs: agent.worker.timeoutMs, hasSecret: agent.worker.secret !== null }
      : null,
    config: agent.config,
    createdAt: agent.createdAt,
    updatedAt: agent.updatedAt,
  };
}
