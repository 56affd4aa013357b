import { describe, expect, it } from 'vitest';
import { AgentStateError } from '../../functions/core/kernel/errors.js';
import { COPY_APPEND_LIMIT, COPY_NODE_LIMIT, checkCopyCounts } from '../../functions/core/sessions/session-copy.js';
import type { TreeNodeView } from '../../functions/core/sessions/session-views.js';

/**
 * What one copy may write, counted from the tree read before anything is written (session-copy.ts,
 * `checkCopyCounts`): the e2e tests refuse an 11,000-node chain and copy 6,000 nodes of it
 * (reads-in-parts.test.ts), and refuse a tree of 151 branches (copy.test.ts) through the API;
 * each count at and past its limit, for a chain, branches and a state at every node, is held
 * here, where such a tree costs nothing to make.
 */
const root: TreeNodeView = { id: 'root', parentId: null, depth: 0, role: null, stateVersion: 0 };

/** `count` branches of one node under the root. */
function branches(count: number): TreeNodeView[] {
  return [root, ...Array.from({ length: count }, (_, n) => ({ id: `b${n}`, parentId: 'root', depth: 1, role: 'user', stateVersion: 0 }))];
}

/** A chain of `count` nodes; with `states`, each reads a version of its own. */
function chain(count: number, states = false): TreeNodeView[] {
  return [
    root,
    ...Array.from({ length: count }, (_, n) => ({
      id: `c${n}`,
      parentId: n === 0 ? 'root' : `c${n - 1}`,
      depth: n + 1,
      role: 'user',
      stateVersion: states ? n + 1 : 0,
    })),
  ];
}

function refusal(nodes: TreeNodeView[]): AgentStateError | null {
  try {
    checkCopyCounts(nodes, new Map(nodes.map((node) => [node.id, node])));
    return null;
  } catch (error) {
    if (error instanceof AgentStateError) return error;
    throw error;
  }
}

describe('checkCopyCounts: what one copy may write', () => {
  it('takes a chain of the most nodes (runs of 50: fewer appends than the limit)', () => {
    expect(refusal(chain(COPY_NODE_LIMIT))).toBeNull();
  });

  it('refuses a node more, with the limit and the count', () => {
    const error = refusal(chain(COPY_NODE_LIMIT + 1));
    expect(error?.code).toBe('payload_too_large');
    expect(error?.extras).toEqual({ limit: 'nodes', limitCount: COPY_NODE_LIMIT, count: COPY_NODE_LIMIT + 1 });
  });

  it('counts an append per branch: the most branches, and one more refused', () => {
    expect(refusal(branches(COPY_APPEND_LIMIT))).toBeNull();
    expect(refusal(branches(COPY_APPEND_LIMIT + 1))?.extras).toEqual({
      limit: 'appends',
      limitCount: COPY_APPEND_LIMIT,
      count: COPY_APPEND_LIMIT + 1,
    });
  });

  it('counts an append per state a node reads (a checkpoint at every node)', () => {
    expect(refusal(chain(COPY_APPEND_LIMIT, true))).toBeNull();
    expect(refusal(chain(COPY_APPEND_LIMIT + 1, true))?.extras).toMatchObject({ limit: 'appends', count: COPY_APPEND_LIMIT + 1 });
  });
});
