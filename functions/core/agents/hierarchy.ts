import type { Schema } from '../model/fields.js';

/** Where an agent stands in its tenant's hierarchy (by `parentId`): what routing and decisions ask of it. */

/**
 * Levels a hierarchy may have (an agent with no parent is at level 1): deeper is a mistake, not a
 * design. Registration refuses an agent, or a move of an agent and the agents below it, that
 * would reach past it (agent-service.ts); the walks here stop there.
 */
export const MAX_HIERARCHY_DEPTH = 32;

interface Placed {
  agentId: string;
  parentId: string | null;
}

/** Whether `agentId` is strictly below `ancestorId` (by `parentId`). */
export function isBelow(agents: readonly Placed[], agentId: string, ancestorId: string): boolean {
  let current = agents.find((agent) => agent.agentId === agentId);
  for (let depth = 0; current?.parentId && depth < MAX_HIERARCHY_DEPTH; depth++) {
    if (current.parentId === ancestorId) return true;
    const parent: string = current.parentId;
    current = agents.find((agent) => agent.agentId === parent);
  }
  return false;
}

/** The top of the tree an agent belongs to: the widest hierarchy any of its sessions can have. */
export function rootOf(agents: readonly Placed[], agentId: string): string {
  let current = agents.find((agent) => agent.agentId === agentId);
  for (let depth = 0; current?.parentId && depth < MAX_HIERARCHY_DEPTH; depth++) {
    const parent: string = current.parentId;
    const next = agents.find((agent) => agent.agentId === parent);
    if (!next) break;
    current = next;
  }
  return current?.agentId ?? agentId;
}

/** The agents a session's decisions may reach: its agent and every agent below it. */
export function hierarchyOf(schema: Schema | null, root: string | null, agents: readonly Placed[]): ReadonlySet<string> {
  if (schema) return schema.hierarchy;
  if (root === null) return new Set();
  return new Set([root, ...agents.filter((agent) => isBelow(agents, agent.agentId, root)).map((agent) => agent.agentId)]);
}

/**
 * How many levels there are below `agentId` (0 for an agent with none): what a move takes along
 * under its new parent. Each agent is counted once, so a listing that shows a cycle (read page
 * by page while moves land) still ends.
 */
export function levelsBelow(agents: readonly Placed[], agentId: string): number {
  const children = new Map<string, string[]>();
  for (const agent of agents) {
    if (agent.parentId !== null) children.set(agent.parentId, [...(children.get(agent.parentId) ?? []), agent.agentId]);
  }
  const seen = new Set([agentId]);
  let level = [agentId];
  let levels = 0;
  for (;;) {
    const next = level.flatMap((id) => children.get(id) ?? []).filter((id) => !seen.has(id));
    if (next.length === 0) return levels;
    for (const id of next) seen.add(id);
    levels++;
    level = next;
  }
}
