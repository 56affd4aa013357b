import { ROOT_NODE } from './ids.js';
import type { Json } from './json.js';
import { jsonPatchBetween } from './json-diff.js';
import { mergePatchBetween } from './merge-patch.js';
import { type EmptyTip, LINEAGE_WINDOW, type NodeRecord, type RecordedChange, type Tip, type VersionRecord } from './model.js';
import type { TipChange } from './ports.js';

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

/** What a new version records besides its place: its cause, its author, its state and agent config. */
export interface VersionFields {
  state: Json;
  /** The agent config it records; the one of the version before when absent. */
  agent?: Json;
  at: string;
  cause: VersionRecord['cause'];
  author: string | null;
  decisionId?: string | null;
  commands?: Json[];
}

/**
 * What a version changes, kept with it so that the change event of a large state can carry
 * its change without reading the state (the store keeps it only for states in pieces).
 */
function changeBetween(prev: Json, next: Json): RecordedChange {
  const patch = mergePatchBetween(prev, next);
  return { ...(patch === undefined ? {} : { patch }), jsonPatch: jsonPatchBetween(prev, next) };
}

/** The version recorded on top of `base.tip`: the next number, whose slot the write claims. */
export function nextVersion(base: VersionBase, fields: VersionFields): VersionRecord {
  const { tip, current } = base;
  return {
    version: tip.version + 1,
    node: base.nodeId,
    prevVersion: base.pointer,
    cause: fields.cause,
    author: fields.author,
    decisionId: fields.decisionId ?? null,
    createdAt: fields.at,
    state: fields.state,
    agent: fields.agent !== undefined ? fields.agent : (current?.agent ?? null),
    lineage: nextLineage(current),
    ...(fields.commands ? { commands: fields.commands } : {}),
    ...(current?.stored ? { base: current.stored } : {}),
    change: changeBetween(current?.state ?? null, fields.state),
  };
}

/**
 * The change that records a new version at `base.nodeId`: the next version number, and the
 * pointer move the resolution rule asks for (the head's on the tip, any other node's in the
 * change itself, `repoint`). Writes and commits both record versions this way; a decision, which also moves the
 * head, builds its change around `nextVersion`.
 */
export function versionAt(
  base: VersionBase,
  fields: Omit<VersionFields, 'agent'>,
): { version: VersionRecord; change: Pick<TipChange, 'basedOn' | 'version' | 'prior' | 'head' | 'repoint' | 'newNodes'> } {
  const { tip, nodeId } = base;
  const version = nextVersion(base, fields);
  const atHead = nodeId === tip.head;
  return {
    version,
    change: {
      basedOn: tip,
      version,
      prior: base.current,
      head: { id: tip.head, version: atHead ? version.version : tip.headVersion, depth: tip.headDepth },
      ...(atHead ? {} : { repoint: { id: nodeId, version: version.version } }),
      newNodes: [],
    },
  };
}
