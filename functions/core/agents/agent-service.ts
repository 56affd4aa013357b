import { isJsonObject, type Json } from '../json/json.js';
import { AgentStateError } from '../kernel/errors.js';
import { invalidateTenant } from '../kernel/tenant-cache.js';
import { checkDeclarations, type StateFields, typeProblem } from '../model/fields.js';
import { checkLifetimeSettings } from '../model/lifetime.js';
import { agentConfigExcess, routesExcess, stateFieldsExcess } from '../model/limits.js';
import type { AgentDocuments, AgentLifetime, AgentRecord, AgentRoute, Page, WorkerMessages, WorkerRecord } from '../model/model.js';
import { type AgentStore, RegistryChangedError, type SessionStore, StaleTipError, type WriteQueue } from '../model/ports.js';
import { type RetryPolicy, retryOnStaleTip } from '../write/write-retry.js';
import type { AllowedAgents } from './acting-agent.js';
import { agentNotFound, agentSubtree, requireMayPlace } from './agent-access.js';
import { allAgentsOf } from './agent-reader.js';
import { levelsBelow, MAX_HIERARCHY_DEPTH, rootOf } from './hierarchy.js';
import { checkRoutes, checkRoutesStillHold } from './routing.js';

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
  /** The line a registration that lost waits in; without one (unit tests) it retries after random waits alone. */
  private readonly queue: WriteQueue | undefined;

  constructor(
    stores: { agents: AgentStore; sessions: Pick<SessionStore, 'listSessions' | 'readTip'>; queue?: WriteQueue },
    private readonly checkWorkerUrl: WorkerUrlPolicy,
    private readonly now: () => Date = () => new Date(),
    /** How long a registration is checked again: write-retry.ts's defaults unless a test says otherwise. */
    private readonly retry: Partial<RetryPolicy> = {},
  ) {
    this.store = stores.agents;
    this.sessions = stores.sessions;
    this.queue = stores.queue;
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
    // A registration the registry's rules concern is written only while no other such one has
    // landed since it read the registry (`registerOnce`): two at once (a under b and b under a;
    // a route to an agent and that agent's move away; one field name declared in two places of
    // a tree) each passed their reads and together broke a rule. The one that finds the registry
    // changed checks everything again, as a contended session write does (write-retry.ts, up to
    // 15 s), and once it has lost it waits its turn in the line of the tenant's `A#` partition
    // (the shared document's line, which lives there too): 50 at once then land one after the
    // other, where random waits that doubled (8 attempts) left some of them answering 409.
    const attempt = () =>
      this.registerOnce(tenant, agentId, input, allowed).catch((error: unknown) => {
        throw error instanceof RegistryChangedError ? new StaleTipError(error.message) : error;
      });
    const queue = this.queue;
    const join = queue ? () => queue.join({ document: { kind: 'shared', tenant } }) : undefined;
    try {
      return await retryOnStaleTip({ ...this.retry, countsVersionRaces: false }, attempt, undefined, join);
    } catch (error) {
      if (!(error instanceof AgentStateError && error.code === 'conflict' && error.cause instanceof StaleTipError)) throw error;
      throw new AgentStateError('conflict', 'the agents this registration is checked against kept changing; retry', {
        attempts: (error.extras as { attempts: number }).attempts,
      });
    }
  }

  private async registerOnce(
    tenant: string,
    agentId: string,
    input: AgentInput,
    allowed: AllowedAgents,
  ): Promise<{ agent: AgentView; created: boolean }> {
    // The registry's version before anything its rules are checked against: the write of a
    // registration they concern is conditional on it (`AgentStore.putAgent`), so everything
    // read after it is the registry as it stands when the write lands. The agent itself is
    // written as read (absent, or with the parent read), whatever the registration.
    const [registryVersion, existing] = await Promise.all([this.store.registryVersion(tenant), this.store.getAgent(tenant, agentId)]);
    let listing: Promise<AgentRecord[]> | undefined;
    const registry = () => {
      listing ??= allAgentsOf(this.store, tenant, { consistent: true });
      return listing;
    };
    if (allowed) {
      const agents = await registry();
      requireMayPlace(allowed, agentSubtree(allowed, agents) as ReadonlySet<string>, {
        agentId,
        parentId: input.parentId ?? null,
        existing,
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
    const moves = movesAgent(existing, parentId);
    if (parentId !== null) await this.checkPlace(tenant, agentId, parentId, moves ? await registry() : []);
    const stateFields = input.stateFields ?? null;
    if (stateFields) checkDeclarations(stateFields);
    // A move takes the agents below along into another tree, with the names they declare.
    if (stateFields || moves) {
      await this.checkFieldChanges(tenant, { agentId, parentId, existing, stateFields: stateFields ?? {} }, await registry());
    }
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
    if (routes || moves) {
      const after = [...(await registry()).filter((agent) => agent.agentId !== agentId), record];
      if (routes) checkRoutes(agentId, routes, after);
      if (moves) checkRoutesStillHold(agentId, after);
    }
    // What the rules read of other agents, and what they read of this one: another parent
    // (for a new agent, any), a field name, a route. A registration that only drops some of
    // those, or changes its worker or config, breaks no rule whatever lands beside it. A
    // limited key's is always ruled: its subtree is read from the agents above this one, so a
    // move of one of them out of the subtree between that read and this write would otherwise
    // let the write land outside the subtree after the move answered.
    const ruled =
      Boolean(allowed) ||
      (existing === null ? parentId !== null : moves) ||
      (stateFields !== null && Object.keys(stateFields).length > 0) ||
      routes !== null;
    const created = await this.store.putAgent(tenant, record, {
      existed: existing !== null,
      parentAsRead: existing?.parentId ?? null,
      ...(ruled ? { registryVersion } : {}),
    });
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
    change: { agentId: string; parentId: string | null; existing: AgentRecord | null; stateFields: StateFields },
    registry: readonly AgentRecord[],
  ): Promise<void> {
    const { agentId, parentId, existing, stateFields } = change;
    const agents = registry.filter((agent) => agent.agentId !== agentId);
    const self = { agentId, parentId, stateFields } as AgentRecord;
    const all = [...agents, self];
    const tree = new Set(treeMembers(rootOf(all, agentId), all));
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
   * The parent must exist, the new edge must not close a loop in the hierarchy, and the agent
   * with every agent below it (`registry`, for an agent that moves) must stay within
   * `MAX_HIERARCHY_DEPTH` levels: the new parent's chain, the agent, and the levels below it.
   */
  private async checkPlace(tenant: string, agentId: string, parentId: string, registry: readonly AgentRecord[]): Promise<void> {
    if (parentId === agentId) {
      throw new AgentStateError('invalid_request', 'an agent cannot be its own parent', { field: 'parentId' });
    }
    let above = 0;
    // The chain up from the parent: past `MAX_HIERARCHY_DEPTH` agents it is too deep whatever
    // is above, and the agent would be found well before if the parent were below it.
    for (let current: string | null = parentId; current !== null && above < MAX_HIERARCHY_DEPTH; above++) {
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
    // Levels: the agents above, the agent itself, and the deepest one it takes along below it.
    const below = levelsBelow(registry, agentId);
    if (above + 1 + below > MAX_HIERARCHY_DEPTH) {
      const after = below === 0 ? '' : `; under ${parentId}, the ${below} levels of agents below ${agentId} would pass that`;
      throw new AgentStateError('invalid_request', `agent hierarchies may be at most ${MAX_HIERARCHY_DEPTH} deep${after}`, {
        field: 'parentId',
      });
    }
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
