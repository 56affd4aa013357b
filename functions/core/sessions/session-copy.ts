import type { AllowedAgents } from '../agents/acting-agent.js';
import { requireMayWorkIn } from '../agents/agent-access.js';
import { encodedSize, type JsonObject } from '../json/json.js';
import { AgentStateError } from '../kernel/errors.js';
import { newId, ROOT_NODE } from '../kernel/ids.js';
import { allSettledOrThrow } from '../kernel/settled.js';
import { APPEND_LIMIT_BYTES, MAX_MESSAGES_PER_APPEND } from '../model/limits.js';
import type { NodeNotes, SessionScope, VersionRecord } from '../model/model.js';
import { nodeNotFound } from '../write/write-target.js';
import type { IncomingMessage } from './chain.js';
import type { SessionTreeService } from './session-tree-service.js';
import type { SessionView, TreeNodeView } from './session-views.js';

/** How many notes a copy puts at once. */
const NOTES_AT_ONCE = 16;

/** How many paths to the source's leaves a copy reads at once (a wide tree has a path per branch). */
const PATHS_AT_ONCE = 8;

/*
 * What one copy may write (`413 payload_too_large`, nothing written): a copy runs within one
 * request, and AWS ends the `tree` function at 20 s. Its writes go to one partition (the new
 * session's), which DynamoDB serves at most 1,000 write units a second: every node is an index
 * item (a unit), its messages' log items about a unit a KB. Each append is a turn of the log
 * (its tip read, the index it owes, its claim: about 25 ms on DynamoDB Local, about 40 ms in
 * AWS). Measured on DynamoDB Local (docs/architecture.md, Copying a session, "What one copy may
 * write"): an 11,000-node chain (220 appends) took 20 s alone and ran past the local 29 s in a
 * full test run, so the limits leave room: 6,000 nodes are about 6 s of the partition's units and
 * 9 s of DynamoDB Local's writes, 150 appends about 6 s in AWS and 4 s locally.
 */

/** The most nodes one copy writes (`limit: "nodes"`). */
export const COPY_NODE_LIMIT = 6_000;

/**
 * The most appends one copy makes (`limit: "appends"`): one for each run of at most 50 messages
 * of a branch, and one more wherever a node reads a state other than its parent's. A tree of many
 * short branches, or a conversation with a state at every node (LangGraph's checkpoints), costs
 * time its node count does not say.
 */
export const COPY_APPEND_LIMIT = 150;

/** The most bytes of messages (as JSON, each without its `parentId`) one copy writes. */
const COPY_MESSAGE_LIMIT_BYTES = 8 * 1024 * 1024;

/**
 * The most bytes of state one copy puts (`limit: "stateBytes"`): the pieces of its large states
 * that are not already those of the state before them on the path (each piece about a write
 * unit a KB, incompressible at worst), so 12 MiB are about 12 s of the partition's 1,000 units a
 * second (a copy at this limit and the node limit at once would pass AWS's 20 s: the limits are
 * each a bound, not a shared budget). Measured on DynamoDB Local (`npm start`):
 * 6 distinct states of 3.9 MiB copied in 5.6 s, 34 of them ran past the local 29 s (a `500`).
 */
const COPY_STATE_LIMIT_BYTES = 12 * 1024 * 1024;

/** What a version's item says of its state: its JSON text's bytes, and the pieces it is kept in (none when inline). */
export interface StoredState {
  bytes: number;
  pieces: readonly string[];
}

/** `POST /v1/sessions/{sid}/copy` (API.md section 12). */
export interface CopyRequest {
  /** The copy's id; generated when absent. An existing one is `409 session_exists`. */
  sessionId?: string;
  /** The path root→`node` (default: the source's head); the copy's head is `node`. */
  node?: string;
  /** The whole tree instead of one path; the copy's head is the source's. */
  tree?: boolean;
  /** The copy's metadata; the source's when absent. */
  metadata?: JsonObject | null;
}

export interface CopyPorts {
  /** The sessions and tree service that writes the copy: its appends must take a state (head-state.ts). */
  tree: SessionTreeService;
  /** A version of the source, with its state whole. */
  readVersion(scope: SessionScope, version: number): Promise<VersionRecord | null>;
  /** What versions of the source say of their states without reading them: their text's bytes and their pieces (none when inline). */
  storedStates(scope: SessionScope, versions: readonly number[]): Promise<ReadonlyMap<number, StoredState>>;
  /** The tenant's agents (who is below whom), for the sessions a key limited to agents may copy. */
  agents(tenant: string): Promise<readonly { agentId: string; parentId: string | null }[]>;
  /** Opens the session the copy `scope.copy` wrote: until then it reads as unknown to everyone else (SessionScope.copy). */
  open(scope: SessionScope & { copy: string }): Promise<void>;
}

/**
 * Copies a session (API.md section 12): a new session whose nodes read what they read in the
 * source and hold its notes, made of ordinary appends (and a put of each note), so that every rule of a write holds for it (limits, the
 * log's claims, activity, events). Each append carries a run of the source's messages; where a
 * node reads a state other than its parent's, the run ends with it and the append records that
 * state (with its agent config, cause and author) as the node's version. So the copy has one
 * version for each state its nodes read, numbered from 1, and costs about what writing the
 * messages once does; a large state is written in pieces the copy's later versions share, as
 * any state write's are. One state at a time is held, read just before the append that needs
 * it, so a long path of large states takes no more memory than one.
 *
 * Not a snapshot of one instant: versions are immutable, so the states are exact, but a message
 * appended to the source while the copy runs is in it only if the tree read saw it.
 *
 * All or nothing to everyone else: the copy writes under a mark of its own (SessionScope.copy)
 * that makes its session read as unknown to every other request, and its last change is the
 * one that opens it, whole: its last append when nothing is written after it (`fill`), else a
 * change of its own (`open`). A copy that fails after it made its session (a store
 * fault, a source version gone, a limit) deletes that session before it answers (`undo`), so a
 * retry, with the same `Idempotency-Key` or none, copies whole into it; one whose process stops
 * leaves only what nobody reads, which the id's next writer erases a minute on, or TTL
 * (docs/architecture.md, Copying a session).
 */
export class SessionCopier {
  constructor(private readonly ports: CopyPorts) {}

  async copy(source: SessionScope, request: CopyRequest, allowed: AllowedAgents = null): Promise<SessionView> {
    const { tree } = this.ports;
    const meta = await tree.getSession(source);
    // A key limited to agents copies only conversations it may work in (the copy is of the same agent).
    if (allowed && meta.agentId !== null) {
      requireMayWorkIn(allowed, await this.ports.agents(source.tenant), meta.agentId, 'copy');
    }
    const { head, nodes, notes } = await wholeTree(tree, source);
    const byId = new Map(nodes.map((node) => [node.id, node]));
    const target = request.tree ? head : (request.node ?? head);
    if (!byId.has(target)) throw nodeNotFound(target);
    const copied = request.tree ? nodes : pathTo(byId, target);
    checkCopyCounts(copied, byId);
    const messages = await this.messagesOf(source, request.tree ? leavesOf(nodes) : [target]);
    checkCopyBytes(copied, messages);
    const states = stateWritesOf(copied, byId);
    checkCopyStates(
      states,
      await this.ports.storedStates(
        source,
        states.flatMap((write) => [write.version, write.after]),
      ),
    );

    // The copy's mark: its session reads as unknown to all but this copy until `open`.
    const mark = newId();
    const copy = await tree.createSession(source.tenant, {
      ...(request.sessionId === undefined ? {} : { sessionId: request.sessionId }),
      agentId: meta.agentId,
      userId: meta.userId,
      metadata: request.metadata === undefined ? meta.metadata : request.metadata,
      copy: mark,
    });
    const scope = { tenant: source.tenant, sessionId: copy.sessionId, copy: mark };
    try {
      const opened = await this.fill(source, scope, { byId, copied, messages, notes, head: request.tree ? head : null });
      if (!opened) await this.ports.open(scope);
    } catch (error) {
      await this.undo(scope);
      throw closedUnder(error);
    }
    // Opened, it is an ordinary session: a DELETE of the id or an erasure of its user may close
    // it before this read. Then the copy answers as for one closed a moment earlier (409), not
    // 404, which would say that the session copied from is gone.
    return await tree.getSession({ tenant: scope.tenant, sessionId: scope.sessionId }).catch((error: unknown) => {
      throw closedUnder(error);
    });
  }

  /**
   * Writes the copy into `scope`, made a moment ago: the root's state, the chains of `copied`
   * (parents first), their notes, and the head when it is the source's (`head`, a whole tree).
   * Resolves with whether its last append opened the copy: it does when nothing is written
   * after it (no note, whose node must be there before it is put; no head to move) and it
   * records no version (`CopyWriter.chain`). An opening of its own after the last append pays
   * that append's index (a write unit a node: 50 for a run of 50), which the source's last
   * append still owes its next write; opened by that append, the copy owes it the same way.
   */
  private async fill(
    source: SessionScope,
    scope: SessionScope,
    plan: {
      byId: ReadonlyMap<string, TreeNodeView>;
      copied: readonly TreeNodeView[];
      messages: ReadonlyMap<string, JsonObject>;
      notes: Record<string, NodeNotes>;
      head: string | null;
    },
  ): Promise<boolean> {
    const { tree } = this.ports;
    const { byId, copied, messages, notes, head } = plan;
    const writer = new CopyWriter(this.ports, source, scope);
    const root = byId.get(ROOT_NODE) as TreeNodeView;
    // Each copied node's notes, put beside its copy once its nodes are all there.
    const copiedNotes = [...new Set([ROOT_NODE, ...copied.map((node) => node.id)])].flatMap((nodeId) =>
      Object.entries(notes[nodeId] ?? {}).map(([key, value]) => ({ nodeId, key, value })),
    );
    const chains = chainsOf(copied);
    // The last append may open the copy when it leaves the head where the copy's head is.
    const lastChain = chains.at(-1);
    const opensLast = copiedNotes.length === 0 && lastChain !== undefined && (head === null || lastChain.at(-1)?.id === head);
    await writer.write(ROOT_NODE, 0, [], root.stateVersion);
    let opened = false;
    // Parents before children: each chain hangs under a node already copied.
    for (const [index, chain] of chains.entries()) {
      const parent = byId.get(chain[0]?.parentId as string) as TreeNodeView;
      opened = await writer.chain(parent, chain, messages, opensLast && index === chains.length - 1);
    }
    // Notes a few at a time: each is a write of its own.
    for (let start = 0; start < copiedNotes.length; start += NOTES_AT_ONCE) {
      // Each settled before a failure is answered: the undo must come after the last of them.
      await allSettledOrThrow(
        copiedNotes.slice(start, start + NOTES_AT_ONCE).map(({ nodeId, key, value }) => tree.putNote(scope, nodeId, key, value)),
      );
    }
    // A tree's head where the source has it (the root too: a client may have switched back to it).
    if (!opened && head !== null && head !== writer.head) await tree.switchHead(scope, head);
    return opened;
  }

  /**
   * Deletes the session a failed copy made: the caller is answered an error, and the id is free
   * again at once. The copy made the session, so the id was free before it; with the copy's
   * scope, the delete erases it only while it still carries the copy's mark. Should the delete
   * fail too, what was written stays unread, and the id's next writer erases it a minute on.
   */
  private async undo(scope: SessionScope): Promise<void> {
    try {
      await this.ports.tree.deleteSession(scope);
    } catch {
      // Nothing more to do here: the first error is the answer.
    }
  }

  /**
   * The messages of the paths to `leaves`, by node id (a path read per leaf, PATHS_AT_ONCE at a
   * time; shared prefixes read again). One after the other, a tree of 1,000 short branches took
   * 18 s on DynamoDB Local to read.
   */
  private async messagesOf(source: SessionScope, leaves: readonly string[]): Promise<Map<string, JsonObject>> {
    const messages = new Map<string, JsonObject>();
    const waiting = leaves.filter((leaf) => leaf !== ROOT_NODE);
    const reader = async () => {
      for (let leaf = waiting.shift(); leaf !== undefined; leaf = waiting.shift()) {
        for (const message of (await this.ports.tree.getPath(source, leaf)).messages) messages.set(String(message.id), message);
      }
    };
    // Reads only: the first failure is the answer, and nothing was written yet.
    await Promise.all(Array.from({ length: Math.min(PATHS_AT_ONCE, waiting.length) }, reader));
    return messages;
  }
}

/**
 * The source's every node and every note: a tree read carries what one answer may (tree-pages.ts,
 * note-pages.ts), so the copy reads on from `next` and `notesNext` until nothing is left.
 */
async function wholeTree(
  tree: SessionTreeService,
  source: SessionScope,
): Promise<{ head: string; nodes: TreeNodeView[]; notes: Record<string, NodeNotes> }> {
  const first = await tree.getTree(source, { notes: true });
  const nodes = [...first.nodes];
  for (let cursor = first.next; cursor !== undefined; ) {
    const part = await tree.getTree(source, { cursor });
    nodes.push(...part.nodes);
    cursor = part.next;
  }
  const notes: Record<string, NodeNotes> = { ...first.notes };
  for (let cursor = first.notesNext; cursor !== undefined; ) {
    const part = await tree.readNotesPage(source, { cursor });
    for (const [nodeId, more] of Object.entries(part.notes)) {
      // Defined, not assigned: a node named `__proto__` is data.
      Object.defineProperty(notes, nodeId, { value: { ...notes[nodeId], ...more }, enumerable: true, writable: true, configurable: true });
    }
    cursor = part.next;
  }
  return { head: first.head, nodes, notes };
}

/** Writes the copy's appends into `scope`, reading states from `source` as they are needed. */
class CopyWriter {
  /** The copy's head: its last append's last node (the root before its first). */
  head: string = ROOT_NODE;

  constructor(
    private readonly ports: CopyPorts,
    private readonly source: SessionScope,
    private readonly scope: SessionScope,
  ) {}

  /**
   * Copies `chain` (each node the child of the one before) under `parent`, already copied. With
   * `opens`, its last append opens the copy when that costs less than an opening of its own
   * (`opensWithRun`); resolves with whether it did.
   */
  async chain(
    parent: TreeNodeView,
    chain: readonly TreeNodeView[],
    messages: ReadonlyMap<string, JsonObject>,
    opens = false,
  ): Promise<boolean> {
    let under = parent.id;
    const runs = [...runsOf(parent, chain, (node) => incomingOf(node, messages))];
    const last = runs.at(-1);
    const opening = opens && last !== undefined && opensWithRun(last);
    for (const [index, { run, reads, ends }] of runs.entries()) {
      under = await this.write(under, reads, run, ends, opening && index === runs.length - 1);
    }
    return opening;
  }

  /**
   * Appends `run` under `under` (which reads source version `reads`); its last node reads source
   * version `then`, recorded with the append when it differs; with `opens`, the append opens the
   * copy. Resolves with the last node's id.
   */
  async write(under: string, reads: number, run: IncomingMessage[], then: number, opens = false): Promise<string> {
    if (run.length === 0 && then === reads) return under;
    try {
      return await this.append(under, reads, run, then, opens);
    } catch (error) {
      // A run is cut by count and JSON bytes; what one change of the log holds is counted
      // compressed, and two of the source's appends that each fit may not together. Refused
      // before anything is written: the run goes in two halves (the state and the opening with the second).
      const messages = error instanceof AgentStateError && error.code === 'payload_too_large' && error.extras.field === 'messages';
      if (!messages || run.length < 2) throw error;
      const half = Math.ceil(run.length / 2);
      return this.write(await this.write(under, reads, run.slice(0, half), reads), reads, run.slice(half), then, opens);
    }
  }

  /** One append of `write`: the run, the state it ends with when it is another, and the opening with `opens`. */
  private async append(under: string, reads: number, run: IncomingMessage[], then: number, opens: boolean): Promise<string> {
    const version = then === reads ? null : await this.ports.readVersion(this.source, then);
    if (then !== reads && !version) {
      throw new AgentStateError('conflict', `version ${then} of the source is gone (it was deleted while copied); copy again`);
    }
    const result = await this.ports.tree.appendMessages(this.scope, {
      messages: run,
      parentId: under,
      // The copy's session is its own until it opens, and a tree's ids are distinct.
      newIds: true,
      ...(opens ? { opensCopy: true as const } : {}),
      ...(version
        ? {
            state: { replace: true, value: version.state },
            recordedAs: { agent: version.agent, cause: version.cause, author: version.author },
          }
        : {}),
    });
    this.head = result.head;
    return result.head;
  }
}

/**
 * What a copy answers when a write into its own session, or its read of it once opened, found it
 * gone (`node_not_found`, `session_not_found`): its session was closed under it (an erasure of
 * its user or tenant, which finds a copy not opened yet as any session of theirs; once opened, a
 * `DELETE` of the id too), and the request named none of those nodes, so `409 conflict`, as for a
 * source changed under it. Every other error is the answer as it is.
 */
function closedUnder(error: unknown): unknown {
  if (!(error instanceof AgentStateError) || (error.code !== 'node_not_found' && error.code !== 'session_not_found')) return error;
  return new AgentStateError(
    'conflict',
    'the session being copied into was closed (deleted, or its user or tenant erased) while the copy was made; copy again',
  );
}

/** One append of a copy: `run` under a node that reads source version `reads`; its last node reads `ends`. */
interface CopyRun<M> {
  run: M[];
  reads: number;
  ends: number;
  /** The run's messages as JSON, each without its `parentId`. */
  bytes: number;
}

/**
 * The appends that copy `chain` under `parent`, in order: runs of at most 50 messages and
 * APPEND_LIMIT_BYTES (what `POST …/messages` may carry), each ended early where a node reads a
 * state other than its parent's (the append records it). `messageOf` gives a node's message as
 * appended (its size is what counts); the count alone needs only the nodes (`checkCopyCounts`).
 */
function* runsOf<M>(
  parent: TreeNodeView,
  chain: readonly TreeNodeView[],
  messageOf: (node: TreeNodeView) => { message: M; bytes: number },
): Generator<CopyRun<M>> {
  let reads = parent.stateVersion;
  let run: M[] = [];
  let runBytes = 0;
  for (const node of chain) {
    const { message, bytes } = messageOf(node);
    // One append carries what `POST …/messages` may: the run is cut where it would not.
    if (run.length === MAX_MESSAGES_PER_APPEND || (run.length > 0 && runBytes + bytes > APPEND_LIMIT_BYTES)) {
      yield { run, reads, ends: reads, bytes: runBytes };
      run = [];
      runBytes = 0;
    }
    run.push(message);
    runBytes += bytes;
    if (node.stateVersion !== reads) {
      yield { run, reads, ends: node.stateVersion, bytes: runBytes };
      reads = node.stateVersion;
      run = [];
      runBytes = 0;
    }
  }
  if (run.length > 0) yield { run, reads, ends: reads, bytes: runBytes };
}

/**
 * Whether the copy's last append should open it (session-copy.ts `fill`). An opening of its own
 * after it is a small change (2 write units in its transaction, with 2 for the session item's
 * update) that pays the index the append owes (a unit a node). Opened by the append, the index
 * stays owed to the session's next write, as the source's last append's is, but the append's
 * change is written in the transaction (2 units a KB instead of 1) with the session item's
 * update (2): it pays when its change is fewer KB than its nodes, which the run's JSON bytes
 * bound from above (the change keeps the messages compressed when that is smaller). Not for a
 * run that records a version: the change hook takes an opening for the versions it releases,
 * and a version's change for its own event (stream-images.ts `openedCopyOf`).
 */
function opensWithRun(run: CopyRun<unknown>): boolean {
  return run.ends === run.reads && Math.ceil(run.bytes / 1024) <= run.run.length;
}

/** A node's message as a copy appends it (its `parentId` is the append's), and its size. */
function incomingOf(node: TreeNodeView, messages: ReadonlyMap<string, JsonObject>): { message: IncomingMessage; bytes: number } {
  const message = messages.get(node.id);
  if (!message) throw new AgentStateError('conflict', `node ${node.id} changed while it was being copied; copy again`);
  const { parentId: _parentId, ...incoming } = message;
  return { message: incoming as IncomingMessage, bytes: encodedSize(incoming) };
}

/**
 * `413 payload_too_large` when a copy of `copied` would write more nodes than COPY_NODE_LIMIT or
 * make more appends than COPY_APPEND_LIMIT: more than one request writes within the function's
 * time. Told by the tree read alone, before the messages are read and anything is written. The
 * appends are counted as runs of 50 (the bytes are not read yet): the least the copy makes.
 */
export function checkCopyCounts(copied: readonly TreeNodeView[], byId: ReadonlyMap<string, TreeNodeView>): void {
  const nodes = copied.filter((node) => node.id !== ROOT_NODE).length;
  if (nodes > COPY_NODE_LIMIT) {
    throw new AgentStateError('payload_too_large', `the copy would write ${nodes} nodes; one copy writes at most ${COPY_NODE_LIMIT}`, {
      limit: 'nodes',
      limitCount: COPY_NODE_LIMIT,
      count: nodes,
    });
  }
  let appends = 0;
  for (const chain of chainsOf(copied)) {
    const parent = byId.get(chain[0]?.parentId as string) as TreeNodeView;
    for (const _run of runsOf(parent, chain, () => ({ message: null, bytes: 0 }))) appends++;
  }
  if (appends > COPY_APPEND_LIMIT) {
    throw new AgentStateError(
      'payload_too_large',
      `the copy would make ${appends} appends (a run of at most 50 messages of each branch, and one more where a node reads a state of its own); one copy makes at most ${COPY_APPEND_LIMIT}`,
      { limit: 'appends', limitCount: COPY_APPEND_LIMIT, count: appends },
    );
  }
}

/** `413 payload_too_large` (`limitBytes`) when the copied nodes' messages pass COPY_MESSAGE_LIMIT_BYTES; read, nothing written. */
function checkCopyBytes(copied: readonly TreeNodeView[], messages: ReadonlyMap<string, JsonObject>): void {
  let bytes = 0;
  for (const node of copied) {
    const message = messages.get(node.id);
    if (message) bytes += incomingOf(node, messages).bytes;
  }
  if (bytes > COPY_MESSAGE_LIMIT_BYTES) {
    throw new AgentStateError(
      'payload_too_large',
      `the copied messages are ${bytes} bytes of JSON; one copy writes at most ${COPY_MESSAGE_LIMIT_BYTES}`,
      { limitBytes: COPY_MESSAGE_LIMIT_BYTES, sizeBytes: bytes },
    );
  }
}

/**
 * The states a copy of `copied` records, in order: the root's (over none), then each append's
 * that ends on a state other than the one it starts from (`runsOf`), with the state it follows.
 */
function stateWritesOf(
  copied: readonly TreeNodeView[],
  byId: ReadonlyMap<string, TreeNodeView>,
): Array<{ version: number; after: number }> {
  const root = byId.get(ROOT_NODE) as TreeNodeView;
  const writes = root.stateVersion === 0 ? [] : [{ version: root.stateVersion, after: 0 }];
  for (const chain of chainsOf(copied)) {
    const parent = byId.get(chain[0]?.parentId as string) as TreeNodeView;
    for (const { reads, ends } of runsOf(parent, chain, () => ({ message: null, bytes: 0 }))) {
      if (ends !== reads) writes.push({ version: ends, after: reads });
    }
  }
  return writes;
}

/**
 * `413 payload_too_large` (`limit: "stateBytes"`, `limitBytes`) when the states the copy records
 * would put more than COPY_STATE_LIMIT_BYTES of pieces: each large state counts the share of its
 * bytes in pieces the state it follows is not made of (a state changed a little since the one
 * before shares most of them; a distinct one counts whole), a small one its bytes. Read from the
 * version items alone, before anything is written.
 */
function checkCopyStates(writes: ReadonlyArray<{ version: number; after: number }>, stored: ReadonlyMap<number, StoredState>): void {
  let bytes = 0;
  for (const { version, after } of writes) {
    const state = stored.get(version);
    if (!state) continue;
    if (state.pieces.length === 0) {
      bytes += state.bytes;
      continue;
    }
    const before = new Set(stored.get(after)?.pieces ?? []);
    const added = state.pieces.filter((piece) => !before.has(piece)).length;
    bytes += Math.ceil((state.bytes * added) / state.pieces.length);
  }
  if (bytes > COPY_STATE_LIMIT_BYTES) {
    throw new AgentStateError(
      'payload_too_large',
      `the copy would put ${bytes} bytes of state (of its states not shared with the state before them); one copy puts at most ${COPY_STATE_LIMIT_BYTES}`,
      { limit: 'stateBytes', limitBytes: COPY_STATE_LIMIT_BYTES, sizeBytes: bytes },
    );
  }
}

/** The nodes of the path root→`target`, root excluded, in order. */
function pathTo(byId: ReadonlyMap<string, TreeNodeView>, target: string): TreeNodeView[] {
  const path: TreeNodeView[] = [];
  for (let node = byId.get(target); node && node.id !== ROOT_NODE; node = byId.get(node.parentId ?? '')) path.push(node);
  return path.reverse();
}

/** Nodes with no child (the root of a tree without messages is one). */
function leavesOf(nodes: readonly TreeNodeView[]): string[] {
  const parents = new Set(nodes.map((node) => node.parentId));
  return nodes.filter((node) => !parents.has(node.id)).map((node) => node.id);
}

/**
 * `nodes` (root excluded, parents before children) as chains: each chain is a node and, for as
 * long as there is one, its first child among `nodes`; every other child starts a chain of its
 * own, after the chain its parent is in. So each chain's first node hangs under a node copied
 * before it.
 */
function chainsOf(nodes: readonly TreeNodeView[]): TreeNodeView[][] {
  const children = new Map<string, TreeNodeView[]>();
  for (const node of nodes) {
    if (node.id === ROOT_NODE) continue;
    const siblings = children.get(node.parentId ?? '');
    if (siblings) siblings.push(node);
    else children.set(node.parentId ?? '', [node]);
  }
  const chains: TreeNodeView[][] = [];
  const starts = [...(children.get(ROOT_NODE) ?? [])];
  while (starts.length > 0) {
    const chain: TreeNodeView[] = [];
    for (let node = starts.shift(); node; ) {
      chain.push(node);
      const [first, ...others] = children.get(node.id) ?? [];
      starts.push(...others);
      node = first;
    }
    chains.push(chain);
  }
  return chains;
}
