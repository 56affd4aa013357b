import { encodedSize, type Json } from '../json/json.js';
import { AgentStateError } from '../kernel/errors.js';
import { ROOT_NODE } from '../kernel/ids.js';
import { applyTypedWrite, type Caller, type Schema, viewOf } from '../model/fields.js';
import { hasExpired, type Lifetime, NO_LIFETIME } from '../model/lifetime.js';
import {
  type DocumentKind,
  type NodeRecord,
  type SessionMeta,
  type SessionScope,
  STATE_LIMIT_BYTES,
  type Tip,
  type VersionRecord,
} from '../model/model.js';
import { type SessionStore, StaleTipError } from '../model/ports.js';
import { pointerOf, rootNode, type VersionBase } from '../model/tree.js';
import { isInFilteredList } from '../sessions/session-lists.js';

/**
 * The first half of every write — a state write, a commit, a decision — in one place: which
 * node is written, which version it points at, the session's agent and its typed fields; then
 * the write computed on the caller's view, merged back, checked against the state limit and
 * against `If-Match`. `SessionService`, `CommitService` and `DecideService` each hold one of
 * these rather than reaching into one another. Reads at a node resolve it the same way.
 */

/** The typed fields of a session whose agent is `agentId` (null when none are declared). */
export type SchemaSource = (tenant: string, agentId: string | null) => Promise<Schema | null>;

/** What resolving a node reads: the tip with the node, the session item, a version. */
export type TargetStore = Pick<SessionStore, 'readTip' | 'readTipWithNodes' | 'getMeta' | 'getVersion'>;

/**
 * A node as the tip and its item say: where it is and which version it points at (`current`
 * is null for version 0, and when the read asked for no state).
 */
export interface ResolvedNode extends VersionBase {
  depth: number;
}

/** A node about to be written, with what every write needs to know of its session. */
export interface WriteTarget extends ResolvedNode {
  /** The session's agent, carried on the tip (and on the version a write records). */
  sessionAgentId: string | null;
  /** The session's user, carried on the tip. */
  sessionUserId: string | null;
  /** Whether the session is in a filtered list, when its item was read (a first write): TipChange `sessionListed`. */
  sessionListed?: boolean;
  /** The session's lifetime for a first change of a life (its item's); absent: the tip carries it. */
  sessionLifetime?: Lifetime;
  /** When the session item's activity last moved, when its item was read (a first write): TipChange `sessionTouchedAt`. */
  sessionTouchedAt?: string;
  /** The session's typed fields; null when untyped. */
  schema: Schema | null;
}

/** The write targets at a node already in hand (decide's), and what every write target needs: the session's agent, user and typed fields. */
export class NodeTargets {
  constructor(protected readonly store: TargetStore) {}

  /**
   * A node already in hand (decide plans its node before anything is written) as a write
   * target: the version it points at, then its session's agent and typed fields, from
   * `schemas` (decide's: the tenant's agents it read already).
   */
  async atNode(
    scope: SessionScope,
    tip: Tip,
    node: Pick<NodeRecord, 'id' | 'depth' | 'stateVersion'>,
    schemas: SchemaSource,
    meta?: SessionMeta | null,
  ): Promise<WriteTarget> {
    const pointer = pointerOf(node, tip);
    const current = await this.currentVersion(scope, tip, pointer);
    return this.withFields(scope, { tip, nodeId: node.id, depth: node.depth, pointer, current }, schemas, meta);
  }

  /** A resolved node with its session's agent and typed fields. */
  async withFields(scope: SessionScope, node: ResolvedNode, schemas: SchemaSource, meta?: SessionMeta | null): Promise<WriteTarget> {
    const session = await this.sessionOf(scope, node.tip, meta);
    const schema = await schemas(scope.tenant, session.agentId);
    return {
      ...node,
      sessionAgentId: session.agentId,
      sessionUserId: session.userId,
      ...(session.listed === undefined ? {} : { sessionListed: session.listed }),
      ...(session.lifetime ? { sessionLifetime: session.lifetime } : {}),
      ...(session.touchedAt ? { sessionTouchedAt: session.touchedAt } : {}),
      schema,
    };
  }

  /**
   * The session's agent and user: carried on every tip; read from the session item before the
   * first write of a life (one extra read, once), or taken from `meta` when the caller has it.
   */
  async sessionOf(
    scope: SessionScope,
    tip: Tip,
    meta?: SessionMeta | null,
  ): Promise<{ agentId: string | null; userId: string | null; listed?: boolean; lifetime?: Lifetime; touchedAt?: string }> {
    if (tip.kind !== 'empty') return { agentId: tip.agentId, userId: tip.userId };
    const session = meta === undefined ? await this.store.getMeta(scope) : meta;
    // A first change carries the lifetime the session started with (API.md section 12); without
    // a session item, the store's defaults. A tip that carries one already says it.
    const lifetime = tip.lifetime ?? (session ? (session.lifetime ?? NO_LIFETIME) : undefined);
    return {
      agentId: session?.agentId ?? null,
      userId: session?.userId ?? null,
      listed: session ? isInFilteredList(session) : false,
      ...(lifetime ? { lifetime } : {}),
      ...(session ? { touchedAt: session.updatedAt } : {}),
    };
  }

  /** The version `pointer` with its state: the tip's own when it is that one, else one read. */
  async currentVersion(scope: SessionScope, tip: Tip, pointer: number): Promise<VersionRecord | null> {
    if (pointer === 0) return null;
    const current = tip.latest?.version === pointer ? tip.latest : await pointedVersion(this.store, scope, pointer, tip);
    if (!current) throw new AgentStateError('internal', `version ${pointer} is missing`);
    return current;
  }

  /**
   * A node by id, from what was read with the tip: `known`, or the tip's head; the implicit
   * root when it has no index. `404 node_not_found` otherwise.
   */
  nodeById(tip: Tip, known: ReadonlyMap<string, NodeRecord>, nodeId: string): NodeRecord {
    const node = known.get(nodeId) ?? (nodeId === tip.head ? tip.headNode : undefined);
    if (node) return node;
    if (nodeId === ROOT_NODE) return rootNode('');
    throw nodeNotFound(nodeId);
  }
}

/**
 * The write targets of the session service and of commits: a node found by id (or the head)
 * from the tip, and whether the session exists. Decide, which plans its node from what it read
 * itself, uses the base class alone (esbuild bundles every method of a class it bundles).
 */
export class WriteTargets extends NodeTargets {
  constructor(
    store: TargetStore,
    private readonly schemas: SchemaSource,
    /** The clock an expiry is compared with. */
    private readonly now: () => Date = () => new Date(),
  ) {
    super(store);
  }

  /** A resolved node with its session's agent and typed fields (from this service's source unless `schemas` is given). */
  override withFields(
    scope: SessionScope,
    node: ResolvedNode,
    schemas: SchemaSource = this.schemas,
    meta?: SessionMeta | null,
  ): Promise<WriteTarget> {
    return super.withFields(scope, node, schemas, meta);
  }

  /**
   * Finds the node a request addresses (the head when `nodeId` is absent) and the version it
   * points at: at most three rounds of reads (the tip; the node when one is named that the tip
   * does not hold; that version if the tip is not it). Returns null for a session that does
   * not exist, when a read may answer "empty"; a write gets `404 node_not_found` instead.
   * With `sessionItem`, the tip read also says whether a session with an empty log exists
   * (`EmptyTip.absent`), for a read whose answer depends on it.
   */
  async resolve(
    scope: SessionScope,
    nodeId: string | undefined,
    options: { forRead: boolean; withState?: boolean; fromReplica?: boolean; sessionItem?: boolean },
  ): Promise<ResolvedNode | null> {
    // A version pruned under a read (its node moved on after the tip was read) reads again.
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.resolveOnce(scope, nodeId, options);
      } catch (error) {
        if (!(error instanceof StaleTipError) || attempt >= RESOLVE_ATTEMPTS) throw error;
      }
    }
  }

  private async resolveOnce(
    scope: SessionScope,
    nodeId: string | undefined,
    options: { forRead: boolean; withState?: boolean; fromReplica?: boolean; sessionItem?: boolean },
  ): Promise<ResolvedNode | null> {
    const withState = options.withState ?? true;
    const { tip, nodes } = await this.store.readTipWithNodes(scope, nodeId === undefined ? [] : [nodeId], {
      withState,
      ...(options.fromReplica ? { fromReplica: true } : {}),
      ...(options.sessionItem ? { sessionItem: true } : {}),
    });
    const node = nodeId === undefined ? undefined : nodes.get(nodeId);
    let resolved: { id: string; depth: number; pointer: number };
    if (nodeId === undefined || nodeId === tip.head) {
      resolved = { id: tip.head, depth: tip.headDepth, pointer: tip.headVersion };
    } else if (node) {
      resolved = { id: node.id, depth: node.depth, pointer: node.stateVersion };
    } else if (nodeId === ROOT_NODE) {
      resolved = { id: ROOT_NODE, depth: 0, pointer: 0 };
    } else if (tip.replica) {
      // A replica's tip may be older than the node: only a consistent one says it is not there.
      return this.resolveOnce(scope, nodeId, { ...options, fromReplica: false });
    } else {
      // Unknown node of an unknown session: a read answers "empty", a write names the node
      // (and so needs no read of the session item to say so).
      if (options.forRead && (await this.sessionMissing(scope, tip))) return null;
      throw nodeNotFound(nodeId);
    }
    const current = withState ? await this.currentVersion(scope, tip, resolved.pointer) : null;
    return { tip, nodeId: resolved.id, depth: resolved.depth, pointer: resolved.pointer, current };
  }

  /** The node a write addresses (`404 node_not_found` if none), before its session's fields are read. */
  async resolveForWrite(scope: SessionScope, nodeId: string | undefined, fromReplica = false): Promise<ResolvedNode> {
    const resolved = await this.resolve(scope, nodeId, { forRead: false, fromReplica });
    if (!resolved) throw nodeNotFound(nodeId ?? ROOT_NODE);
    return resolved;
  }

  /** The node a write addresses, with its session's agent and typed fields. */
  async forWrite(scope: SessionScope, nodeId: string | undefined, fromReplica = false): Promise<WriteTarget> {
    return this.withFields(scope, await this.resolveForWrite(scope, nodeId, fromReplica));
  }

  /**
   * Whether the session does not exist. A tip means it does; without one (nothing written yet)
   * only the session item can tell, which costs a read, so callers ask only when it matters.
   */
  async sessionMissing(scope: SessionScope, tip: Tip): Promise<boolean> {
    if (tip.kind === 'closing') return true;
    // A tip read with the session item that found neither has told already.
    if (tip.kind === 'empty' && tip.absent) return true;
    return tip.kind === 'empty' && !liveMeta(await this.store.getMeta(scope), tip, this.now());
  }

  /** Whether the session exists, from the tip and the session item read together. */
  async sessionExists(scope: SessionScope): Promise<boolean> {
    const [tip, meta] = await Promise.all([this.store.readTip(scope, { withState: false }), this.store.getMeta(scope)]);
    if (tip.kind === 'closing') return false;
    return tip.kind !== 'empty' || liveMeta(meta, tip, this.now()) !== null;
  }

  /** `404 session_not_found` unless the session exists (see `sessionMissing`). */
  async requireSession(scope: SessionScope, tip: Tip): Promise<void> {
    if (await this.sessionMissing(scope, tip)) throw sessionNotFound(scope);
  }
}

// ---- the write itself ---------------------------------------------------------------------

/** The stored state at the target (all fields). */
export function storedState(target: Pick<ResolvedNode, 'current'>): Json {
  return target.current?.state ?? null;
}

/** `state` as `caller` may see it: with typed fields, only the fields it may read. */
export function visibleState(schema: Schema | null, caller: Caller, state: Json): Json {
  return schema ? viewOf(schema, caller, state) : state;
}

/**
 * A write as its caller means it: `next` gets the caller's view of the stored state; with
 * typed fields, what it returns is checked against what the caller may write and merged back
 * into the stored state, so fields outside that view are never touched.
 */
function typedWrite(target: Pick<WriteTarget, 'current' | 'schema'>, caller: Caller, next: (seen: Json) => Json): Json {
  const stored = storedState(target);
  if (!target.schema) return next(stored);
  // Values that no longer fit their type are in the view as stored: a write may replace them
  // (or clear them), and one that leaves any the caller reads is refused as a read of it is.
  const seen = viewOf(target.schema, caller, stored, 'keep');
  const written = applyTypedWrite(target.schema, caller, stored, seen, next(seen));
  viewOf(target.schema, caller, written);
  return written;
}

/** `typedWrite`, refused with `413 state_too_large` when the result is over the state limit. */
export function checkedWrite(
  target: Pick<WriteTarget, 'current' | 'schema'>,
  caller: Caller,
  next: (seen: Json) => Json,
  commitScope?: CommitScopeName,
): Json {
  const state = typedWrite(target, caller, next);
  checkStateSize(state, commitScope);
  return state;
}

/** The scope of a commit's command (API.md section 8), as a problem names it: the thread or a document. */
type CommitScopeName = 'thread' | DocumentKind;

/**
 * `413 state_too_large` for a state over the limit (the session state's, or `limitBytes` for a
 * commit's documents); `commitScope` names the scope of the commit that would write it.
 */
export function checkStateSize(state: Json, commitScope?: CommitScopeName, limitBytes: number = STATE_LIMIT_BYTES): void {
  const bytes = encodedSize(state);
  if (bytes <= limitBytes) return;
  throw new AgentStateError(
    'state_too_large',
    `the ${commitScope === undefined ? '' : `${commitScope} `}state would be ${bytes} bytes of JSON; the limit is ${limitBytes}`,
    { limitBytes, sizeBytes: bytes, ...(commitScope === undefined ? {} : { scope: commitScope }) },
  );
}

/**
 * What a write expects of the version its node points at: `If-Match` (RFC 9110: one of some
 * versions, or `*`, any recorded version), or a commit's `expectedVersion` (that one).
 */
export type VersionPrecondition = number | '*' | readonly number[];

/** `412 version_mismatch` when the node is not at a version the caller expects (`If-Match`, `expectedVersion`). */
export function checkIfMatch(target: Pick<ResolvedNode, 'nodeId' | 'pointer'>, expected: VersionPrecondition | undefined): void {
  if (expected === undefined) return;
  const { nodeId, pointer } = target;
  if (expected === '*') {
    if (pointer > 0) return;
    throw new AgentStateError('version_mismatch', `the state at node ${nodeId} has no recorded version (If-Match: *)`, {
      currentVersion: pointer,
    });
  }
  const versions = typeof expected === 'number' ? [expected] : expected;
  if (versions.includes(pointer)) return;
  throw new AgentStateError('version_mismatch', `the state at node ${nodeId} is at version ${pointer}, not ${versions.join(' or ')}`, {
    currentVersion: pointer,
  });
}

/**
 * The session item, unless it says the session expired (API.md section 12) where the tip
 * cannot: nothing in the log of this life carries a lifetime, so the item's expiry is exact.
 * (A tip that expired is closed by the store already.)
 */
export function liveMeta(meta: SessionMeta | null, tip: Tip, now: Date): SessionMeta | null {
  if (!meta || tip.kind === 'closing') return null;
  if (tip.lifetime === undefined && hasExpired(meta.expiresAtMs, now.getTime())) return null;
  return meta;
}

export function sessionNotFound(scope: SessionScope): AgentStateError {
  return new AgentStateError('session_not_found', `session ${scope.sessionId} does not exist`, {
    sessionId: scope.sessionId,
  });
}

export function nodeNotFound(nodeId: string): AgentStateError {
  return new AgentStateError('node_not_found', `node ${nodeId} does not exist`, { nodeId });
}

/** How many times a read resolves its node again when the version it found was pruned under it. */
const RESOLVE_ATTEMPTS = 3;

/**
 * The version a node or the head points at as of `tip`. Retention never prunes a version
 * something points at (store/log/history-prune.ts), so finding it pruned means the tip is
 * stale: the node moved on since, and the caller reads again (`StaleTipError`).
 */
export async function pointedVersion(
  store: Pick<SessionStore, 'getVersion'>,
  scope: SessionScope,
  version: number,
  tip: Tip,
): Promise<VersionRecord | null> {
  try {
    return await store.getVersion(scope, version, tip);
  } catch (error) {
    if (error instanceof AgentStateError && error.code === 'version_pruned')
      throw new StaleTipError('the version read was pruned: the node moved on');
    throw error;
  }
}
