import { isJsonObject, type Json } from '../json/json.js';
import { AgentStateError } from '../kernel/errors.js';
import { invalidateTenant } from '../kernel/tenant-cache.js';
import { checkDeclarations, type StateFields, typeProblem } from '../model/fields.js';
import { checkLifetimeSettings } from '../model/lifetime.js';
import { agentConfigExcess, routesExcess, stateFieldsExcess } from '../model/limits.js';
import type { AgentDocuments, AgentLifetime, AgentRecord, AgentRoute, Page, WorkerMessages, WorkerRecord } from '../model/model.js';
import { type AgentEdge, type AgentStore, RegistryChangedError, type SessionStore } from '../model/ports.js';
import type { AllowedAgents } from './acting-agent.js';
import { agentNotFound, agentSubtree, requireMayPlace } from './agent-access.js';
import { allAgentsOf } from './agent-reader.js';
import { checkRoutes, checkRoutesStillHold } from './routing.js';

/** Agents form a hierarchy through `parentId`; deeper than this is a mistake, not a design. */
const MAX_HIERARCHY_DEPTH = 32;
/** Registrations whose ancestors moved while they were checked are checked again this many times in all. */
const MAX_REGISTRATION_ATTEMPTS = 8;
/** A type change is checked against the head state of at most this many sessions. */
const TYPE_CHANGE_CHECK_LIMIT = 1000;

/** An agent as clients see it: the worker's secret is never returned, only whether one is set. */
export interface AgentView {
  agentId: string;
  parentId: string | null;
  /** `messages` only when the worker is shown less than the whole path (`{"last": N}`). */
  worker: { url: string; timeoutMs: number | null; hasSecret: boolean; messages?: { last: number } } | null;
  config: Json;
  stateFields: StateFields | null;
  /** The agent's grants on the tenant's documents (`{shared: "write"}`), null when none. */
  documents: AgentDocuments | null;
  /** Present only when the agent declares routes (API.md section 13). */
  routes?: AgentRoute[];
  /** What the agent's new sessions live by (API.md section 12); null when nothing. */
  lifetime: AgentLifetime | null;
  createdAt: string;
  updatedAt: string;
}

export interface AgentInput {
  parentId?: string | null;
  worker?: { url: string; secret?: string | null; timeoutMs?: number | null; messages?: WorkerMessages | null } | null;
  config?: Json;
  stateFields?: StateFields | null;
  /** `{shared: "write"}`: see `AgentRecord.documents`. Absent: kept as it is for a limited key, none for another. */
  documents?: AgentDocuments | null;
  routes?: AgentRoute[] | null;
  /** `{ttlSeconds?, retention?}` for the agent's new sessions (API.md section 12). */
  lifetime?: AgentLifetime | null;
}

/** Checks a worker URL where it is registered (scheme, loopback-only http, allowed Lambdas). */
export type WorkerUrlPolicy = (url: string) => void;

/**
 * The agent registry of API.md section 7: registration, reads and listing for the agents
 * routes. A decision reads agents through agent-reader.ts instead.
 */
export class AgentService {
  private readonly store: AgentStore;
  private readonly sessions: Pick<SessionStore, 'listSessions' | 'readTip'>;

  constructor(
    stores: { agents: AgentStore; sessions: Pick<SessionStore, 'listSessions' | 'readTip'> },
    private readonly checkWorkerUrl: WorkerUrlPolicy,
    private readonly now: () => Date = () => new Date(),
  ) {
    this.store = stores.agents;
    this.sessions = stores.sessions;
  }

  /**
   * Creates or replaces an agent. A key limited to `allowed` agents may write only its subtree
   * (agent-access.ts): `403 forbidden` before anything else is checked or written.
   */
  async putAgent(
    tenant: string,
    agentId: string,
    input: AgentInput,
    allowed: AllowedAgents = null,
  ): Promise<{ agent: AgentView; created: boolean }> {
    // A move is written only while the ancestors it was checked against are as they were read
    // (`assertNoCycle`): two moves at once (a under b, b under a) both passed their reads and
    // made a cycle. The one that finds its ancestors moved checks everything again.
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.registerOnce(tenant, agentId, input, allowed);
      } catch (error) {
        if (!(error instanceof RegistryChangedError)) throw error;
        if (attempt >= MAX_REGISTRATION_ATTEMPTS) {
          throw new AgentStateError('conflict', 'the agents above this one kept moving while it was registered; retry', {
            attempts: MAX_REGISTRATION_ATTEMPTS,
          });
        }
      }
    }
  }

  private async registerOnce(
    tenant: string,
    agentId: string,
    input: AgentInput,
    allowed: AllowedAgents,
  ): Promise<{ agent: AgentView; created: boolean }> {
    if (allowed) {
      const agents = await this.allAgents(tenant);
      requireMayPlace(allowed, agentSubtree(allowed, agents) as ReadonlySet<string>, {
        agentId,
        parentId: input.parentId ?? null,
        existing: agents.find((agent) => agent.agentId === agentId) ?? null,
      });
    }
    const config = input.config ?? null;
    const excess = agentConfigExcess(config);
    if (excess) {
      throw new AgentStateError('invalid_request', `config ${excess.detail}`, { field: 'config', limitBytes: excess.limitBytes });
    }
    // The registration is one item: its declarations are held to their size before anything is read.
    const fieldsExcess = input.stateFields && stateFieldsExcess(input.stateFields);
    if (fieldsExcess) {
      throw new AgentStateError('invalid_request', `stateFields ${fieldsExcess.detail}`, {
        field: 'stateFields',
        limitBytes: fieldsExcess.limitBytes,
      });
    }
    const routesTooLarge = input.routes && routesExcess(input.routes as unknown as Json);
    if (routesTooLarge) {
      throw new AgentStateError('invalid_request', `routes ${routesTooLarge.detail}`, {
        field: 'routes',
        limitBytes: routesTooLarge.limitBytes,
      });
    }
    if (input.worker) this.checkWorkerUrl(input.worker.url);
    if (input.lifetime) checkLifetimeSettings(input.lifetime, this.now().getTime(), 'lifetime.');
    const parentId = input.parentId ?? null;
    const [existing, ancestors] = await Promise.all([
      this.store.getAgent(tenant, agentId),
      parentId === null ? Promise.resolve([]) : this.assertNoCycle(tenant, agentId, parentId),
    ]);
    const stateFields = input.stateFields ?? null;
    if (stateFields) checkDeclarations(stateFields);
    // A move takes the agents below along into another tree, with the names they declare.
    if (stateFields || movesAgent(existing, parentId)) await this.checkFieldChanges(tenant, agentId, parentId, existing, stateFields ?? {});
    const at = this.now().toISOString();
    const worker: WorkerRecord | null = input.worker
      ? {
          url: input.worker.url,
          secret: input.worker.secret ?? null,
          timeoutMs: input.worker.timeoutMs ?? null,
          ...(input.worker.messages && input.worker.messages !== 'all' ? { messages: input.worker.messages } : {}),
        }
      : null;
    const documents = documentsOf(input, existing, allowed);
    const routes = input.routes && input.routes.length > 0 ? input.routes : null;
    const record: AgentRecord = {
      agentId,
      parentId,
      worker,
      config,
      stateFields,
      ...(documents ? { documents } : {}),
      ...(routes ? { routes } : {}),
      ...(input.lifetime ? { lifetime: input.lifetime } : {}),
      createdAt: existing?.createdAt ?? at,
      updatedAt: at,
    };
    // Routes lead down the hierarchy: this agent's must, and a move must not take a route's
    // target out from under the agent that routes to it.
    if (routes || movesAgent(existing, parentId)) {
      const after = [...(await this.allAgents(tenant)).filter((agent) => agent.agentId !== agentId), record];
      if (routes) checkRoutes(agentId, routes, after);
      if (movesAgent(existing, parentId)) checkRoutesStillHold(agentId, after);
    }
    // An edge to a parent is written only while the agent's own parent is the one read (so a
    // registration that keeps its parent does not put back an edge a move took away meanwhile),
    // and a move's only while its new ancestors are as read: a new agent is nobody's ancestor.
    const created = await this.store.putAgent(
      tenant,
      record,
      parentId === null
        ? {}
        : {
            parentAsRead: existing?.parentId ?? null,
            existed: existing !== null,
            ancestors: movesAgent(existing, parentId) ? ancestors : [],
          },
    );
    // The registry this process's requests read (kernel/tenant-cache.ts): the next one sees the change.
    invalidateTenant('registry', tenant);
    return { agent: agentView(record), created };
  }

  /** One agent; for a key limited to `allowed` agents, one of its subtree (else `404 agent_not_found`). */
  async getAgent(tenant: string, agentId: string, allowed: AllowedAgents = null): Promise<AgentView> {
    if (!allowed) return agentView(await this.requireAgent(tenant, agentId));
    const agents = await this.allAgents(tenant);
    const agent = agents.find((candidate) => candidate.agentId === agentId);
    if (!agent || !agentSubtree(allowed, agents)?.has(agentId)) throw agentNotFound(agentId);
    return agentView(agent);
  }

  /** The stored agent (else `404 agent_not_found`). */
  private async requireAgent(tenant: string, agentId: string): Promise<AgentRecord> {
    const agent = await this.store.getAgent(tenant, agentId);
    if (!agent) throw agentNotFound(agentId);
    return agent;
  }

  /**
   * A page of the tenant's agents by id; for a key limited to `allowed` agents only those of
   * its subtree (so a page may hold fewer than `limit`, as lists may).
   */
  async listAgents(tenant: string, options: { limit: number; cursor?: string }, allowed: AllowedAgents = null): Promise<Page<AgentView>> {
    const [page, subtree] = await Promise.all([
      this.store.listAgents(tenant, options),
      allowed ? this.allAgents(tenant).then((agents) => agentSubtree(allowed, agents)) : Promise.resolve(null),
    ]);
    const visible = subtree ? page.items.filter((agent) => subtree.has(agent.agentId)) : page.items;
    return { items: visible.map(agentView), ...(page.next ? { next: page.next } : {}) };
  }

  private allAgents(tenant: string): Promise<AgentRecord[]> {
    return allAgentsOf(this.store, tenant);
  }

  /**
   * A field name belongs to one agent of a tree; a type may change only when the values stored
   * under it still fit, or when the declaration says how to migrate (`migrate: "clear"`). When
   * the agent moves (another parent), the names the agents below it declare join the tree it
   * moves into too, and must not clash with the names declared there.
   */
  private async checkFieldChanges(
    tenant: string,
    agentId: string,
    parentId: string | null,
    existing: AgentRecord | null,
    stateFields: StateFields,
  ): Promise<void> {
    const agents = (await this.allAgents(tenant)).filter((agent) => agent.agentId !== agentId);
    const self = { agentId, parentId, stateFields } as AgentRecord;
    const all = [...agents, self];
    const rootOf = (id: string): string => {
      let current = all.find((agent) => agent.agentId === id);
      for (let depth = 0; current?.parentId && depth < MAX_HIERARCHY_DEPTH; depth++) {
        const parent = current.parentId;
        current = all.find((agent) => agent.agentId === parent) ?? current;
        if (current.agentId !== parent) break;
      }
      return current?.agentId ?? id;
    };
    const tree = new Set(treeMembers(rootOf(agentId), all));
    for (const other of agents) {
      if (!tree.has(other.agentId) || !other.stateFields) continue;
      const clash = Object.keys(stateFields).find((name) => Object.hasOwn(other.stateFields as StateFields, name));
      if (clash) {
        throw new AgentStateError('invalid_request', `field ${clash} is already declared by agent ${other.agentId} of the same hierarchy`, {
          field: `stateFields.${clash}`,
        });
      }
    }
    if (movesAgent(existing, parentId)) {
      const below = new Set(treeMembers(agentId, all).slice(1));
      for (const mover of agents) {
        if (!below.has(mover.agentId) || !mover.stateFields) continue;
        for (const other of agents) {
          if (!tree.has(other.agentId) || below.has(other.agentId) || !other.stateFields) continue;
          const clash = Object.keys(mover.stateFields).find((name) => Object.hasOwn(other.stateFields as StateFields, name));
          if (clash) {
            throw new AgentStateError(
              'invalid_request',
              `agent ${mover.agentId} below ${agentId} declares field ${clash}, which agent ${other.agentId} of the hierarchy it would join declares`,
              { field: 'parentId' },
            );
          }
        }
      }
    }
    const retyped = Object.entries(stateFields).filter(([name, declaration]) => {
      const before = existing?.stateFields?.[name];
      return before !== undefined && before.type !== declaration.type && declaration.migrate !== 'clear';
    });
    if (retyped.length === 0) return;
    const misfits = await this.sessionsNotFitting(
      tenant,
      tree,
      retyped.map(([name, declaration]) => [name, declaration.type]),
    );
    if (misfits.length > 0) {
      throw new AgentStateError(
        'conflict',
        `stored values of ${retyped.map(([name]) => name).join(', ')} do not fit the new type; declare migrate: "clear" to read them as cleared`,
        { sessions: misfits.slice(0, 20) },
      );
    }
  }

  /** Sessions of the tree whose latest state holds a value that does not fit its new type. */
  private async sessionsNotFitting(
    tenant: string,
    tree: Set<string>,
    retyped: Array<[string, StateFields[string]['type']]>,
  ): Promise<string[]> {
    const misfits: string[] = [];
    let checked = 0;
    // Each agent's own list (API.md section 2, `?agentId=`): the sessions of the tree, never
    // every session of the tenant.
    for (const agentId of tree) {
      let cursor: string | undefined;
      do {
        const page = await this.sessions.listSessions(tenant, { limit: 100, filter: { agentId }, ...(cursor ? { cursor } : {}) });
        for (const session of page.items) {
          if (++checked > TYPE_CHANGE_CHECK_LIMIT) {
            throw new AgentStateError(
              'conflict',
              `too many sessions to check a type change; declare migrate: "clear" to read old values as cleared`,
            );
          }
          const tip = await this.sessions.readTip({ tenant, sessionId: session.sessionId }, { withState: true });
          const state = tip.latest?.state;
          if (!isJsonObject(state)) continue;
          const misfit = retyped.some(([name, type]) => name in state && typeProblem(type, state[name] as Json) !== null);
          if (misfit) misfits.push(session.sessionId);
        }
        cursor = page.next;
      } while (cursor);
    }
    return misfits;
  }

  /**
   * The parent must exist, and the new edge must not close a loop in the hierarchy. Answers
   * the ancestors as read, from the parent up: what a move's write checks is still so.
   */
  private async assertNoCycle(tenant: string, agentId: string, parentId: string): Promise<AgentEdge[]> {
    const ancestors: AgentEdge[] = [];
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
      ancestors.push({ agentId: ancestor.agentId, parentId: ancestor.parentId });
      current = ancestor.parentId;
    }
    return ancestors;
  }
}

function agentView(agent: AgentRecord): AgentView {
  return {
    agentId: agent.agentId,
    parentId: agent.parentId,
    worker: agent.worker
      ? {
          url: agent.worker.url,
          timeoutMs: agent.worker.timeoutMs,
          hasSecret: agent.worker.secret !== null,
          ...(agent.worker.messages ? { messages: agent.worker.messages } : {}),
        }
      : null,
    config: agent.config,
    stateFields: agent.stateFields,
    documents: agent.documents ?? null,
    ...(agent.routes ? { routes: agent.routes } : {}),
    lifetime: agent.lifetime ?? null,
    createdAt: agent.createdAt,
    updatedAt: agent.updatedAt,
  };
}

/**
 * The document grants a registration stores. Only a key that is not limited grants them: a
 * limited key's registration keeps what the agent had (sending the same is fine), and any
 * other value is `403 forbidden`, so no limited key can give itself the tenant's `shared`
 * document (API.md section 7).
 */
function documentsOf(input: AgentInput, existing: AgentRecord | null, allowed: AllowedAgents): AgentDocuments | null {
  const had = existing?.documents?.shared ? { shared: existing.documents.shared } : null;
  if (!allowed) return input.documents?.shared ? { shared: input.documents.shared } : null;
  if (input.documents === undefined || (input.documents?.shared ?? null) === (had?.shared ?? null)) return had;
  throw new AgentStateError('forbidden', 'only a key that is not limited to agents may grant an agent the tenant’s documents', {
    agents: allowed,
  });
}

/** Whether a registration gives an existing agent another parent (taking the agents below it along). */
function movesAgent(existing: AgentRecord | null, parentId: string | null): boolean {
  return existing !== null && existing.parentId !== parentId;
}

/** `root` and every agent below it, each once: a cycle the registry should never hold (made before moves were checked at once) ends the walk instead of growing it without end. */
function treeMembers(root: string, agents: readonly AgentRecord[]): string[] {
  const members = [root];
  const seen = new Set(members);
  for (let index = 0; index < members.length; index++) {
    for (const agent of agents) {
      if (agent.parentId !== members[index] || seen.has(agent.agentId)) continue;
      seen.add(agent.agentId);
      members.push(agent.agentId);
    }
  }
  return members;
}
