import { AgentStateError } from '../kernel/errors.js';
import type { AllowedAgents } from './acting-agent.js';

/**
 * What a key limited to some agents may do in the agent registry (API.md section 7): it reads
 * and writes only the registrations of its own agents and of the agents below them (by
 * `parentId`), its **subtree**. Another agent reads as `404 agent_not_found`; a write to one,
 * a new agent outside the subtree, or a move that takes an agent out of it (or hangs one
 * under an agent outside it) is `403 forbidden`. A key that is not limited sees every agent.
 */

interface Placed {
  agentId: string;
  parentId: string | null;
}

/** The subtree of a limited key: its agents and every agent below them. Null for an unlimited key. */
export function agentSubtree(allowed: AllowedAgents, agents: readonly Placed[]): ReadonlySet<string> | null {
  if (!allowed) return null;
  const children = new Map<string, string[]>();
  for (const agent of agents) {
    if (agent.parentId !== null) children.set(agent.parentId, [...(children.get(agent.parentId) ?? []), agent.agentId]);
  }
  const subtree = new Set<string>();
  const queue = [...allowed];
  while (queue.length > 0) {
    const next = queue.shift() as string;
    if (subtree.has(next)) continue;
    subtree.add(next);
    queue.push(...(children.get(next) ?? []));
  }
  return subtree;
}

/** `404 agent_not_found` for an agent the caller may not see, exactly as for one that does not exist. */
export function agentNotFound(agentId: string): AgentStateError {
  return new AgentStateError('agent_not_found', `agent ${agentId} does not exist`, { agentId });
}

/**
 * Throws `403 forbidden` unless a limited key may put `agentId` under `parentId`:
 * - an existing agent must be in its subtree;
 * - a new agent must land in it: be one of the key's own agents, or go under an agent of it;
 * - the parent must be an agent of the subtree, or stay what it was, or be none for one of
 *   the key's own agents. So no agent leaves the subtree, and none is hung under an agent
 *   outside it (which would put it into that agent's hierarchy and its public fields).
 */
export function requireMayPlace(
  allowed: readonly string[],
  subtree: ReadonlySet<string>,
  change: { agentId: string; parentId: string | null; existing: Placed | null },
): void {
  const { agentId, parentId, existing } = change;
  const refuse = (detail: string) => new AgentStateError('forbidden', detail, { agents: allowed });
  if (existing && !subtree.has(agentId))
    throw refuse(`this key may not change agent ${agentId}: it is not one of its agents or below them`);
  const own = allowed.includes(agentId);
  const parentInside = parentId !== null && subtree.has(parentId);
  if (!existing && !own && !parentInside) {
    throw refuse(`this key may register a new agent only as one of its agents or below them; ${agentId} would be outside`);
  }
  const unchanged = existing !== null && existing.parentId === parentId;
  if (!unchanged && !parentInside && !(parentId === null && own)) {
    throw refuse(
      parentId === null
        ? `this key may not take agent ${agentId} out from under its parent`
        : `this key may place agents only under its agents or below them, not under ${parentId}`,
    );
  }
}

/**
 * The conversations a limited key works in (API.md section 7): a session with no agent, or
 * whose agent is one of the key's agents, above one of them (a sub-agent works in its parent's
 * session) or below one (a parent oversees its sub-agents' sessions). A sibling's or a
 * cousin's session is not its conversation. Always true for a key that is not limited.
 */
function mayWorkIn(allowed: AllowedAgents, agents: readonly Placed[], sessionAgentId: string | null): boolean {
  if (!allowed || sessionAgentId === null) return true;
  const parentOf = new Map(agents.map((agent) => [agent.agentId, agent.parentId]));
  // Whether `upper` is `lower` or one of its ancestors (the hierarchy is at most 32 deep, no cycles).
  const atOrAbove = (upper: string, lower: string) => {
    for (let at: string | null | undefined = lower, depth = 0; at != null && depth <= 64; at = parentOf.get(at), depth++) {
      if (at === upper) return true;
    }
    return false;
  };
  return allowed.some((agentId) => atOrAbove(agentId, sessionAgentId) || atOrAbove(sessionAgentId, agentId));
}

/** `403 forbidden` unless a key with `allowed` may work in a session of `sessionAgentId` (`mayWorkIn`). */
export function requireMayWorkIn(allowed: AllowedAgents, agents: readonly Placed[], sessionAgentId: string | null, what: string): void {
  if (mayWorkIn(allowed, agents, sessionAgentId)) return;
  throw new AgentStateError(
    'forbidden',
    `this key may ${what} only sessions without an agent, or of its agents, the agents above them or below them; not one of ${sessionAgentId}`,
    { agents: allowed },
  );
}
