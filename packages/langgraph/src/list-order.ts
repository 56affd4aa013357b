import { type AgentStateApi, AgentStateError } from '@agentstate/client';
import { checkpointIdOf, nodeIdOf } from './ids.js';
import { inBatches } from './namespaces.js';

/** The role of a checkpoint's node (its message, a short record of the checkpoint, is what the inspector's tree shows). */
export const CHECKPOINT_ROLE = 'checkpoint';

/** A checkpoint node `list` may yield, and the version its state is. */
export interface ListCandidate {
  sessionId: string;
  nodeId: string;
  checkpointId: string;
  stateVersion: number;
}

/** What a `list` asks of one session's checkpoints: those before a checkpoint id, or one id alone. */
export interface CheckpointRange {
  before?: string;
  only?: string;
}

/**
 * One session's checkpoint nodes in the order `list` yields them, newest first by checkpoint id
 * (LangGraph's order: uuid6 ids sort by time), read a page at a time as far as the caller goes.
 *
 * A node's id is its checkpoint's id, escaped (ids.ts): `A-Z a-z 0-9 . _ : -` as they are, every
 * other byte `~XX`. Pages of nodes by id (`GET …/nodes`) come in the order of the escaped ids,
 * which is the checkpoints' order as long as no id holds an escape: an id of plain characters
 * sorts below another one's exactly when its checkpoint id does, and every node after it in the
 * pages (a smaller escaped id, escaped or not) has a smaller checkpoint id than it (`~` sorts
 * after every plain character, so a smaller escaped id differs first at a smaller plain one). So
 * the pages are read in order while their ids are plain; a page that holds an escaped id (a
 * checkpoint id with a space, `/`, a letter outside ASCII) turns the rest of the session into one
 * read of its whole tree, sorted by checkpoint id, as `list` read every session before. LangGraph's
 * own ids (uuid6) are plain.
 *
 * What that leaves: with `before`, the server starts below the escaped id of `before`. A
 * checkpoint id with an escaped byte that sorts before a plain character (`~20` for a space sorts
 * after every plain character, where the space sorts before them) may sort after `before` escaped
 * while its checkpoint id sorts before it; such a checkpoint is not listed below that `before`
 * unless the pages read show an escaped id (then the whole tree is read). Ids LangGraph makes never
 * hold one; a thread whose own ids do may list it with `before` left out.
 */
export class SessionCheckpoints {
  private buffered: ListCandidate[] = [];
  private cursor: string | undefined;
  /** The last node id of the pages read so far: everything after it is still to read. */
  private below: string | undefined;
  private done = false;
  /** Whether the rest is to come from the whole tree (escaped ids), and whether it did. */
  private needsWhole = false;
  private whole: ListCandidate[] | undefined;
  /** The session's newest version, once a page said it. */
  newest = 0;

  constructor(
    private readonly client: AgentStateApi,
    readonly sessionId: string,
    private readonly range: CheckpointRange,
  ) {
    // A `before` whose node id is escaped is not where the pages would start: the whole tree is read.
    if (range.before !== undefined && plainNodeId(range.before) === undefined) {
      this.done = true;
      this.needsWhole = true;
    }
  }

  /** The next checkpoint node, read a page of about `want` nodes when none is left; undefined at the end. */
  async peek(want: number): Promise<ListCandidate | undefined> {
    while (this.buffered.length === 0 && !this.done) await this.readPage(want);
    if (this.buffered.length === 0 && this.whole === undefined && this.needsWhole) await this.readWhole();
    return this.buffered[0];
  }

  /** Takes the node `peek` returned. */
  take(): ListCandidate | undefined {
    return this.buffered.shift();
  }

  private async readPage(want: number): Promise<void> {
    if (this.range.only !== undefined) return this.readOnly(this.range.only);
    try {
      const before = this.below ?? (this.range.before === undefined ? undefined : plainNodeId(this.range.before));
      const page = await this.client.tree.nodes(this.sessionId, {
        limit: Math.min(Math.max(want, 1), 500),
        ...(this.cursor === undefined ? (before === undefined ? {} : { before }) : { cursor: this.cursor }),
      });
      this.newest = Math.max(this.newest, page.version);
      if (page.nodes.some((node) => node.id.includes('~'))) {
        // Escaped ids: their order is not their checkpoints' from here on (above).
        this.done = true;
        this.needsWhole = true;
        return;
      }
      this.buffered = page.nodes.filter((node) => node.role === CHECKPOINT_ROLE).map((node) => this.candidate(node.id, node.stateVersion));
      this.below = page.nodes.at(-1)?.id ?? this.below;
      this.cursor = page.next;
      if (!page.next) this.done = true;
    } catch (error) {
      if (!AgentStateError.is(error, 'session_not_found')) throw error;
      this.done = true;
    }
  }

  /** `checkpoint_id` named: that one node, if the session has it and it is before `before`. */
  private async readOnly(only: string): Promise<void> {
    this.done = true;
    if (this.range.before !== undefined && !(only < this.range.before)) return;
    let nodeId: string;
    try {
      nodeId = nodeIdOf(only);
    } catch {
      return; // No checkpoint has an id no node can have.
    }
    try {
      const node = await this.client.tree.node(this.sessionId, nodeId);
      if (node.role === CHECKPOINT_ROLE) this.buffered = [this.candidate(node.id, node.stateVersion)];
    } catch (error) {
      if (!AgentStateError.is(error, 'session_not_found') && !AgentStateError.is(error, 'node_not_found')) throw error;
    }
  }

  /**
   * The rest of the session from its whole tree (every part), sorted by checkpoint id: the nodes
   * after the pages read (by node id), before `before` (by checkpoint id).
   */
  private async readWhole(): Promise<void> {
    this.whole = [];
    try {
      const tree = await this.client.tree.get(this.sessionId);
      this.newest = Math.max(this.newest, ...tree.nodes.map((node) => node.stateVersion));
      const { before } = this.range;
      this.whole = tree.nodes
        .filter((node) => node.role === CHECKPOINT_ROLE && (this.below === undefined || node.id < this.below))
        .map((node) => this.candidate(node.id, node.stateVersion))
        .filter((candidate) => before === undefined || candidate.checkpointId < before)
        .sort((a, b) => (a.checkpointId < b.checkpointId ? 1 : a.checkpointId > b.checkpointId ? -1 : 0));
    } catch (error) {
      if (!AgentStateError.is(error, 'session_not_found')) throw error;
    }
    this.buffered = this.whole;
  }

  private candidate(nodeId: string, stateVersion: number): ListCandidate {
    return { sessionId: this.sessionId, nodeId, checkpointId: checkpointIdOf(nodeId), stateVersion };
  }
}

/** The checkpoints of several sessions merged into one order, newest first by checkpoint id. */
export class CheckpointOrder {
  constructor(private readonly sessions: readonly SessionCheckpoints[]) {}

  /** The next checkpoint of all the sessions (each reading a page of about `want` when it has none left). */
  async peek(want: number): Promise<ListCandidate | undefined> {
    const heads = await inBatches(this.sessions, (session) => session.peek(want));
    let best: ListCandidate | undefined;
    for (const head of heads) if (head && (!best || head.checkpointId > best.checkpointId)) best = head;
    return best;
  }

  /** Takes the checkpoint `peek` returned. */
  take(candidate: ListCandidate): void {
    this.sessions.find((session) => session.sessionId === candidate.sessionId)?.take();
  }
}

/** A checkpoint's node id when it is plain (no escape), the order of node ids then being the checkpoints'. */
function plainNodeId(checkpointId: string): string | undefined {
  try {
    const nodeId = nodeIdOf(checkpointId);
    return nodeId.includes('~') ? undefined : nodeId;
  } catch {
    return undefined;
  }
}
