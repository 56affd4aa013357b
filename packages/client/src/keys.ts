import { backoffDelay, type RetryOptions, sleep } from './backoff.js';
import { decode, encode, isPlainObject } from './codec.js';
import { AgentStateError, CodecError, SchemaMismatchError } from './errors.js';
import type { CallOptions } from './http.js';
import type { StandardSchemaV1 } from './standard-schema.js';
import type { Command, CommitResult, Json, StateView } from './types.js';

/**
 * Typed keys: a top-level key of the session state with a schema and a default.
 *
 * - `defineKey('settings', schema, default)`: a static key.
 * - `defineKey('review/{id}/state', schema, default)`: a cell, one key per runtime address
 *   (`review/42/state` is a top-level key of the state); the `{id}` params are typed.
 * - `defineFold('votes', schema, initial, reducer)`: a key changed by typed deltas, each read,
 *   folded and committed against the version read (`expectedVersion`, the commit's
 *   `If-Match`), re-read and retried with backoff on `412 version_mismatch`.
 *
 * Reads never write: an absent key reads as its default. Stored data that does not match the
 * schema is an error (`SchemaMismatchError`), never silently replaced; `getLenient()` is the
 * explicit variant that falls back to the default and reports the mismatch. Writes validate
 * first and send nothing when the value does not match.
 *
 * Writes are thread-scope commits (`POST …/commits`, `merge: "disjoint"`): they set exactly
 * that key, verbatim (a merge patch could not store `null` members or replace an object whole).
 */

type ParamNames<Template extends string> = Template extends `${string}{${infer Name}}${infer Rest}` ? Name | ParamNames<Rest> : never;

/** The params of a key template: `{id: string | number}` for `review/{id}/state`. */
export type KeyParams<Template extends string> = { readonly [Name in ParamNames<Template>]: string | number };

/** No argument for a static key, the params for a cell. */
export type ParamsArg<Template extends string> = [ParamNames<Template>] extends [never] ? [] : [params: KeyParams<Template>];

/** The output type of a Standard Schema. */
export type Infer<Schema extends StandardSchemaV1> = StandardSchemaV1.InferOutput<Schema>;

export interface KeyDef<T, Template extends string = string> {
  readonly kind: 'key';
  /** `settings`, or `review/{id}/state` for a cell. */
  readonly template: Template;
  readonly schema: StandardSchemaV1<unknown, T>;
  /** What an absent key reads as (a fresh copy each time). */
  readonly defaultValue: T;
  /** The state key of an address: `review/42/state`. */
  address(...params: ParamsArg<Template>): string;
}

export interface FoldDef<T, Delta, Template extends string = string> {
  readonly kind: 'fold';
  readonly template: Template;
  readonly schema: StandardSchemaV1<unknown, T>;
  /** The value before any delta (what an absent key reads as). */
  readonly defaultValue: T;
  /** Applies one delta; must be pure (it runs again on every retry). */
  readonly reduce: (value: T, delta: Delta) => T;
  /** Validates deltas before anything is read or sent. */
  readonly deltaSchema: StandardSchemaV1<unknown, Delta> | undefined;
  address(...params: ParamsArg<Template>): string;
}

/** Guarded writes (`update`, fold `apply`): how often to re-read and retry on `412`. */
export type GuardedRetry = Pick<RetryOptions, 'attempts' | 'baseDelayMs' | 'maxDelayMs'>;
export const defaultGuardedRetry: GuardedRetry = { attempts: 50, baseDelayMs: 20, maxDelayMs: 1_000 };

export interface GuardedOptions extends CallOptions {
  /** Re-read and retry on `412 version_mismatch`. */
  conflictRetry?: Partial<GuardedRetry>;
}

/** A static key or a cell. The template's `{name}` params become typed params of `address`. */
export function defineKey<Schema extends StandardSchemaV1, const Template extends string>(
  template: Template,
  schema: Schema,
  defaultValue: Infer<Schema>,
): KeyDef<Infer<Schema>, Template> {
  checkTemplate(template);
  return {
    kind: 'key',
    template,
    schema: schema as StandardSchemaV1<unknown, Infer<Schema>>,
    defaultValue,
    address: (...params) => address(template, params[0]),
  };
}

/** A fold key: `reduce(value, delta)` applied by `apply(delta)` with automatic retries. */
export function defineFold<Schema extends StandardSchemaV1, Delta, const Template extends string>(
  template: Template,
  schema: Schema,
  initial: Infer<Schema>,
  reduce: (value: Infer<Schema>, delta: Delta) => Infer<Schema>,
  options: { deltaSchema?: StandardSchemaV1<unknown, Delta> } = {},
): FoldDef<Infer<Schema>, Delta, Template> {
  checkTemplate(template);
  return {
    kind: 'fold',
    template,
    schema: schema as StandardSchemaV1<unknown, Infer<Schema>>,
    defaultValue: initial,
    reduce,
    deltaSchema: options.deltaSchema,
    address: (...params) => address(template, params[0]),
  };
}

function checkTemplate(template: string): void {
  const names = [...template.matchAll(/\{([^{}]*)\}/g)].map((match) => match[1]);
  if (template.length === 0 || names.some((name) => !name) || /[{}]/.test(template.replace(/\{[^{}]+\}/g, ''))) {
    throw new TypeError(`key template ${JSON.stringify(template)} is malformed: use names in braces, e.g. review/{id}/state`);
  }
}

/** `review/{id}/state` + `{id: 42}` → `review/42/state`. */
function address(template: string, params: Record<string, string | number> | undefined): string {
  const key = template.replace(/\{([^{}]+)\}/g, (_match, name: string) => {
    const value = params?.[name];
    if (value === undefined) throw new TypeError(`key ${template} needs the param ${name}`);
    const text = String(value);
    // A param that held `/` could make two addresses collide (`a/{x}/{y}` with x="b/c").
    if (text === '' || text.includes('/'))
      throw new TypeError(`param ${name} of key ${template} must be non-empty and without "/", got ${JSON.stringify(text)}`);
    return text;
  });
  if (key.length > 256) throw new TypeError(`key ${key.slice(0, 40)}… is longer than 256 characters`);
  return key;
}

/** What a session handle offers typed keys: raw reads and keyed commits at its node. */
export interface KeyHost {
  readonly id: string;
  readRaw(call?: CallOptions): Promise<StateView<Json>>;
  commit(command: Command, expectedVersion: number | undefined, call?: CallOptions): Promise<CommitResult>;
}

/** The result of a lenient read. */
export interface LenientRead<T> {
  /** The stored value, or the default when absent or not matching. */
  value: T;
  /** Set when the stored value did not match and the default was returned instead. */
  error?: SchemaMismatchError;
}

/** A typed key bound to a session. */
export class BoundKey<T> {
  constructor(
    protected readonly host: KeyHost,
    /** The state key, e.g. `review/42/state`. */
    readonly key: string,
    protected readonly def: Pick<KeyDef<T>, 'schema' | 'defaultValue'>,
  ) {}

  /** The value; the default when absent. Throws `SchemaMismatchError` when stored data does not match. */
  async get(call?: CallOptions): Promise<T> {
    return (await this.readValue(await this.host.readRaw(call))).value;
  }

  /** Like `get`, but a stored value that does not match reads as the default, with the error reported. */
  async getLenient(report?: (error: SchemaMismatchError) => void, call?: CallOptions): Promise<LenientRead<T>> {
    try {
      return { value: await this.get(call) };
    } catch (error) {
      if (!(error instanceof SchemaMismatchError)) throw error;
      report?.(error);
      return { value: this.fallback(), error };
    }
  }

  /** Replaces the key's value (validated first; nothing is sent when it does not match). */
  async set(value: T, call?: CallOptions): Promise<T> {
    const valid = await this.validate(value, 'write');
    await this.host.commit({ key: this.key, scope: 'thread', merge: 'disjoint', set: encode(valid) }, undefined, call);
    return valid;
  }

  /**
   * Read, change, write against the version read; on `412` (someone wrote in between) it
   * reads again and retries with backoff. `change` must be pure: it may run more than once.
   */
  async update(change: (current: T) => T | Promise<T>, options: GuardedOptions = {}): Promise<T> {
    return this.guarded(change, options);
  }

  /** Removes the key (it then reads as its default). */
  async remove(call?: CallOptions): Promise<void> {
    await this.host.commit({ key: this.key, scope: 'thread', merge: 'disjoint', remove: true }, undefined, call);
  }

  protected async guarded(change: (current: T) => T | Promise<T>, options: GuardedOptions): Promise<T> {
    const retry = { ...defaultGuardedRetry, ...options.conflictRetry };
    for (let attempt = 1; ; attempt++) {
      const view = await this.host.readRaw(options);
      const { value: current } = await this.readValue(view);
      const next = await this.validate(await change(current), 'write');
      try {
        // The commit's expectedVersion is its If-Match: the state must still be at `view.version`.
        await this.host.commit({ key: this.key, scope: 'thread', merge: 'disjoint', set: encode(next) }, view.version, options);
        return next;
      } catch (error) {
        if (!AgentStateError.is(error, 'version_mismatch') || attempt >= retry.attempts) throw error;
        await sleep(backoffDelay(attempt, retry), options.signal);
      }
    }
  }

  protected async readValue(view: StateView<Json>): Promise<{ value: T; stored: boolean }> {
    const state = view.state;
    if (!isPlainObject(state) || !Object.hasOwn(state, this.key)) return { value: this.fallback(), stored: false };
    let decoded: unknown;
    try {
      decoded = decode((state as Record<string, Json>)[this.key] as Json);
    } catch (error) {
      // Stored data the codec cannot read does not match either.
      if (error instanceof CodecError)
        throw new SchemaMismatchError(this.key, 'read', [{ message: error.detail }], (state as Record<string, Json>)[this.key]);
      throw error;
    }
    return { value: await this.validate(decoded, 'read'), stored: true };
  }

  protected async validate(value: unknown, phase: 'read' | 'write'): Promise<T> {
    const result = await this.def.schema['~standard'].validate(value);
    if (result.issues) throw new SchemaMismatchError(this.key, phase, result.issues, value);
    return result.value;
  }

  /** A fresh copy of the default, so a caller's change to it never leaks into the next read. */
  protected fallback(): T {
    return decode<T>(encode(this.def.defaultValue));
  }
}

/** A fold key bound to a session. */
export class BoundFold<T, Delta> extends BoundKey<T> {
  constructor(
    host: KeyHost,
    key: string,
    private readonly fold: FoldDef<T, Delta>,
  ) {
    super(host, key, fold);
  }

  /** Folds one delta into the stored value and commits it; returns the new value. */
  async apply(delta: Delta, options: GuardedOptions = {}): Promise<T> {
    return this.applyAll([delta], options);
  }

  /** Folds several deltas, in order, as one write. */
  async applyAll(deltas: readonly Delta[], options: GuardedOptions = {}): Promise<T> {
    const checked: Delta[] = [];
    for (const delta of deltas) {
      if (!this.fold.deltaSchema) {
        checked.push(delta);
        continue;
      }
      const result = await this.fold.deltaSchema['~standard'].validate(delta);
      if (result.issues) throw new SchemaMismatchError(this.key, 'write', result.issues, delta);
      checked.push(result.value);
    }
    return this.guarded((current) => checked.reduce((value, delta) => this.fold.reduce(value, delta), current), options);
  }
}
