import { encodedSize } from '../json/json.js';
import { AgentStateError } from '../kernel/errors.js';
import { openCursor, sealCursor } from '../kernel/sealing.js';
import type { NodeRecord, SessionScope } from '../model/model.js';

/**
 * The tree in parts (docs/api.md, "the whole tree"): a session may hold any number of nodes, and
 * an answer travels inside Lambda's 6 MB payload (about 45,000 nodes' worth). The nodes go in
 * their order (depth, then creation time, then id), as many as `bytes` of their JSON text allow
 * (at least one), and `next` when some are left: a cursor the same read takes back (`?cursor=`).
 * Each part reads the tree again, so a part is not the same instant as the one before it.
 */

/** Where a part of the tree stops: the last node it carried, by the tree's order. */
type TreePosition = readonly [depth: number, createdAt: string, id: string];

const positionOf = (node: NodeRecord): TreePosition => [node.depth, node.createdAt, node.id];

function compare(node: NodeRecord, [depth, createdAt, id]: TreePosition): number {
  return node.depth - depth || node.createdAt.localeCompare(createdAt) || node.id.localeCompare(id);
}

/**
 * The part of `sorted` (the tree's nodes in its order) from `from` on whose views fit `bytes`,
 * and the cursor of the rest when some are left.
 */
export function treePart<V>(
  sorted: readonly NodeRecord[],
  view: (node: NodeRecord) => V,
  options: { from?: TreePosition; bytes: number; scope: SessionScope; life: number },
): { nodes: V[]; next?: string } {
  const { from } = options;
  const start = from === undefined ? 0 : sorted.findIndex((node) => compare(node, from) > 0);
  if (start < 0) return { nodes: [] };
  const nodes: V[] = [];
  let used = 0;
  let index = start;
  for (; index < sorted.length; index++) {
    const shown = view(sorted[index] as NodeRecord);
    // Its JSON text and the comma before it.
    const size = encodedSize(shown) + 1;
    if (nodes.length > 0 && used + size > options.bytes) break;
    nodes.push(shown);
    used += size;
  }
  if (index >= sorted.length) return { nodes };
  return { nodes, next: sealCursor([options.life, ...positionOf(sorted[index - 1] as NodeRecord)], treeList(options.scope)) };
}

/** The list a tree cursor belongs to: this session's tree. */
const treeList = (scope: SessionScope) => JSON.stringify(['tree', scope.tenant, scope.sessionId]);

/** Where a tree cursor goes on from, and the life it is of; `400 invalid_request` for anything else. */
export function openTreeCursor(cursor: string, scope: SessionScope): { life: number; from: TreePosition } {
  const position = openCursor(cursor, treeList(scope));
  if (Array.isArray(position) && position.length === 4) {
    const [life, depth, createdAt, id] = position as unknown[];
    if (Number.isSafeInteger(life) && Number.isSafeInteger(depth) && typeof createdAt === 'string' && typeof id === 'string') {
      return { life: life as number, from: [depth as number, createdAt, id] };
    }
  }
  throw new AgentStateError('invalid_request', 'cursor is not valid for this list', { field: 'cursor' });
}

/** The list a cursor of nodes by id belongs to: this session's nodes. */
const nodesList = (scope: SessionScope) => JSON.stringify(['nodes', scope.tenant, scope.sessionId]);

/** The cursor of a page of nodes by id (`GET …/nodes`): the life it is of, and the last id it carried. */
export function sealNodesCursor(scope: SessionScope, life: number, lastId: string): string {
  return sealCursor([life, lastId], nodesList(scope));
}

/** Where a cursor of nodes by id goes on from (before `lastId`), and its life; `400 invalid_request` for anything else. */
export function openNodesCursor(cursor: string, scope: SessionScope): { life: number; lastId: string } {
  const position = openCursor(cursor, nodesList(scope));
  if (Array.isArray(position) && position.length === 2) {
    const [life, lastId] = position as unknown[];
    if (Number.isSafeInteger(life) && typeof lastId === 'string') return { life: life as number, lastId };
  }
  throw new AgentStateError('invalid_request', 'cursor is not valid for this list', { field: 'cursor' });
}
