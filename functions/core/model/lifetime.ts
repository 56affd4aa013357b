import { AgentStateError } from '../kernel/errors.js';

/**
 * How long a session lives and how much of its history it keeps (API.md section 12). Settings
 * come from three places, field by field the most specific winning: the deployment's defaults
 * (the construct's `sessionDefaults`, locally `AGENTSTATE_SESSION_TTL_DAYS`), the agent's
 * registration (`lifetime`), the session (`PATCH /v1/sessions/{sid}`). A session takes the
 * defaults and its agent's registration when it starts; from then on its own settings are
 * carried on every change of its log, so that a read of the tip knows when it expires with no
 * read more.
 */

/** Which versions a session keeps (the lead's retention prunes by it; stored and validated here). */
export interface Retention {
  keepVersions?: number;
  keepDays?: number;
}

/**
 * The settings of one layer. A field absent from a layer inherits from the layer below;
 * `null` says "none" (keep forever, keep every version) and overrides what is below.
 */
export interface LifetimeSettings {
  /** Idle expiry: the session expires this long after its last write. */
  ttlSeconds?: number | null;
  /** Absolute expiry (ISO time). */
  expiresAt?: string | null;
  retention?: Retention | null;
}

/** A session's own settings once resolved: every field known. */
export interface Lifetime {
  ttlSeconds: number | null;
  /** Epoch ms. */
  expiresAtMs: number | null;
  retention: Retention | null;
}

export const NO_LIFETIME: Lifetime = { ttlSeconds: null, expiresAtMs: null, retention: null };

/** The longest idle expiry: ten years (API.md section 12; longer is a mistake, not a wish). */
const MAX_TTL_SECONDS = 10 * 365 * 24 * 60 * 60;

/** Field by field, the most specific layer that says anything wins (layers from least to most specific). */
export function resolveLifetime(...layers: ReadonlyArray<LifetimeSettings | null | undefined>): Lifetime {
  let resolved = NO_LIFETIME;
  for (const layer of layers) {
    if (!layer) continue;
    resolved = {
      ttlSeconds: layer.ttlSeconds !== undefined ? layer.ttlSeconds : resolved.ttlSeconds,
      expiresAtMs: layer.expiresAt !== undefined ? (layer.expiresAt === null ? null : Date.parse(layer.expiresAt)) : resolved.expiresAtMs,
      retention: layer.retention !== undefined ? layer.retention : resolved.retention,
    };
  }
  return resolved;
}

/** A resolved lifetime as a layer that says every field (for a `PATCH` over the session's own). */
export function layerOf(lifetime: Lifetime): LifetimeSettings {
  return {
    ttlSeconds: lifetime.ttlSeconds,
    expiresAt: lifetime.expiresAtMs === null ? null : new Date(lifetime.expiresAtMs).toISOString(),
    retention: lifetime.retention,
  };
}

/** Whether a lifetime says anything (one that does not is not stored). */
function hasLifetime(lifetime: Lifetime): boolean {
  return lifetime.ttlSeconds !== null || lifetime.expiresAtMs !== null || lifetime.retention !== null;
}

/**
 * When a session with `lifetime`, last written at `lastWriteMs`, expires (epoch ms): the
 * earlier of its idle and its absolute expiry; null when it has neither.
 */
export function expiryOf(lifetime: Lifetime, lastWriteMs: number): number | null {
  const idle = lifetime.ttlSeconds === null ? null : lastWriteMs + lifetime.ttlSeconds * 1000;
  if (idle === null) return lifetime.expiresAtMs;
  return lifetime.expiresAtMs === null ? idle : Math.min(idle, lifetime.expiresAtMs);
}

/** Whether an expiry moment (epoch ms, null: never) has come at `nowMs`. */
export function hasExpired(expiresAtMs: number | null | undefined, nowMs: number): boolean {
  return expiresAtMs !== null && expiresAtMs !== undefined && expiresAtMs <= nowMs;
}

// ---- checks: every one before anything is written ------------------------------------------

function invalid(field: string, detail: string): AgentStateError {
  return new AgentStateError('invalid_request', `${field} ${detail}`, { field });
}

/** `400` naming the field for a `ttlSeconds` that is not a whole number of seconds in (0, 10 years]. */
function checkTtlSeconds(value: number | null | undefined, field = 'ttlSeconds'): void {
  if (value === null || value === undefined) return;
  if (!Number.isSafeInteger(value) || value <= 0 || value > MAX_TTL_SECONDS) {
    throw invalid(field, `must be a whole number of seconds from 1 to ${MAX_TTL_SECONDS} (10 years)`);
  }
}

/** `400` naming the field for an `expiresAt` that is not an ISO time, or not in the future. */
function checkExpiresAt(value: string | null | undefined, nowMs: number, field = 'expiresAt'): void {
  if (value === null || value === undefined) return;
  const at = Date.parse(value);
  if (!ISO_TIME.test(value) || Number.isNaN(at)) throw invalid(field, 'must be an ISO 8601 time with its offset (2026-12-31T23:59:59Z)');
  if (at <= nowMs) throw invalid(field, 'must be in the future');
  if (at - nowMs > MAX_TTL_SECONDS * 1000) throw invalid(field, 'may be at most 10 years away');
}

/** An ISO 8601 date and time with seconds and an offset: what `Date.parse` reads the same everywhere. */
const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/;

/** `400` naming the field for a retention window under one version or one day. */
function checkRetention(value: Retention | null | undefined, field = 'retention'): void {
  if (value === null || value === undefined) return;
  for (const name of ['keepVersions', 'keepDays'] as const) {
    const window = value[name];
    if (window === undefined) continue;
    if (!Number.isSafeInteger(window) || window < 1) throw invalid(`${field}.${name}`, 'must be a whole number, at least 1');
  }
}

/** Every check of a layer of settings, each naming its field. */
export function checkLifetimeSettings(settings: LifetimeSettings, nowMs: number, prefix = ''): void {
  checkTtlSeconds(settings.ttlSeconds, `${prefix}ttlSeconds`);
  checkExpiresAt(settings.expiresAt, nowMs, `${prefix}expiresAt`);
  checkRetention(settings.retention, `${prefix}retention`);
}

// ---- the stored form (log items, session items, agents) ------------------------------------------

/** A lifetime as items keep it: short names, absent fields left out. */
export interface StoredLifetime {
  t?: number;
  e?: number;
  r?: Retention;
}

export function storedLifetime(lifetime: Lifetime): StoredLifetime | undefined {
  if (!hasLifetime(lifetime)) return undefined;
  return {
    ...(lifetime.ttlSeconds !== null ? { t: lifetime.ttlSeconds } : {}),
    ...(lifetime.expiresAtMs !== null ? { e: lifetime.expiresAtMs } : {}),
    ...(lifetime.retention !== null ? { r: lifetime.retention } : {}),
  };
}

export function lifetimeOf(stored: StoredLifetime | null | undefined): Lifetime {
  if (!stored || typeof stored !== 'object') return NO_LIFETIME;
  return {
    ttlSeconds: typeof stored.t === 'number' ? stored.t : null,
    expiresAtMs: typeof stored.e === 'number' ? stored.e : null,
    retention: stored.r && typeof stored.r === 'object' ? stored.r : null,
  };
}

/**
 * The deployment's defaults from its environment (the construct sets it from `sessionDefaults`):
 * `AGENTSTATE_SESSION_TTL_DAYS` (a number of days, maybe fractional) and `AGENTSTATE_RETENTION`
 * (`keepVersions=100`, `keepDays=30`, or both, comma-separated).
 */
function lifetimeDefaultsFrom(env: Readonly<Record<string, string | undefined>>): LifetimeSettings {
  const retention = retentionFrom(env.AGENTSTATE_RETENTION);
  return { ...ttlFrom(env), ...(retention ? { retention } : {}) };
}

function retentionFrom(text: string | undefined): Retention | undefined {
  const raw = text?.trim();
  if (!raw) return undefined;
  const retention: Retention = {};
  for (const part of raw.split(',')) {
    const [name = '', value = ''] = part.split('=').map((piece) => piece.trim());
    const window = Number(value);
    if ((name !== 'keepVersions' && name !== 'keepDays') || value === '' || !Number.isSafeInteger(window) || window < 1) {
      throw new Error(`AGENTSTATE_RETENTION must be keepVersions=<n>, keepDays=<n> or both (whole numbers from 1), not "${raw}"`);
    }
    retention[name] = window;
  }
  return retention;
}

function ttlFrom(env: Readonly<Record<string, string | undefined>>): LifetimeSettings {
  const raw = env.AGENTSTATE_SESSION_TTL_DAYS?.trim();
  if (!raw) return {};
  const days = Number(raw);
  const ttlSeconds = Math.round(days * 24 * 60 * 60);
  if (!Number.isFinite(days) || days <= 0 || ttlSeconds > MAX_TTL_SECONDS) {
    throw new Error(`AGENTSTATE_SESSION_TTL_DAYS must be a number of days above 0 and at most 3650, not "${raw}"`);
  }
  return { ttlSeconds: Math.max(1, ttlSeconds) };
}

/** The deployment's defaults as a lifetime, or undefined when they say nothing (then nothing expires unless asked). */
export function sessionDefaultsFrom(env: Readonly<Record<string, string | undefined>>): Lifetime | undefined {
  const settings = lifetimeDefaultsFrom(env);
  return Object.keys(settings).length > 0 ? resolveLifetime(settings) : undefined;
}
