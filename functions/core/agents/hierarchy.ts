import type { Schema } from '../model/fields.js';

/** Where an agent stands in its tenant's hierarchy (by `parentId`): what routing and decisions ask of it. */

/** Parents followed up a hierarchy before it is taken for a mistake (agent-service.ts refuses deeper). */
const MAX_DEPTH = 32;

interface Placed {
  agentId: string;
  parentId: string | null;
}

/** Whether `agentId` is strictly below `ancestorId` (by `parentId`). */
export function isBelow(agents: readonly Placed[], agentId: string, ancestorId: string): boolean {
  let current = agents.find((agent) => agent.agentId === agentId);
  for (let depth = 0; current?.parentId && depth < MAX_DEPTH; depth++) {
    if (current.parentId === ancestorId) return true;
    const parent: string = current.parentId;
    current = agents.find((agent) => agent.agentId === parent);
  }
  return false;
}

/** The top of the tree an agent belongs to: the widest hierarchy any of its sessions can have. */
export function rootOf(agents: readonly Placed[], agentId: string): string {
  let current = agents.find((agent) => agent.agentId === agentId);
  for (let depth = 0; current?.parentId && depth < MAX_DEPTH; depth++) {
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
