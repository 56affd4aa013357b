/**
 * Lays a session's message tree out as rows, one per node, for a virtualized list: a depth-
 * first walk where a chain (a node with one child) stays in its column and only a fork opens
 * new ones, so a long conversation does not drift to the right. Pure: no DOM.
 *
 *   ● root                      level 0
 *   ● u1                        level 0   (chain: same column)
 *   ├─● a1   branch 1 of 2      level 1   guides [tee]
 *   │ ● u2                      level 1   guides [pipe]
 *   └─● a2   branch 2 of 2      level 1   guides [elbow]
 */

export interface TreeNode {
  id: string;
  parentId: string | null;
  role: string | null;
  stateVersion: number;
  preview?: string | null;
}

/** What is drawn in one guide column left of a row's dot. */
type Guide = 'pipe' | 'blank' | 'tee' | 'elbow';

export interface TreeRow {
  node: TreeNode;
  /** Column of the node's dot. */
  level: number;
  /** One entry per column left of the dot. */
  guides: readonly Guide[];
  /** The parent is in the same column, right above (a chain): draw the line up to it. */
  joinsAbove: boolean;
  /** Has children: draw the line down from the dot. */
  hasChildren: boolean;
  /** Number of children when there are several (a fork point), else 0. */
  branches: number;
  /** 1-based position among its siblings when the parent is a fork, else 0. */
  branchIndex: number;
  isHead: boolean;
  /** On the path root → head: the conversation as the head sees it. */
  onHeadPath: boolean;
}

/**
 * Rows in display order: children in the order given (the API lists them by creation time).
 * Nodes whose parent is missing (never expected) are shown as extra roots rather than lost.
 */
export function layoutTree(nodes: readonly TreeNode[], head: string): TreeRow[] {
  const byId = new Map(nodes.map((node) => [node.id, node]));
  const children = new Map<string, TreeNode[]>();
  const roots: TreeNode[] = [];
  for (const node of nodes) {
    if (node.parentId === null || !byId.has(node.parentId)) {
      roots.push(node);
      continue;
    }
    const siblings = children.get(node.parentId);
    if (siblings) siblings.push(node);
    else children.set(node.parentId, [node]);
  }

  const headPath = new Set<string>();
  for (let at = byId.get(head); at && !headPath.has(at.id); at = at.parentId === null ? undefined : byId.get(at.parentId)) {
    headPath.add(at.id);
  }

  interface Pending {
    node: TreeNode;
    level: number;
    guides: readonly Guide[];
    joinsAbove: boolean;
    branchIndex: number;
  }
  const rows: TreeRow[] = [];
  // An explicit stack, not recursion: a conversation may be thousands of messages deep.
  const stack: Pending[] = roots.map((node) => ({ node, level: 0, guides: [] as Guide[], joinsAbove: false, branchIndex: 0 })).reverse();
  const seen = new Set<string>();
  while (stack.length > 0) {
    const { node, level, guides, joinsAbove, branchIndex } = stack.pop() as Pending;
    if (seen.has(node.id)) continue;
    seen.add(node.id);
    const kids = children.get(node.id) ?? [];
    rows.push({
      node,
      level,
      guides,
      joinsAbove,
      hasChildren: kids.length > 0,
      branches: kids.length > 1 ? kids.length : 0,
      branchIndex,
      isHead: node.id === head,
      onHeadPath: headPath.has(node.id),
    });
    if (kids.length === 1) {
      // The chain continues in this column; the guides left of it are unchanged (shared).
      stack.push({ node: kids[0] as TreeNode, level, guides: continued(guides), joinsAbove: true, branchIndex: 0 });
      continue;
    }
    // A fork: each child one column to the right, joined by a tee (an elbow for the last).
    for (let index = kids.length - 1; index >= 0; index -= 1) {
      const last = index === kids.length - 1;
      stack.push({
        node: kids[index] as TreeNode,
        level: level + 1,
        guides: [...continued(guides), last ? 'elbow' : 'tee'],
        joinsAbove: false,
        branchIndex: index + 1,
      });
    }
  }
  return rows;
}

/** The guides of the rows below a branch's first row: its tee goes on as a pipe, its elbow ends. */
function continued(guides: readonly Guide[]): readonly Guide[] {
  const last = guides[guides.length - 1];
  if (last !== 'tee' && last !== 'elbow') return guides;
  return [...guides.slice(0, -1), last === 'tee' ? 'pipe' : 'blank'];
}

/** The index of the row showing `nodeId`, or -1. */
export function rowIndexOf(rows: readonly TreeRow[], nodeId: string): number {
  return rows.findIndex((row) => row.node.id === nodeId);
}

/** The rows a viewport shows, with `overscan` extra on each side: the window to render. */
export function visibleRange(
  scrollTop: number,
  viewportHeight: number,
  rowHeight: number,
  rowCount: number,
  overscan = 8,
): { start: number; end: number } {
  const first = Math.floor(Math.max(0, scrollTop) / rowHeight);
  const count = Math.ceil(Math.max(0, viewportHeight) / rowHeight) + 1;
  return { start: Math.max(0, first - overscan), end: Math.min(rowCount, first + count + overscan) };
}
