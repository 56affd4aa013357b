import { ROOT_NODE } from '../kernel/ids.js';
import { type EmptyTip, LINEAGE_WINDOW, type NodeRecord, type Tip, type VersionRecord } from './model.js';

/**
 * The resolution rule of API.md section 4, in one place: the head's pointer lives on the
 * tip, every other node's on the node itself. Nothing walks the tree.
 */
export function pointerOf(node: Pick<NodeRecord, 'id' | 'stateVersion'>, tip: Pick<Tip, 'head' | 'headVersion'>): number {
  return node.id === tip.head ? tip.headVersion : node.stateVersion;
}

/** The implicit root, for a session whose root item was never written. */
export function rootNode(createdAt: string): NodeRecord {
  return {
    id: ROOT_NODE,
    parentId: null,
    depth: 0,
    role: null,
    message: null,
    stateVersion: 0,
    createdAt,
  };
}

/** The lineage window of a version recorded on top of `previous` (absent for version 0). */
export function nextLineage(previous: Pick<VersionRecord, 'version' | 'lineage'> | null): number[] {
  if (!previous) return [];
  return [previous.version, ...previous.lineage].slice(0, LINEAGE_WINDOW);
}

/** The tip of a session with nothing written in its `incarnation`-th life. */
export function emptyTip(incarnation = 0): EmptyTip {
  return {
    kind: 'empty',
    incarnation,
    version: 0,
    head: ROOT_NODE,
    headVersion: 0,
    headDepth: 0,
    touchedAt: null,
    agentId: null,
    userId: null,
    latest: null,
    lease: null,
    headNode: rootNode(''),
    recentNodes: [],
    recentDecision: null,
  };
}

/** Where a new version goes: the tip it is recorded on, its node, and the version that node pointed at. */
export interface VersionBase {
  tip: Tip;
  nodeId: string;
  /** The version the node points at (0: none yet); the new version's `prevVersion`. */
  pointer: number;
  /** That version, read with its state; null for version 0. Its lineage continues. */
  current: VersionRecord | null;
}
