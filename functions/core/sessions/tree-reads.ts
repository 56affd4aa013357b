import { encodedSize } from '../json/json.js';
import { AgentStateError } from '../kernel/errors.js';
import { ROOT_NODE } from '../kernel/ids.js';
import { ANSWER_ITEMS_BYTES } from '../model/limits.js';
import type { NodeNotes, SessionScope } from '../model/model.js';
import type { SessionStore } from '../model/ports.js';
import { pointerOf, rootNode } from '../model/tree.js';
import { sessionNotFound, type WriteTargets } from '../write/write-target.js';
import { notesWithin, sealNotesCursor } from './note-pages.js';
import { messagePreview } from './preview.js';
import { type NodeView, nodeView, type TreeNodeView } from './session-views.js';
import { openNodesCursor, openTreeCursor, sealNodesCursor, treePart } from './tree-pages.js';

/**
 * The two reads of a session's nodes (docs/api.md section 3): the whole tree, in parts, in its
 * order (depth, creation time, id), which reads every node for each part; and a page of nodes by
 * id, which reads what it carries.
 */

/** The query of `GET …/nodes`: a page size, and where it starts (below `before`, or where `cursor` left off). */
export interface NodePageQuery {
  limit: number;
  before?: string;
  cursor?: string;
}

/** The answer of `GET …/nodes`. */
export interface NodePageView {
  head: string;
  version: number;
  nodes: NodeView[];
  next?: string;
}

/**
 * The head and every node, without bodies. With `preview`, each node also carries a short
 * snippet of its message (`messagePreview`), which its index keeps: the same requests.
 */
export async function readTree(
  store: SessionStore,
  scope: SessionScope,
  options: { preview?: boolean; notes?: boolean; cursor?: string } = {},
): Promise<{ head: string; nodes: TreeNodeView[]; next?: string; notes?: Record<string, NodeNotes>; notesNext?: string }> {
  const preview = options.preview ?? false;
  const from = options.cursor === undefined ? undefined : openTreeCursor(options.cursor, scope);
  if (from && options.notes) {
    throw new AgentStateError(
      'invalid_request',
      "a later part of the tree carries nodes only: its notes go on with the first part's notesNext",
      {
        field: 'notes',
      },
    );
  }
  // The notes of every life, read beside the tree: its tip says which life is the session's.
  const notesRead = options.notes ? store.readNotes(scope, undefined, { bytes: ANSWER_ITEMS_BYTES }) : undefined;
  const [{ tip, nodes }, meta, noted] = await Promise.all([store.readTree(scope), store.getMeta(scope), notesRead]);
  if (!meta && nodes.length === 0 && tip.kind === 'empty') throw sessionNotFound(scope);
  // A session being deleted, expired, or another's copy not opened yet reads as unknown too (a
  // later part says its cursor is no longer valid, below).
  if (!from && tip.kind === 'closing') throw sessionNotFound(scope);
  const all = nodes.some((node) => node.id === ROOT_NODE) ? nodes : [rootNode(meta?.createdAt ?? ''), ...nodes];
  all.sort((a, b) => a.depth - b.depth || a.createdAt.localeCompare(b.createdAt) || a.id.localeCompare(b.id));
  if (from && (tip.kind === 'closing' || tip.incarnation !== from.life)) {
    throw new AgentStateError('invalid_request', 'cursor is not valid for this list: the session was deleted or expired since', {
      field: 'cursor',
    });
  }
  // The nodes that fit one answer, in the tree's order; `next` goes on with the rest (tree-pages.ts).
  const shown = treePart(
    all,
    (node) => ({
      id: node.id,
      parentId: node.parentId,
      depth: node.depth,
      role: node.role,
      stateVersion: pointerOf(node, tip),
      ...(preview ? { preview: node.preview !== undefined ? node.preview : messagePreview(node.message) } : {}),
    }),
    { ...(from ? { from: from.from } : {}), bytes: ANSWER_ITEMS_BYTES, scope, life: tip.incarnation },
  );
  const tree = { head: tip.head, nodes: shown.nodes, ...(shown.next ? { next: shown.next } : {}) };
  if (noted === undefined) return tree;
  if (tip.kind === 'closing') return { ...tree, notes: {} };
  // The notes that fit beside the tree in one answer; `notesNext` goes on with the rest.
  const part = notesWithin(noted, tip.incarnation, ANSWER_ITEMS_BYTES - encodedSize(tree), false);
  return { ...tree, notes: part.notes, ...(part.rest ? { notesNext: sealNotesCursor(part.rest, scope, undefined) } : {}) };
}

/**
 * `GET …/nodes`: a page of the message nodes by id, from the last (`root`, which holds no
 * message, is not one), before `before` or where `cursor` left off. It reads the tip and the
 * index keys of the nodes it returns (and of one more): a page costs what it carries, however
 * many nodes the session holds. `version` is the session's newest, as the page was read.
 */
export async function readNodePage(
  store: SessionStore,
  targets: WriteTargets,
  scope: SessionScope,
  options: NodePageQuery,
): Promise<NodePageView> {
  if (options.before !== undefined && options.cursor !== undefined) {
    throw new AgentStateError('invalid_request', 'send before (the first page) or cursor (the next), not both', { field: 'cursor' });
  }
  const from = options.cursor === undefined ? undefined : openNodesCursor(options.cursor, scope);
  const before = from?.lastId ?? options.before;
  const { tip, nodes, more } = await store.readNodePage(scope, {
    limit: options.limit,
    ...(before === undefined ? {} : { before }),
  });
  if (from && (tip.kind === 'closing' || tip.incarnation !== from.life)) {
    throw new AgentStateError('invalid_request', 'cursor is not valid for this list: the session was deleted or expired since', {
      field: 'cursor',
    });
  }
  if (nodes.length === 0) await targets.requireSession(scope, tip);
  const last = nodes.at(-1);
  return {
    head: tip.head,
    version: tip.version,
    nodes: nodes.map((node) => nodeView(node, tip)),
    ...(more && last ? { next: sealNodesCursor(scope, tip.incarnation, last.id) } : {}),
  };
}
