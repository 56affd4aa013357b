import type { AgentStateApi } from './api.js';
import { backoffDelay, sleep } from './backoff.js';
import { AgentStateError } from './errors.js';
import type { CallOptions } from './http.js';
import { applyChange } from './patch.js';
import type { Json, StateChangedEvent, Version } from './types.js';

/**
 * Live sync over the WebSocket API (API.md section 9): one connection per client, shared by
 * every `onStateChanged` listener, that resumes without gaps.
 *
 *   connect ──► subscribe s1 ──► ack ──► catch up: GET versions newer than the last delivered
 *                                   └──► events (buffered while catching up)
 *   drop ──► backoff ──► connect ──► subscribe ──► ack ──► catch up again ──► …
 *
 * Each listener delivers versions strictly in order, each exactly once: an event at or below
 * the last delivered version is a duplicate (same `id`) and is dropped; an event that skips
 * versions makes the listener fetch the missing ones first. Versions read back from history
 * are turned into the same event shape (`prev` is the state of `prevVersion`).
 */

/** The part of the WHATWG WebSocket the client uses; `ws` and browsers both provide it. */
export interface WebSocketLike {
  readonly readyState: number;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  /** `ws` only: drop the connection without a closing handshake. */
  terminate?(): void;
  onopen: ((event: unknown) => void) | null;
  onmessage: ((event: { data: unknown }) => void) | null;
  onclose: ((event: { code: number; reason: string }) => void) | null;
  onerror: ((event: { message?: string } & object) => void) | null;
}

export type WebSocketConstructor = new (url: string) => WebSocketLike;

const OPEN = 1;

export type LiveStatus = 'idle' | 'connecting' | 'open' | 'reconnecting' | 'closed';

export interface LiveOptions {
  /** The WebSocket API URL, e.g. `wss://…/prod` (AWS output `WebSocketUrl`); default `<baseUrl>/v1/ws` as ws(s)://. */
  url: string;
  apiKey: string;
  /** Default: the `ws` package in Node, else `globalThis.WebSocket`. */
  WebSocket?: WebSocketConstructor | undefined;
  /** Backoff between reconnects. @default { baseDelayMs: 200, maxDelayMs: 10_000 } */
  reconnect?: { baseDelayMs?: number; maxDelayMs?: number } | undefined;
}

/** What a listener is called with: the decoded next and previous state, and the event. */
export type StateListener<S> = (next: S, prev: S, event: StateChangedEvent) => void | Promise<void>;

export interface FollowOptions<S> {
  /** Deliver versions after this one; default: the session's latest version when subscribing. */
  since?: number;
  /** Errors that do not stop the subscription (a listener that threw, a failed catch-up, …); default `console.warn`. */
  onError?: (error: unknown) => void;
  /** Turns a stored state into the listener's value (the codec, and the initial state for version 0). */
  decode: (state: Json, version: number) => S;
  /** Options of the catch-up reads (e.g. `X-Agent-Id`). */
  call?: CallOptions;
}

/**
 * A live subscription: call it (or `unsubscribe()`) to stop. `ready` resolves once it is
 * subscribed and caught up; it rejects if the subscription cannot start (e.g. a refused key).
 */
export interface Subscription {
  (): void;
  unsubscribe(): void;
  readonly ready: Promise<void>;
  /** The last version delivered to the listener. */
  readonly lastVersion: number;
}

export class LiveSync {
  private socket: WebSocketLike | undefined;
  private readonly sessions = new Map<string, { followers: Set<Follower<unknown>>; subscribed: boolean }>();
  /** Subscribe/unsubscribe requests awaiting their answer: the server answers in order. */
  private inflight: Array<{ action: 'subscribe' | 'unsubscribe'; sessionId: string }> = [];
  private reconnectTimer: ReturnType<typeof setTimeout> | undefined;
  private reconnectAttempt = 0;
  private nextReconnectDelayMs: number | undefined;
  private lastSocketError: string | undefined;
  private closed = false;
  private connectCount = 0;
  private currentStatus: LiveStatus = 'idle';

  constructor(
    private readonly options: LiveOptions,
    private readonly api: AgentStateApi,
  ) {}

  /** Where the connection is. */
  get status(): LiveStatus {
    return this.currentStatus;
  }

  /** How many times a connection has opened (1 after the first connect, +1 per reconnect). */
  get connects(): number {
    return this.connectCount;
  }

  /** Starts delivering a session's versions to `listener`. */
  follow<S>(sessionId: string, listener: StateListener<S>, options: FollowOptions<S>): Subscription {
    if (this.closed) throw new AgentStateError('live_error', 0, 'the client is closed');
    const follower = new Follower<S>(sessionId, listener, options, this.api, (stopped) =>
      this.unfollow(sessionId, stopped as Follower<unknown>),
    );
    const stop = () => follower.stop();
    const ready = follower.start().then(() => {
      if (follower.stopped) return;
      this.register(sessionId, follower as Follower<unknown>);
      return follower.caughtUp;
    });
    // A caller that never looks at `ready` must not get an unhandled rejection.
    ready.catch(() => undefined);
    return Object.defineProperties(stop, {
      unsubscribe: { value: stop },
      ready: { value: ready },
      lastVersion: { get: () => follower.lastDelivered },
    }) as Subscription;
  }

  /**
   * Drops the connection the way a network failure would, without a closing handshake; the
   * client reconnects (after `reconnectDelayMs`, default its backoff) and catches up. For tests.
   */
  terminate(options: { reconnectDelayMs?: number } = {}): void {
    this.nextReconnectDelayMs = options.reconnectDelayMs;
    const socket = this.socket;
    if (!socket) return;
    if (socket.terminate) socket.terminate();
    else socket.close(4000, 'terminated by the client');
  }

  /** Closes the connection and stops every subscription. */
  close(): void {
    this.closed = true;
    clearTimeout(this.reconnectTimer);
    for (const { followers } of this.sessions.values()) for (const follower of followers) follower.stop();
    this.sessions.clear();
    this.disconnect();
    this.currentStatus = 'closed';
  }

  private register(sessionId: string, follower: Follower<unknown>): void {
    if (this.closed) {
      follower.stop();
      return;
    }
    let session = this.sessions.get(sessionId);
    if (!session) {
      session = { followers: new Set(), subscribed: false };
      this.sessions.set(sessionId, session);
    }
    session.followers.add(follower);
    if (session.subscribed) follower.onSubscribed();
    else if (
      this.socket?.readyState === OPEN &&
      !this.inflight.some((request) => request.sessionId === sessionId && request.action === 'subscribe')
    ) {
      this.send({ action: 'subscribe', sessionId });
    }
    this.ensureConnected();
  }

  private unfollow(sessionId: string, follower: Follower<unknown>): void {
    const session = this.sessions.get(sessionId);
    if (!session?.followers.delete(follower) || session.followers.size > 0) return;
    this.sessions.delete(sessionId);
    if (this.socket?.readyState === OPEN) this.send({ action: 'unsubscribe', sessionId });
    if (this.sessions.size === 0) {
      clearTimeout(this.reconnectTimer);
      this.disconnect();
      this.currentStatus = 'idle';
    }
  }

  private ensureConnected(): void {
    if (this.socket || this.reconnectTimer !== undefined || this.closed) return;
    void this.connect();
  }

  private async connect(): Promise<void> {
    this.currentStatus = this.connectCount === 0 ? 'connecting' : 'reconnecting';
    let socket: WebSocketLike;
    try {
      const WebSocketImpl = this.options.WebSocket ?? (await defaultWebSocket());
      if (this.closed || this.sessions.size === 0) return;
      socket = new WebSocketImpl(this.socketUrl());
    } catch (error) {
      this.failAll(
        error instanceof AgentStateError
          ? error
          : new AgentStateError('live_error', 0, `cannot open the live connection: ${String(error)}`, {}, { cause: error }),
      );
      return;
    }
    this.socket = socket;
    this.lastSocketError = undefined;
    socket.onopen = () => {
      this.connectCount++;
      this.reconnectAttempt = 0;
      this.currentStatus = 'open';
      for (const sessionId of this.sessions.keys()) this.send({ action: 'subscribe', sessionId });
    };
    socket.onmessage = (event) => this.receive(event.data);
    socket.onerror = (event) => {
      this.lastSocketError = typeof event?.message === 'string' ? event.message : 'WebSocket error';
    };
    socket.onclose = () => this.onClosed(socket);
  }

  private onClosed(socket: WebSocketLike): void {
    if (this.socket !== socket) return;
    this.socket = undefined;
    this.inflight = [];
    for (const session of this.sessions.values()) session.subscribed = false;
    if (this.closed || this.sessions.size === 0) return;
    // `ws` reports a refused upgrade as "Unexpected server response: 401".
    const refused = /Unexpected server response: (\d{3})/.exec(this.lastSocketError ?? '');
    if (refused && (refused[1] === '401' || refused[1] === '403')) {
      this.failAll(
        new AgentStateError(
          refused[1] === '401' ? 'unauthorized' : 'forbidden',
          Number(refused[1]),
          'the live connection was refused: check the API key',
        ),
      );
      return;
    }
    this.currentStatus = 'reconnecting';
    const reconnect = { baseDelayMs: this.options.reconnect?.baseDelayMs ?? 200, maxDelayMs: this.options.reconnect?.maxDelayMs ?? 10_000 };
    const delay = this.nextReconnectDelayMs ?? Math.max(50, backoffDelay(++this.reconnectAttempt, reconnect));
    this.nextReconnectDelayMs = undefined;
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = undefined;
      if (!this.closed && this.sessions.size > 0) void this.connect();
    }, delay);
  }

  private receive(data: unknown): void {
    let message: Record<string, unknown>;
    try {
      const text = typeof data === 'string' ? data : new TextDecoder().decode(data as ArrayBuffer | Uint8Array);
      message = JSON.parse(text) as Record<string, unknown>;
    } catch {
      return;
    }
    switch (message.type) {
      case 'state.changed': {
        const event = message as unknown as StateChangedEvent;
        const session = this.sessions.get(event.sessionId);
        if (session) for (const follower of session.followers) follower.offer(event);
        return;
      }
      case 'subscribed': {
        this.settle('subscribe', String(message.sessionId));
        const session = this.sessions.get(String(message.sessionId));
        if (!session) return;
        session.subscribed = true;
        for (const follower of session.followers) follower.onSubscribed();
        return;
      }
      case 'unsubscribed':
        this.settle('unsubscribe', String(message.sessionId));
        return;
      case 'error': {
        // Error answers name the session when the request held a well-formed id: take that
        // one, else the oldest request still waiting (answers come in request order).
        const request =
          typeof message.sessionId === 'string'
            ? (this.settle('subscribe', message.sessionId) ?? this.settle('unsubscribe', message.sessionId))
            : this.inflight.shift();
        const { type: _type, status, code, detail, ...extras } = message;
        const error = new AgentStateError(String(code), Number(status) || 0, String(detail ?? code), extras);
        if (request?.action !== 'subscribe') return;
        if (error.code === 'unauthorized') {
          // The server no longer knows this connection: start a new one.
          this.terminate();
          return;
        }
        const session = this.sessions.get(request.sessionId);
        if (session) for (const follower of [...session.followers]) follower.fail(error);
        return;
      }
    }
  }

  /** Removes (and returns) the waiting request that an answer answers. */
  private settle(
    action: 'subscribe' | 'unsubscribe',
    sessionId: string,
  ): { action: 'subscribe' | 'unsubscribe'; sessionId: string } | undefined {
    const index = this.inflight.findIndex((request) => request.action === action && request.sessionId === sessionId);
    return index < 0 ? undefined : this.inflight.splice(index, 1)[0];
  }

  private send(message: { action: 'subscribe' | 'unsubscribe'; sessionId: string }): void {
    this.inflight.push(message);
    this.socket?.send(JSON.stringify(message));
  }

  private disconnect(): void {
    const socket = this.socket;
    this.socket = undefined;
    this.inflight = [];
    if (socket && socket.readyState <= OPEN) socket.close(1000, 'done');
  }

  private failAll(error: AgentStateError): void {
    for (const { followers } of [...this.sessions.values()]) for (const follower of [...followers]) follower.fail(error);
    this.currentStatus = 'idle';
  }

  private socketUrl(): string {
    const url = this.options.url;
    return `${url}${url.includes('?') ? '&' : '?'}token=${encodeURIComponent(this.options.apiKey)}`;
  }
}

/** The `ws` package in Node (Node 20 has no global WebSocket), else the platform's. */
async function defaultWebSocket(): Promise<WebSocketConstructor> {
  if (typeof process !== 'undefined' && process.versions?.node) {
    try {
      const module = (await import('ws')) as unknown as { WebSocket?: WebSocketConstructor; default?: WebSocketConstructor };
      const WebSocketImpl = module.WebSocket ?? module.default;
      if (WebSocketImpl) return WebSocketImpl;
    } catch {
      // Not installed: fall through to the platform's.
    }
  }
  const platform = (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket;
  if (typeof platform === 'function') return platform;
  throw new AgentStateError('live_error', 0, 'no WebSocket implementation: install the ws package or pass options.WebSocket');
}

/** Versions whose states are kept for `prev` lookups. */
const STATE_CACHE_SIZE = 256;
/** A hole the history does not fill after this many reads is reported and skipped. */
const HOLE_ATTEMPTS = 8;

type Pending = { event: StateChangedEvent } | { version: Version };

/** One listener: its position in the session's history, and what waits to be delivered. */
class Follower<S> {
  lastDelivered = 0;
  stopped = false;
  /** Resolves after the first catch-up that followed a subscribe. */
  readonly caughtUp: Promise<void>;
  private resolveCaughtUp!: () => void;
  private rejectCaughtUp!: (error: unknown) => void;
  private hasCaughtUp = false;
  /** An event may precede the subscribe acknowledgement; `ready` waits for both. */
  private subscribed = false;
  private readonly pending = new Map<number, Pending>();
  private readonly states = new Map<number, Json>();
  private needCatchUp = false;
  private pumping = false;
  private holeAttempts = 0;

  constructor(
    readonly sessionId: string,
    private readonly listener: StateListener<S>,
    private readonly options: FollowOptions<S>,
    private readonly api: AgentStateApi,
    private readonly onStop: (follower: Follower<S>) => void,
  ) {
    this.caughtUp = new Promise((resolve, reject) => {
      this.resolveCaughtUp = resolve;
      this.rejectCaughtUp = reject;
    });
    this.caughtUp.catch(() => undefined);
  }

  /** Fixes the starting point: `since`, else the latest version now. */
  async start(): Promise<void> {
    try {
      this.lastDelivered = this.options.since ?? (await this.api.latestVersion(this.sessionId, this.options.call));
    } catch (error) {
      this.fail(error);
      throw error;
    }
  }

  onSubscribed(): void {
    this.subscribed = true;
    this.needCatchUp = true;
    void this.pump();
  }

  offer(event: StateChangedEvent): void {
    if (this.stopped || event.version <= this.lastDelivered || this.pending.has(event.version)) return;
    this.pending.set(event.version, { event });
    void this.pump();
  }

  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    this.pending.clear();
    this.resolveCaughtUp();
    this.onStop(this);
  }

  fail(error: unknown): void {
    if (this.stopped) return;
    this.rejectCaughtUp(error);
    this.report(error);
    this.stop();
  }

  private async pump(): Promise<void> {
    if (this.pumping || this.stopped) return;
    this.pumping = true;
    try {
      while (!this.stopped) {
        const next = this.lastDelivered + 1;
        const entry = this.pending.get(next);
        if (entry) {
          await this.deliver(next, entry);
          continue;
        }
        const hole = [...this.pending.keys()].some((version) => version > next);
        if (!this.needCatchUp && !hole) break;
        this.needCatchUp = false;
        await this.catchUp();
        if (hole && !this.pending.has(next)) await this.waitOrSkipHole(next);
      }
      if (!this.stopped && this.subscribed && !this.hasCaughtUp && !this.needCatchUp) {
        this.hasCaughtUp = true;
        this.resolveCaughtUp();
      }
    } catch (error) {
      this.report(error);
      // Try again later; nothing is lost, the next catch-up reads history again.
      this.needCatchUp = true;
      setTimeout(() => void this.pump(), 500);
    } finally {
      this.pumping = false;
    }
  }

  /** Reads every version newer than the last delivered (newest-first pages, until older ones). */
  private async catchUp(): Promise<void> {
    const after = this.lastDelivered;
    let cursor: string | undefined;
    try {
      do {
        const page = await this.api.versions.list(this.sessionId, { limit: 100, ...(cursor ? { cursor } : {}) }, this.options.call);
        let reachedOlder = false;
        for (const version of page.versions) {
          if (version.version <= after) {
            reachedOlder = true;
            break;
          }
          this.remember(version.version, version.state);
          if (!this.pending.has(version.version)) this.pending.set(version.version, { version });
        }
        cursor = reachedOlder ? undefined : page.next;
      } while (cursor !== undefined && !this.stopped);
    } catch (error) {
      // Not written yet: nothing to catch up on.
      if (!AgentStateError.is(error, 'session_not_found')) throw error;
    }
  }

  /** A version the events skipped and history does not show (yet): wait, then give up on it. */
  private async waitOrSkipHole(missing: number): Promise<void> {
    if (++this.holeAttempts <= HOLE_ATTEMPTS) {
      await sleep(backoffDelay(this.holeAttempts, { baseDelayMs: 50, maxDelayMs: 2_000 }) + 25);
      return;
    }
    const resume = Math.min(...[...this.pending.keys()].filter((version) => version > missing));
    this.report(
      new AgentStateError('live_error', 0, `versions ${missing}–${resume - 1} of session ${this.sessionId} could not be read; skipped`),
    );
    this.lastDelivered = resume - 1;
    this.holeAttempts = 0;
  }

  private async deliver(version: number, entry: Pending): Promise<void> {
    const event = await this.eventOf(entry);
    if (this.stopped) return;
    this.pending.delete(version);
    this.lastDelivered = version;
    this.holeAttempts = 0;
    // eventOf gives the event with its states (read back when it came without them).
    this.remember(version, event.next ?? null);
    let next: S;
    let prev: S;
    try {
      next = this.options.decode(event.next ?? null, event.version);
      prev = this.options.decode(event.prev ?? null, event.prevVersion);
    } catch (error) {
      this.report(error);
      return;
    }
    try {
      await this.listener(next, prev, event);
    } catch (error) {
      this.report(error);
    }
  }

  /**
   * The event of a pending entry, with its states. A truncated event of a large state carries
   * its change: applied to the state before it, when that is known, it gives the state without
   * reading it. Otherwise the version is read back.
   */
  private async eventOf(entry: Pending): Promise<StateChangedEvent> {
    if ('event' in entry && !entry.event.truncated) return entry.event;
    if ('event' in entry && this.states.has(entry.event.prevVersion)) {
      const prev = this.states.get(entry.event.prevVersion) as Json;
      const next = applyChange(prev, entry.event);
      if (next !== undefined) return { ...entry.event, next, prev };
    }
    const record = 'version' in entry ? entry.version : await this.api.versions.get(this.sessionId, entry.event.version, this.options.call);
    const prev = record.prevVersion === 0 ? null : await this.stateAt(record.prevVersion);
    return {
      id: `${this.sessionId}:${record.version}`,
      type: 'state.changed',
      sessionId: this.sessionId,
      node: record.node,
      version: record.version,
      prevVersion: record.prevVersion,
      cause: record.cause,
      author: record.author,
      decisionId: record.decisionId ?? null,
      next: record.state,
      prev,
      agent: record.agent,
      occurredAt: record.createdAt,
    };
  }

  private async stateAt(version: number): Promise<Json> {
    if (this.states.has(version)) return this.states.get(version) as Json;
    const record = await this.api.versions.get(this.sessionId, version, this.options.call);
    this.remember(version, record.state);
    return record.state;
  }

  private remember(version: number, state: Json): void {
    this.states.set(version, state);
    if (this.states.size > STATE_CACHE_SIZE) this.states.delete(this.states.keys().next().value as number);
  }

  private report(error: unknown): void {
    if (this.options.onError) this.options.onError(error);
    else console.warn(`agentstate: live subscription to ${this.sessionId}:`, error);
  }
}
