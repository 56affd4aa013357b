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
