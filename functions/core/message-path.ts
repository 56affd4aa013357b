import { AgentStateError } from './errors.js';
import { ROOT_NODE } from './ids.js';
import type { JsonObject } from './json.js';
import type { NodeRecord, SessionScope } from './model.js';
import type { SessionStore } from './ports.js';

/** The messages root→node, oldest first, and the ids of the nodes they belong to (root first). */
export interface MessagePath {
  messages: JsonObject[];
  ancestry: string[];
}

/**
 * The path root→`target`, for a node already read (a path read, or a decision's parent). Each
 * node keeps a window of its nearest ancestors, so a path of depth d takes 1 + d/ANCESTOR_WINDOW
 * batched reads, whatever the history.
 */
export async function pathFrom(store: Pick<SessionStore, 'getNodes'>, scope: SessionScope, target: NodeRecord): Promise<MessagePath> {
  if (target.id === ROOT_NODE) return { messages: [], ancestry: [ROOT_NODE] };
  const newestFirst: NodeRecord[] = [target];
  let oldest = target;
  while (oldest.parentId !== null && oldest.parentId !== ROOT_NODE) {
    const ids = oldest.ancestors.filter((id) => id !== ROOT_NODE);
    if (ids.length === 0) throw new AgentStateError('internal', `node ${oldest.id} has no ancestor window`);
    const found = await store.getNodes(scope, ids);
    for (const id of ids) {
      const node = found.get(id);
      if (!node) throw new AgentStateError('internal', `ancestor ${id} of ${oldest.id} is missing`);
      newestFirst.push(node);
      oldest = node;
    }
  }
  const path = newestFirst.reverse();
  return {
    messages: path.map((node) => node.message ?? {}),
    ancestry: [ROOT_NODE, ...path.map((node) => node.id)],
  };
}
