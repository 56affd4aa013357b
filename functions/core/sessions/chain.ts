import type { JsonObject } from '../json/json.js';
import { AgentStateError } from '../kernel/errors.js';
import { newId } from '../kernel/ids.js';
import type { NodeRecord, Tip } from '../model/model.js';
import { pointerOf } from '../model/tree.js';

/** A message as a client (or a worker) appends it: any object with a string `role`, maybe an `id`. */
export type IncomingMessage = JsonObject & { role: string; id?: string };

export interface ChainPlan {
  /** Every node of the chain in order, the reused ones included. */
  chain: NodeRecord[];
  /** Only the nodes to create. */
  created: NodeRecord[];
  /** The end of the chain: the new head. */
  last: NodeRecord;
  /** The node the first created node hangs under: the parent, or the last message taken as already there. */
  anchor: NodeRecord;
}

/**
 * Plans appending `messages` as a chain under `parent` (API.md section 3), without writing.
 * Leading messages whose ids already exist under the same parent are taken as already there;
 * any other known id is `409 node_exists`. New nodes start at their parent's version.
 */
export function planChain(input: {
  parent: NodeRecord;
  messages: readonly IncomingMessage[];
  /** The nodes that exist among the messages' ids. */
  known: ReadonlyMap<string, NodeRecord>;
  tip: Tip;
  at: string;
}): ChainPlan {
  const { tip, known, at } = input;
  const chain: NodeRecord[] = [];
  const created: NodeRecord[] = [];
  const claimed = new Set<string>();
  let cursor = input.parent;
  let anchor = input.parent;
  for (const message of input.messages) {
    const existing = message.id === undefined ? undefined : known.get(message.id);
    if (existing) {
      if (created.length > 0 || existing.parentId !== cursor.id) {
        throw new AgentStateError(
          'node_exists',
          `node ${existing.id} already exists under ${existing.parentId ?? 'no parent'}, not under ${cursor.id}`,
          { nodeId: existing.id, parentId: existing.parentId },
        );
      }
      chain.push(existing);
      cursor = existing;
      continue;
    }
    const id = message.id ?? newId();
    if (claimed.has(id)) {
      throw new AgentStateError('node_exists', `node ${id} appears twice in one append`, { nodeId: id });
    }
    claimed.add(id);
    if (created.length === 0) anchor = cursor;
    const node: NodeRecord = {
      id,
      parentId: cursor.id,
      depth: cursor.depth + 1,
      role: message.role,
      message: { ...message, id, parentId: cursor.id },
      // A new node starts at its parent's version as it is right now (API.md section 4).
      stateVersion: created.length === 0 ? pointerOf(cursor, tip) : cursor.stateVersion,
      createdAt: at,
    };
    chain.push(node);
    created.push(node);
    cursor = node;
  }
  return { chain, created, last: cursor, anchor };
}

/** The ids a chain of messages names, for looking up which already exist. */
export function suppliedIds(messages: readonly IncomingMessage[]): string[] {
  return messages.flatMap((message) => (message.id === undefined ? [] : [message.id]));
}

/**
 * The nodes an append or a decision must look up: the ids its messages name and the parent it
 * names. The root too: it has no index, but once the head has left it, the version it points at
 * is its pointer item (a new node under it starts there, not at version 0).
 */
export function lookupsOf(messages: readonly IncomingMessage[], parentId: string | undefined): string[] {
  return [...new Set([...suppliedIds(messages), ...(parentId ? [parentId] : [])])];
}
