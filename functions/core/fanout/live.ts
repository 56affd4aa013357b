import { type ActingAgentWording, requireActingAgent } from '../agents/acting-agent.js';
import { EVENT_MODES, type EventMode } from '../events/events.js';
import { AgentStateError } from '../kernel/errors.js';
import { requireId } from '../kernel/ids.js';
import { type Namespace, namespaceRoots, requireNamespace, withinRoots } from '../memory/memory.js';
import type { SessionScope } from '../model/model.js';
import { type SessionLog, StaleTipError } from '../model/ports.js';

/**
 * Live sync (API.md section 9): WebSocket clients follow sessions and receive their change
 * events. A connection belongs to the tenant of the key it connected with, and everything it
 * follows is in that tenant: a session id names the caller's own session, never another
 * tenant's, so another tenant's events cannot reach it.
 *
 * A subscription may name an agent (typed fields, API.md section 7): its events then carry
 * `next` and `prev` as that agent may see them (core/fanout/change-fanout.ts). A connection made with
 * a key limited to some agents must name one of them on every subscription.
 */

/** API Gateway ends every WebSocket connection after 2 hours; records outlive that a little. */
const CONNECTION_TTL_SECONDS = 3 * 60 * 60;
/** Sessions one connection may follow at once. */
export const MAX_SUBSCRIPTIONS = 100;
/**
 * How often a follow tries to put its mark on the session's log before it gives up: writers
 * that take the place first, or a delete under way (which it waits out).
 */
const FOLLOW_ATTEMPTS = 20;
/**
 * How much longer than the subscription a mark says the session may be followed. A session
 * followed without pause has its log marked about once per this, not once per subscribe: a
 * client subscribing again and again would otherwise write the log as often, and make the
 * session's writers lose their places. The cost: the change hook looks the followers up, a
 * read unit a version, for up to this long after the last of them left.
 */
const MARK_AHEAD_SECONDS = CONNECTION_TTL_SECONDS;

export interface LiveConnection {
  tenant: string;
  /** The sessions it follows. */
  sessions: string[];
  /** Present when its key is limited to these agents: every subscription names one of them. */
  agents?: string[];
  /**
   * The hash of the key it connected with, when that key can be revoked (a key of the table;
   * not one of `AGENTSTATE_API_KEYS`): what its messages and the events it follows check.
   */
  keyHash?: string;
}

/** A connection following a session, and the agent it follows it as (null: none, whole events). */
export interface LiveFollower {
  connectionId: string;
  agentId: string | null;
  /** `patch`: events without `next` and `prev` (subscribed with `"mode": "patch"`). */
  mode: EventMode;
  /** The connection's `keyHash` (LiveConnection), copied onto each follow: null when there is none. */
  keyHash: string | null;
}

/** A connection following a memory namespace (or one above it). */
export type NamespaceFollower = Pick<LiveFollower, 'connectionId' | 'mode' | 'keyHash'>;

/** How a connection follows: as an agent (sessions only), in a mode, and its key's hash (LiveConnection's). */
export interface Follow {
  agentId?: string | null;
  mode?: EventMode;
  keyHash?: string | null;
}

export interface LiveStore {
  /**
   * Follows the memory namespace `namespace` (and every namespace under it); false when the
   * connection is gone or already follows `MAX_SUBSCRIPTIONS` other namespaces.
   */
  subscribeNamespace(connectionId: string, tenant: string, namespace: Namespace, expiresAt: number, follow?: Follow): Promise<boolean>;
  unsubscribeNamespace(connectionId: string, tenant: string, namespace: Namespace): Promise<void>;
  /**
   * The connections following `namespace` or a namespace it lies under, each once: in `full`
   * mode when any of its subscriptions that match asked for it.
   */
  namespaceFollowers(tenant: string, namespace: Namespace): Promise<NamespaceFollower[]>;
  /** `agents`: those of a key limited to some agents; null or absent for any. `keyHash`: LiveConnection's. */
  putConnection(connectionId: string, tenant: string, expiresAt: number, agents?: string[] | null, keyHash?: string | null): Promise<void>;
  getConnection(connectionId: string): Promise<LiveConnection | null>;
  /**
   * False when the connection is gone, or already follows `MAX_SUBSCRIPTIONS` other sessions.
   * Subscribing again to a session it follows replaces the agent it follows it as.
   */
  subscribe(connectionId: string, scope: SessionScope, expiresAt: number, follow?: Follow): Promise<boolean>;
  unsubscribe(connectionId: string, scope: SessionScope): Promise<void>;
  /** Removes the connection and everything it follows. */
  deleteConnection(connectionId: string): Promise<void>;
  /** The connections following a session. */
  subscribers(scope: SessionScope): Promise<string[]>;
  /** The connections following a session, each with the agent it follows it as. */
  followers(scope: SessionScope): Promise<LiveFollower[]>;
}

/** What the client is told after a subscribe or unsubscribe (of a session, or of a memory namespace). */
export interface LiveAck {
  type: 'subscribed' | 'unsubscribed';
  sessionId?: string;
  namespace?: string[];
  /** On `subscribed`, when the subscription names an agent. */
  agentId?: string;
  /** On `subscribed`, when the subscription asked for `"mode": "patch"`. */
  mode?: EventMode;
}

/** A limited key's connection follows a session only as one of the key's agents. */
const SUBSCRIPTION_WORDING: ActingAgentWording = {
  missing: 'this connection\'s key acts as an agent: subscribe with "agentId", one of its agents',
  refused: (agentId) => `this connection's key may not receive events as agent ${agentId}`,
};

/** The session's log as a follow writes it: the tip, and the change that says the session has followers. */
export type FollowLog = Pick<SessionLog, 'readTip' | 'commit'>;

/**
 * Whether a key (by its hash) is still live: `KeyLiveness.isLive`. Absent, no key is checked
 * (tests of other things, tools).
 */
export type KeyCheck = (keyHash: string) => Promise<boolean>;

/** What a message of a connection whose key was revoked gets: `401`, and the connection is closed. */
export class RevokedKeyError extends AgentStateError {
  constructor() {
    super('unauthorized', "this connection's API key was revoked; the connection is closed");
  }
}

export class LiveService {
  constructor(
    private readonly store: LiveStore,
    private readonly log: FollowLog,
    private readonly now: () => Date = () => new Date(),
    private readonly keyLive?: KeyCheck,
  ) {}

  /**
   * `agents`: those of a key limited to some agents (null or absent: any, or none). `keyHash`:
   * the key's hash when it can be revoked, so that its messages and its events are checked.
   */
  async connect(connectionId: string, tenant: string, agents: string[] | null = null, keyHash: string | null = null): Promise<void> {
    await this.store.putConnection(connectionId, tenant, this.expiry(), agents && agents.length > 0 ? agents : null, keyHash);
  }

  /**
   * `agentId` (optional): receive the session's events as this agent may see them. `mode`
   * (optional): `"patch"` for events without `next` and `prev`, `"full"` (the default) for all.
   */
  async subscribe(connectionId: string, sessionId: unknown, agentId?: unknown, mode?: unknown): Promise<LiveAck> {
    const id = requireId(sessionId, 'sessionId');
    const agent = agentId === undefined || agentId === null ? null : requireId(agentId, 'agentId');
    const eventMode = mode === undefined || mode === null ? 'full' : requireMode(mode);
    const connection = await this.requireConnection(connectionId);
    requireActingAgent(connection.agents, agent, SUBSCRIPTION_WORDING);
    const scope = { tenant: connection.tenant, sessionId: id };
    const expiresAt = this.expiry();
    if (
      !(await this.store.subscribe(connectionId, scope, expiresAt, {
        agentId: agent,
        mode: eventMode,
        keyHash: connection.keyHash ?? null,
      }))
    ) {
      throw new AgentStateError('invalid_request', `a connection may follow at most ${MAX_SUBSCRIPTIONS} sessions; unsubscribe first`, {
        limit: MAX_SUBSCRIPTIONS,
      });
    }
    // The follower first, then the mark: a change the mark's place precedes was made before
    // the subscription was answered; every change after it carries the mark, and the change
    // hook, told so by the change's stream image, then finds this follower.
    await this.markFollowed(scope, expiresAt);
    return {
      type: 'subscribed',
      sessionId: id,
      ...(agent === null ? {} : { agentId: agent }),
      ...(eventMode === 'patch' ? { mode: eventMode } : {}),
    };
  }

  /**
   * Follows a memory namespace and everything under it (`memory.changed` events). A key
   * limited to agents follows only namespaces it may read (`agents/<its agent>…`, `shared…`).
   * `mode` as for a session. Memory events are not cut to an agent's view, so `agentId` is
   * not needed; when one is named, it must be an agent the key may act as, as for a session.
   */
  async subscribeNamespace(connectionId: string, namespace: unknown, mode?: unknown, agentId?: unknown): Promise<LiveAck> {
    const path = requireNamespaceArray(namespace);
    const eventMode = mode === undefined || mode === null ? 'full' : requireMode(mode);
    const agent = agentId === undefined || agentId === null ? null : requireId(agentId, 'agentId');
    const connection = await this.requireConnection(connectionId);
    if (agent !== null) requireActingAgent(connection.agents, agent, SUBSCRIPTION_WORDING);
    if (!withinRoots(path, namespaceRoots(connection.agents))) {
      throw new AgentStateError(
        'forbidden',
        "this connection's key may follow only namespaces that begin with agents/<one of its agents> or shared",
        { agents: connection.agents },
      );
    }
    if (
      !(await this.store.subscribeNamespace(connectionId, connection.tenant, path, this.expiry(), {
        mode: eventMode,
        keyHash: connection.keyHash ?? null,
      }))
    ) {
      throw new AgentStateError('invalid_request', `a connection may follow at most ${MAX_SUBSCRIPTIONS} namespaces; unsubscribe first`, {
        limit: MAX_SUBSCRIPTIONS,
      });
    }
    return { type: 'subscribed', namespace: path, ...(eventMode === 'patch' ? { mode: eventMode } : {}) };
  }

  async unsubscribeNamespace(connectionId: string, namespace: unknown): Promise<LiveAck> {
    const path = requireNamespaceArray(namespace);
    const connection = await this.requireConnection(connectionId);
    await this.store.unsubscribeNamespace(connectionId, connection.tenant, path);
    return { type: 'unsubscribed', namespace: path };
  }

  async unsubscribe(connectionId: string, sessionId: unknown): Promise<LiveAck> {
    const id = requireId(sessionId, 'sessionId');
    const connection = await this.requireConnection(connectionId);
    await this.store.unsubscribe(connectionId, { tenant: connection.tenant, sessionId: id });
    return { type: 'unsubscribed', sessionId: id };
  }

  async disconnect(connectionId: string): Promise<void> {
    await this.store.deleteConnection(connectionId);
  }

  /**
   * Puts on the session's log that it has followers until `until` (epoch seconds): a change of
   * the log's next place like any write's, so a write that read the tip before it loses its
   * place and reads again, and carries the mark on. The change hook looks for a session's
   * followers only when a change carries it (core/fanout/change-fanout.ts): a session nobody
   * follows costs no read a change. A mark that already reaches `until` is left as it is.
   *
   * A session with no life (never written, or deleted) gets its mark all the same, as its
   * life's first change: a write that read the empty log before it must lose its place to it,
   * or the life's first version would go unsent. But nothing of the session keeps that mark, so
   * the store gives it the table's TTL at its own `until` and moves it on in its place, never
   * beside it; the life's first change takes it into the life (session-writes.ts, `loneMarkOf`).
   * So subscriptions to ids nobody writes leave nothing that outlives them by more than the
   * mark's reach (API.md section 12), and a session nobody follows still costs no read.
   */
  private async markFollowed(scope: SessionScope, until: number): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      const tip = await this.log.readTip(scope, { withState: false });
      if ((tip.followersUntil ?? 0) >= until) return;
      try {
        await this.log.commit(scope, {
          basedOn: tip,
          head: { id: tip.head, version: tip.headVersion, depth: tip.headDepth },
          newNodes: [],
          mayCreateSession: false,
          follow: until + MARK_AHEAD_SECONDS,
        });
        return;
      } catch (error) {
        if (!(error instanceof StaleTipError)) throw error;
        if (attempt >= FOLLOW_ATTEMPTS) {
          throw new AgentStateError('conflict', 'the session is changing too fast to follow (or is being deleted); subscribe again', {
            attempts: attempt,
          });
        }
        // Another change took the place (read again at once), or a delete is erasing the session: wait it out.
        if (tip.kind === 'closing') await new Promise((resolve) => setTimeout(resolve, Math.min(50 * attempt, 500)));
      }
    }
  }

  /**
   * The connection a message came on. Every message checks the connection's key too (at most
   * `KEY_RECHECK_MS` stale, key-liveness.ts): a key revoked since the connection was made
   * gets `RevokedKeyError`, and its connection's records go, so that it follows nothing
   * more; the handler closes the connection.
   */
  private async requireConnection(connectionId: string): Promise<LiveConnection> {
    const connection = await this.store.getConnection(connectionId);
    // Its record expired or was cleaned up: the client must connect again (with its key).
    if (!connection) throw new AgentStateError('unauthorized', 'this connection is no longer known; connect again');
    if (connection.keyHash && this.keyLive && !(await this.keyLive(connection.keyHash))) {
      await this.store.deleteConnection(connectionId);
      throw new RevokedKeyError();
    }
    return connection;
  }

  private expiry(): number {
    return Math.floor(this.now().getTime() / 1000) + CONNECTION_TTL_SECONDS;
  }
}

function requireMode(mode: unknown): EventMode {
  if (EVENT_MODES.includes(mode as EventMode)) return mode as EventMode;
  throw new AgentStateError('invalid_request', 'mode must be "full" or "patch"', { field: 'mode' });
}

function requireNamespaceArray(namespace: unknown): string[] {
  if (!Array.isArray(namespace))
    throw new AgentStateError('invalid_request', 'namespace is an array of 1 to 8 ids', { field: 'namespace' });
  return requireNamespace(namespace, 'namespace');
}
