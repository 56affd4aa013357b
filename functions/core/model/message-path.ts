import type { JsonObject } from '../json/json.js';

/** The messages root→node, oldest first, and the ids of the nodes they belong to (root first). */
export interface MessagePath {
  messages: JsonObject[];
  ancestry: string[];
}

/**
 * A path as the store read it. Cut to its last messages (a worker that sees only those), it
 * starts below the root: `ancestry` then lists the ids of `messages` only, and `omitted` says
 * how many messages came before them (0 for a whole path, whose ancestry starts at the root).
 */
export interface PathRead extends MessagePath {
  omitted: number;
}
