import { ROOT_NODE } from './ids.js';
import type { Json } from './json.js';
import { ANCESTOR_WINDOW, LINEAGE_WINDOW, type EmptyTip, type NodeRecord, type Tip, type VersionRecord } from './model.js';
import type { TipChange } from './ports.js';

/**
 * The resolution rule of API.md section 4, in one place: the head's pointer lives on the
 * tip, every other node's on the node itself. Nothing walks the tree.
 */
export function pointerOf(node: Pick<NodeRecord, 'id' | 'stateVersion'>, tip: Tip): number {
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
    ancestors: [],
    createdAt,
  };
}

/** The ancestor window a child of `parent` stores: its parent first, then the parent's own. */
export function childAncestors(parent: Pick<NodeRecord, 'id' | 'ancestors'>): string[] {
  return [parent.id, ...parent.ancestors].slice(0, ANCESTOR_WINDOW);
}

/** The lineage window of a version recorded on top of `previous` (absent for version 0). */
export function nextLineage(previous: Pick<VersionRecord, 'version' | 'lineage'> | null): number[] {
  if (!previous) return [];
  return [previous.version, ...previous.lineage].slice(0, LINEAGE_WINDOW);
}

/** The tip of a session that has no tip item yet. */
export function emptyTip(): EmptyTip {
  return {
    kind: 'empty',
    slot: 0,
    version: 0,
    head: ROOT_NODE,
    headVersion: 0,
    headDepth: 0,
    touchedAt: null,
    agentId: null,
    latest: null,
  };
}

/**
 * The change that records `state` as a new version at `nodeId`, which pointed at `current`:
 * the next version number, and the pointer move the resolution rule asks for (the head's on
 * the tip, any other node's on its item). Writes and commits both record versions this way.
 */
export function versionAt(input: {
  tip: Tip;
  nodeId: string;
  current: VersionRecord | null;
  pointer: number;
  state: Json;
  at: string;
  cause: VersionRecord['cause'];
  author: string | null;
  decisionId?: string | null;
  commands?: Json[];
}): { version: VersionRecord; change: Pick<TipChange, 'basedOn' | 'version' | 'head' | 'nodePointers' | 'newNodes'> } {
  const { tip, nodeId, current } = input;
  const version: VersionRecord = {
    version: tip.version + 1,
    node: nodeId,
    prevVersion: input.pointer,
    cause: input.cause,
    author: input.author,
    decisionId: input.decisionId ?? null,
    createdAt: input.at,
    state: input.state,
    agent: current?.agent ?? null,
    lineage: nextLineage(current),
    ...(input.commands ? { commands: input.commands } : {}),
  };
  const atHead = nodeId === tip.head;
  return {
    version,
    change: {
      basedOn: tip,
      version,
      head: { id: tip.head, version: atHead ? version.version : tip.headVersion, depth: tip.headDepth },
      nodePointers: atHead ? [] : [{ id: nodeId, version: version.version }],
      newNodes: [],
    },
  };
}
