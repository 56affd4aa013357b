import { AgentStateError } from './errors.js';
import { requireId } from './ids.js';
import type { SessionScope } from './model.js';

/**
 * Live sync (API.md section 9): WebSocket clients follow sessions and receive their change
 * events. A connection belongs to the tenant of the key it connected with, and everything it
 * follows is in that tenant: a session id names the caller's own session, never another
 * tenant's, so another tenant's events cannot reach it.
 */

/** API Gateway ends every WebSocket connection after 2 hours; records outlive that a little. */
export const CONNECTION_TTL_SECONDS = 3 * 60 * 60;
/** Sessions one connection may follow at once. */
export const MAX_SUBSCRIPTIONS = 100;

export interface LiveConnection {
  tenant: string;
  /** The sessions it follows. */
  sessions: string[];
}

export interface LiveStore {
  putConnection(connectionId: string, tenant: string, expiresAt: number): Promise<void>;
  getConnection(connectionId: string): Promise<LiveConnection | null>;
  /** False when the connection is gone, or already follows `MAX_SUBSCRIPTIONS` other sessions. */
  subscribe(connectionId: string, scope: SessionScope, expiresAt: number): Promise<boolean>;
  unsubscribe(connectionId: string, scope: SessionScope): Promise<void>;
  /** Removes the connection and everything it follows. */
  deleteConnection(connectionId: string): Promise<void>;
  /** The connections following a session. */
  subscribers(scope: SessionScope): Promise<string[]>;
}

/** What the client is told after a subscribe or unsubscribe. */
export interface LiveAck {
  type: 'subscribed' | 'unsubscribed';
  sessionId: string;
}

export class LiveService {
  constructor(
    private readonly store: LiveStore,
    private readonly now: () => Date = () => new Date(),
  ) {}

  async connect(connectionId: string, tenant: string): Promise<void> {
    await this.store.putConnection(connectionId, tenant, this.expiry());
  }

  async subscribe(connectionId: string, sessionId: unknown): Promise<LiveAck> {
    const id = requireId(sessionId, 'sessionId');
    const connection = await this.requireConnection(connectionId);
    const scope = { tenant: connection.tenant, sessionId: id };
    if (!(await this.store.subscribe(connectionId, scope, this.expiry()))) {
      throw new AgentStateError('invalid_request', `a connection may follow at most ${MAX_SUBSCRIPTIONS} sessions; unsubscribe first`, {
        limit: MAX_SUBSCRIPTIONS,
      });
    }
    return { type: 'subscribed', sessionId: id };
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

  private async requireConnection(connectionId: string): Promise<LiveConnection> {
    const connection = await this.store.getConnection(connectionId);
    // Its record expired or was cleaned up: the client must connect again (with its key).
    if (!connection) throw new AgentStateError('unauthorized', 'this connection is no longer known; connect again');
    return connection;
  }

  private expiry(): number {
    return Math.floor(this.now().getTime() / 1000) + CONNECTION_TTL_SECONDS;
  }
}
