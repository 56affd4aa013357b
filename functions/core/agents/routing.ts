import { isJsonObject, type Json, type JsonObject } from '../json/json.js';
import { AgentStateError } from '../kernel/errors.js';
import { fieldsOf, matchesMemoryFilter, parseFilter } from '../memory/memory-filter.js';
import { buildSchema, canRead } from '../model/fields.js';
import type { AgentRecord, AgentRoute, RoutingHop } from '../model/model.js';
import { isBelow, rootOf } from './hierarchy.js';

/**
 * Routing (API.md section 13): the state decides which agent of a session's hierarchy answers a
 * decision. An agent's registration may declare `routes: [{when, to}]`; at a decision the routes
 * of the session's agent are tried in order against the state as that agent may read it, and the
 * first that matches hands the decision to `to`, whose own routes are tried in turn. A worker may
 * also hand a decision on (`{"handoff": {"agentId", "reason"}}`). Everything here is pure: the
 * decision reads the registry once (agent-reader.ts) and routes from what it read.
 *
 * A route's `to` is always an agent *below* the routing agent, so routes only ever lead down the
 * tree and can never loop; a handoff may go anywhere in the session's hierarchy, so a handoff
 * back to an agent that already had the decision is refused as a loop.
 */

/** Hops a decision may take in all, routes and handoffs together. */
const MAX_ROUTING_HOPS = 3;
/** Routes one agent may declare: each is tried at every decision of its sessions. */
const MAX_ROUTES_PER_AGENT = 20;
function invalidRoute(index: number, detail: string, field = `routes.${index}`): AgentStateError {
  return new AgentStateError('invalid_request', `route ${index}: ${detail}`, { field });
}

/**
 * Checks an agent's routes where it is registered (`400 invalid_request` naming the route): each
 * `when` in the filter language of a memory search plus `$exists`, on fields the agent may read
 * in the tree it belongs to; each `to` an agent registered below it. `agents` is the registry as
 * it will be once this registration is stored (the agent itself included).
 */
export function checkRoutes(agentId: string, routes: readonly AgentRoute[], agents: readonly AgentRecord[]): void {
  if (routes.length > MAX_ROUTES_PER_AGENT) {
    throw new AgentStateError('invalid_request', `an agent may declare at most ${MAX_ROUTES_PER_AGENT} routes`, {
      field: 'routes',
      limit: MAX_ROUTES_PER_AGENT,
    });
  }
  const schema = buildSchema(rootOf(agents, agentId), agents);
  routes.forEach((route, index) => {
    const filter = parseFilter(route.when, { path: `routes.${index}.when`, exists: true });
    if (!isJsonObject(route.when) || filter.length === 0) {
      throw invalidRoute(index, 'when must name at least one field of the state', `routes.${index}.when`);
    }
    if (schema) {
      // A field it may not read would never match, and saying which ones it can is the point.
      const unreadable = fieldsOf(filter).find((field) => !canRead(schema, agentId, field));
      if (unreadable !== undefined) {
        throw invalidRoute(index, `when names ${unreadable}, which agent ${agentId} cannot read`, `routes.${index}.when.${unreadable}`);
      }
    }
    if (!agents.some((agent) => agent.agentId === route.to) || !isBelow(agents, route.to, agentId)) {
      throw invalidRoute(index, `to must be an agent registered below ${agentId}; ${route.to} is not`, `routes.${index}.to`);
    }
  });
}

/**
 * After a change of the registry (an agent moved, or registered anew), the routes of every other
 * agent must still lead below it: `400` naming the first that would not, so that a move never
 * leaves a route pointing out of its hierarchy. Only a route with an end in the moved subtree
 * can change (every other agent keeps its ancestors), so only those are looked at: a route
 * already broken elsewhere (which the rules keep from happening) must not refuse every move of
 * the tenant with a message about agents the move has nothing to do with.
 */
export function checkRoutesStillHold(changed: string, agents: readonly AgentRecord[]): void {
  const moved = (agentId: string) => agentId === changed || isBelow(agents, agentId, changed);
  for (const agent of agents) {
    if (agent.agentId === changed || !agent.routes) continue;
    const index = agent.routes.findIndex((route) => (moved(agent.agentId) || moved(route.to)) && !isBelow(agents, route.to, agent.agentId));
    if (index >= 0) {
      throw new AgentStateError(
        'invalid_request',
        `this would take ${agent.routes[index]?.to} out from under agent ${agent.agentId}, whose route ${index} leads to it; change that route first`,
        { field: 'parentId' },
      );
    }
  }
}

/** Who decides, and how the decision got there. */
export interface Routed {
  agentId: string | null;
  routing: RoutingHop[];
}

/**
 * Tries the routes from `start` (the session's agent, or the agent the request names): the first
 * route whose `when` matches the state as the routing agent may read it (`viewFor`) hands the
 * decision on, and that agent's routes are tried in turn, up to `MAX_ROUTING_HOPS`. A route whose
 * `to` is gone, or no longer below it, is passed over.
 */
export function routeDecision(start: string | null, agents: readonly AgentRecord[], viewFor: (agentId: string) => Json): Routed {
  const routing: RoutingHop[] = [];
  let current = start;
  while (current !== null && routing.length < MAX_ROUTING_HOPS) {
    const router = agents.find((agent) => agent.agentId === current);
    const routes = router?.routes ?? [];
    if (routes.length === 0) break;
    const view = viewFor(current);
    const seen = isJsonObject(view) ? view : {};
    const index = routes.findIndex(
      (route) =>
        isBelow(agents, route.to, current as string) && matchesMemoryFilter(parseFilter(route.when, { path: 'when', exists: true }), seen),
    );
    if (index < 0) break;
    const to = (routes[index] as AgentRoute).to;
    routing.push({ from: current, to, via: 'route', index });
    current = to;
  }
  return { agentId: current, routing };
}

/** A worker's answer that hands the decision on, or null for any other answer. */
export interface Handoff {
  agentId: string;
  reason: string | null;
}

function handoffRefused(detail: string): AgentStateError {
  return new AgentStateError('worker_failed', `the worker's handoff was refused: ${detail}; nothing was written`);
}

/** The handoff of a worker's answer: `{"handoff": {"agentId", "reason"?}}` and nothing else (`502` when malformed). */
export function handoffOf(answer: unknown): Handoff | null {
  if (!isJsonObject(answer as Json) || !Object.hasOwn(answer as JsonObject, 'handoff')) return null;
  const { handoff, ...rest } = answer as JsonObject;
  if (Object.keys(rest).length > 0) throw handoffRefused('a handoff answer carries nothing else (no state, agent or messages)');
  if (!isJsonObject(handoff as Json)) throw handoffRefused('handoff must be an object {"agentId", "reason"?}');
  const { agentId, reason } = handoff as JsonObject;
  if (typeof agentId !== 'string') throw handoffRefused('handoff.agentId must be a string');
  if (reason !== undefined && reason !== null && typeof reason !== 'string') throw handoffRefused('handoff.reason must be a string');
  return { agentId, reason: typeof reason === 'string' ? reason : null };
}

/**
 * The hop a handoff adds: to an agent of the session's `hierarchy` that has not had the decision
 * yet, within `MAX_ROUTING_HOPS` in all; `502 worker_failed` saying which rule it broke.
 */
export function handoffHop(routing: readonly RoutingHop[], from: string, handoff: Handoff, hierarchy: ReadonlySet<string>): RoutingHop {
  if (routing.length >= MAX_ROUTING_HOPS) {
    throw handoffRefused(
      `a decision takes at most ${MAX_ROUTING_HOPS} hops (routes and handoffs); this would be hop ${routing.length + 1}`,
    );
  }
  if (!hierarchy.has(handoff.agentId)) throw handoffRefused(`${handoff.agentId} is not an agent of this session's hierarchy`);
  const had = new Set([routing[0]?.from ?? from, ...routing.map((hop) => hop.to), from]);
  if (had.has(handoff.agentId)) throw handoffRefused(`a loop: ${handoff.agentId} already had this decision`);
  return { from, to: handoff.agentId, via: 'handoff', reason: handoff.reason };
}
