import type { Json } from '../json/json.js';
import type { VersionRecord } from '../model/model.js';
import type { TipChange } from '../model/ports.js';
import { nextLineage, type VersionBase } from '../model/tree.js';

/**
 * A new version, as the writes that record one make it (the state's writes, commits,
 * decisions): a module of its own, apart from tree.ts, because it imports what a version
 * changed on first use (version-change.ts), and a dynamic import splits the chunks of every
 * function whose bundle holds the module that makes it, used or not. The session, tree and
 * agents groups record no version and bundle tree.ts without it.
 */

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

/** The version recorded on top of `base.tip`: the next number, whose slot the write claims. */
export function nextVersion(base: VersionBase, fields: VersionFields): VersionRecord {
  const { tip, current } = base;
  const before = current?.state ?? null;
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
    // What it changed is worked out only when the store keeps it (a large state): core/write/version-change.ts.
    workOutChange: async () => (await import('./version-change.js')).changeBetween(before, fields.state),
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
