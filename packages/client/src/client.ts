import { AgentStateApi } from './api.js';
import { backoffDelay, type RetryOptions, sleep } from './backoff.js';
import { decode, encode, encodePatch, hasMergedTaggedValue, isPlainObject, mergeValues } from './codec.js';
import { AgentStateError } from './errors.js';
import { type CallOptions, HttpTransport } from './http.js';
import {
  BoundFold,
  BoundKey,
  defaultGuardedRetry,
  defineFold,
  defineKey,
  type FoldDef,
  type GuardedOptions,
  type Infer,
  type KeyDef,
  type KeyHost,
  type ParamsArg,
} from './keys.js';
import { LiveSync, type StateListener, type Subscription, type WebSocketConstructor } from './live.js';
import { MemoryNamespace, type MemoryNamespaceOptions } from './memory.js';
import type { StandardSchemaV1 } from './standard-schema.js';
import type { Command, CommitResult, Json, StateView } from './types.js';

export interface ClientOptions {
  /** The API's base URL: `http://localhost:4000` locally, the stack's `ApiUrl` in AWS. */
  baseUrl: string;
  /** An API key (`dev-key` locally). */
  apiKey: string;
  /** The agent this client acts as (`X-Agent-Id` on every request); none by default. */
  agentId?: string;
  /** Timeout of each attempt of a request. @default 30000 */
  timeoutMs?: number;
  /** Retries on network errors, timeouts, 429 and 503; `false` for none. @default { attempts: 4, baseDelayMs: 100, maxDelayMs: 5000 } */
  retry?: Partial<RetryOptions> | false;
  /** Extra headers on every request. */
  headers?: Record<string, string>;
  /** A fetch implementation; default `globalThis.fetch`. */
  fetch?: typeof fetch;
  /** The WebSocket API URL; default `<baseUrl>/v1/ws` (AWS: the stack's `WebSocketUrl`). */
  webSocketUrl?: string;
  /** A WebSocket implementation; default the `ws` package in Node, else `globalThis.WebSocket`. */
  WebSocket?: WebSocketConstructor;
  /** Backoff between live reconnects. @default { baseDelayMs: 200, maxDelayMs: 10000 } */
  reconnect?: { baseDelayMs?: number; maxDelayMs?: number };
}

export interface SessionOptions<S> {
  /** The agent this session handle acts as (`X-Agent-Id`); default the client's. */
  agentId?: string;
  /** What an unwritten session reads as; a read never writes it. The first write starts from it. */
  initialState?: S;
  /** Read and write at this node instead of the head. */
  node?: string;
}

/** A merge patch of `S`: plain objects merge (members optional, `null` deletes), anything else replaces. */
export type StatePatch<S> = S extends
  | Date
  | RegExp
  | Map<unknown, unknown>
  | Set<unknown>
  | ArrayBuffer
  | ArrayBufferView
  | readonly unknown[]
  | bigint
  | string
  | number
  | boolean
  | null
  | undefined
  ? S
  : S extends object
    ? { [K in keyof S]?: StatePatch<S[K]> | null }
    : S;

/** A state read: the decoded state and the version it is. */
export interface StateSnapshot<S> {
  state: S;
  /** 0 when nothing was written (the state is then the initial state). */
  version: number;
  node: string;
  updatedAt: string | null;
}

export interface OnStateChangedOptions {
  /** Deliver versions after this one; default the session's latest version at subscription. */
  since?: number;
  /** Errors that do not end the subscription (a throwing listener, a failed catch-up); default `console.warn`. */
  onError?: (error: unknown) => void;
}

/**
 * The client: every route of the API (`sessions`, `state`, `versions`, `agents`, `decide`,
 * `commits`, `webhooks`, …), session handles with the familiar state surface and the codec,
 * typed keys, and live sync.
 *
 * ```ts
 * const client = createClient({ baseUrl: 'http://localhost:4000', apiKey: 'dev-key' });
 * const chat = client.session('chat-1', { initialState: { turns: 0 } });
 * await chat.setState({ turns: 1 });
 * ```
 */
export class AgentStateClient extends AgentStateApi {
  /** The live connection shared by every `onStateChanged`. */
  readonly live: LiveSync;

  constructor(readonly options: ClientOptions) {
    super(
      new HttpTransport({
        baseUrl: options.baseUrl,
        apiKey: options.apiKey,
        agentId: options.agentId,
        fetch: options.fetch,
        timeoutMs: options.timeoutMs,
        retry: options.retry,
        headers: options.headers,
      }),
    );
    this.live = new LiveSync(
      {
        url: options.webSocketUrl ?? `${options.baseUrl.replace(/\/+$/, '').replace(/^http/, 'ws')}/v1/ws`,
        apiKey: options.apiKey,
        WebSocket: options.WebSocket,
        reconnect: options.reconnect,
      },
      this,
    );
  }

  /** A handle on one session's state. */
  session<S>(sessionId: string, options: SessionOptions<S> & { initialState: S }): SessionHandle<S>;
  session<S = unknown>(sessionId: string, options?: SessionOptions<S>): SessionHandle<S | null>;
  session<S>(sessionId: string, options: SessionOptions<S> = {}): SessionHandle<S | null> {
    return new SessionHandle<S | null>(this, sessionId, options as SessionOptions<S | null>);
  }

  /** A typed key (`settings`) or cell (`review/{id}/state`): see `defineKey`. */
  key<Schema extends StandardSchemaV1, const Template extends string>(
    template: Template,
    schema: Schema,
    defaultValue: Infer<Schema>,
  ): KeyDef<Infer<Schema>, Template> {
    return defineKey(template, schema, defaultValue);
  }

  /** A cell: a key with runtime params, e.g. `review/{id}/state`. The same as `key`. */
  readonly cell: AgentStateClient['key'] = this.key;

  /** A fold key: typed deltas applied by `reduce` and committed with retries: see `defineFold`. */
  fold<Schema extends StandardSchemaV1, Delta, const Template extends string>(
    template: Template,
    schema: Schema,
    initial: Infer<Schema>,
    reduce: (value: Infer<Schema>, delta: Delta) => Infer<Schema>,
    options?: { deltaSchema?: StandardSchemaV1<unknown, Delta> },
  ): FoldDef<Infer<Schema>, Delta, Template> {
    return defineFold(template, schema, initial, reduce, options);
  }

  /**
   * A memory namespace (docs/api.md §7c): `put`, `get`, `delete`, `search`, `list` and
   * `versions` with the codec, values checked against `options.schema` when given.
   * `client.memory([])` searches and lists everything the key may read.
   */
  memory<T extends object = Record<string, unknown>>(
    namespace: readonly string[],
    options: MemoryNamespaceOptions<T> = {},
  ): MemoryNamespace<T> {
    return new MemoryNamespace<T>(this.memoryItems, namespace, options);
  }

  /** Closes the live connection and stops every subscription. Requests still work. */
  close(): void {
    this.live.close();
  }
}

/** Creates a client. */
export function createClient(options: ClientOptions): AgentStateClient {
  return new AgentStateClient(options);
}

/**
 * One session's state with the codec: `getState`, `setState` (merge patch), `replaceState`,
 * `onStateChanged`, and typed keys.
 */
export class SessionHandle<S> implements KeyHost {
  /** Set once a read or write showed the session written: `initialState` no longer applies. */
  private written = false;

  constructor(
    private readonly client: AgentStateClient,
    readonly id: string,
    private readonly options: SessionOptions<S>,
  ) {}

  /** The state (decoded); `initialState` (or null) when nothing was written. Never writes. */
  async getState(call?: CallOptions): Promise<S> {
    return (await this.read(call)).state;
  }

  /** The state with its version. */
  async read(call?: CallOptions): Promise<StateSnapshot<S>> {
    const view = await this.readRaw(call);
    return { state: this.decodeAt(view.state, view.version), version: view.version, node: view.node, updatedAt: view.updatedAt };
  }

  /**
   * Merges `patch` into the state (RFC 7396 on decoded values: plain objects merge, `null`
   * deletes a member, anything else — arrays, Dates, Maps, … — replaces whole) and returns the
   * merged state. A function gets the current state and returns the patch (re-run on conflict).
   *
   * One `PATCH` in the common case. When the result depends on the current state (a tagged
   * value replacing what may be a plain object, a function, or the first write of a session
   * with `initialState`), it reads, merges here and writes with `If-Match`, retrying on `412`.
   */
  async setState(patch: StatePatch<S> | ((current: S) => StatePatch<S>), call: GuardedOptions = {}): Promise<S> {
    if (typeof patch === 'function') {
      const produce = patch as (current: S) => StatePatch<S>;
      return this.guardedWrite((current) => mergeValues(current, produce(current)) as S, call);
    }
    if (patch === undefined) throw new TypeError('setState needs a patch (null clears the state)');
    if (!isPlainObject(patch)) return this.replaceState(patch as S, call);
    const encoded = encodePatch(patch);
    if ((this.options.initialState === undefined || this.written) && !hasMergedTaggedValue(encoded)) {
      const result = await this.client.state.patch(this.id, encoded, this.writeOptions(call));
      this.written = true;
      return decode<S>(result.state);
    }
    return this.guardedWrite((current) => mergeValues(current, patch) as S, call);
  }

  /** Replaces the whole state; returns it as stored. */
  async replaceState(next: S, call?: CallOptions): Promise<S> {
    const result = await this.client.state.replace(this.id, encode(next), this.writeOptions(call));
    this.written = true;
    return decode<S>(result.state);
  }

  /**
   * Calls `listener(next, prev, event)` for every version recorded from now on (or after
   * `since`), in order, each exactly once, over the WebSocket, reconnecting and catching up
   * from history after a drop. Returns the subscription: call it to stop.
   */
  onStateChanged(listener: StateListener<S>, options: OnStateChangedOptions = {}): Subscription {
    return this.client.live.follow<S>(this.id, listener, {
      ...(options.since === undefined ? {} : { since: options.since }),
      ...(options.onError ? { onError: options.onError } : {}),
      decode: (state, version) => this.decodeAt(state, version),
      call: this.callOptions(),
    });
  }

  /** A typed key or cell of this session. */
  key<T, Template extends string>(def: KeyDef<T, Template>, ...params: ParamsArg<Template>): BoundKey<T> {
    return new BoundKey<T>(this, def.address(...params), def);
  }

  /** A fold key of this session. */
  fold<T, Delta, Template extends string>(def: FoldDef<T, Delta, Template>, ...params: ParamsArg<Template>): BoundFold<T, Delta> {
    return new BoundFold<T, Delta>(this, def.address(...params), def as FoldDef<T, Delta>);
  }

  /** Deletes the session (nodes, messages, versions); it then reads as unwritten. */
  async delete(call?: CallOptions): Promise<void> {
    await this.client.sessions.delete(this.id, { ...this.callOptions(), ...call });
    this.written = false;
  }

  /** The raw state view at this handle's node (for typed keys). */
  async readRaw(call?: CallOptions): Promise<StateView<Json>> {
    const view = await this.client.state.get(this.id, this.options.node === undefined ? {} : { node: this.options.node }, {
      ...this.callOptions(),
      ...call,
    });
    if (view.version > 0) this.written = true;
    return view;
  }

  /** A keyed thread commit at this handle's node (for typed keys). */
  async commit(command: Command, expectedVersion: number | undefined, call?: CallOptions): Promise<CommitResult> {
    const result = await this.client.commits.commit(
      this.id,
      { commands: [command], ...(expectedVersion === undefined ? {} : { expectedVersion }) },
      { ...this.callOptions(), ...call, ...(this.options.node === undefined ? {} : { node: this.options.node }) },
    );
    if (result.version > 0) this.written = true;
    return result;
  }

  /** Read, compute, `PUT` with `If-Match` the version read; on `412` read again (with backoff). */
  private async guardedWrite(compute: (current: S) => S, call: GuardedOptions): Promise<S> {
    const retry = { ...defaultGuardedRetry, ...call.conflictRetry };
    for (let attempt = 1; ; attempt++) {
      const view = await this.readRaw(call);
      const next = compute(this.decodeAt(view.state, view.version));
      try {
        const result = await this.client.state.replace(this.id, encode(next), { ...this.writeOptions(call), ifMatch: view.version });
        this.written = true;
        return decode<S>(result.state);
      } catch (error) {
        if (!AgentStateError.is(error, 'version_mismatch') || attempt >= retry.attempts) throw error;
        await sleep(backoffDelay(attempt, retry), call.signal);
      }
    }
  }

  /** A stored state as this handle's value: the initial state (a fresh copy) at version 0. */
  private decodeAt(state: Json, version: number): S {
    if (version === 0 && this.options.initialState !== undefined) return decode<S>(encode(this.options.initialState));
    return decode<S>(state);
  }

  private callOptions(): CallOptions {
    return this.options.agentId === undefined ? {} : { agentId: this.options.agentId };
  }

  private writeOptions(call: CallOptions | undefined): CallOptions & { node?: string } {
    return { ...this.callOptions(), ...call, ...(this.options.node === undefined ? {} : { node: this.options.node }) };
  }
}
