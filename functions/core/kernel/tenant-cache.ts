/**
 * What every request of a tenant would otherwise read from one partition key (the agent
 * registry with the shared document, the webhook list), read at most once a second per
 * function instance, whatever the traffic (API.md section 14): a fleet of N instances reads
 * such a key about N times a second.
 *
 * How a change reaches every instance: a write through this process drops the tenant's entry
 * of every cache of its kind in the process at once (`invalidateTenant`; `npm start` is one
 * process, so locally a change is seen by the very next request), and every other instance
 * reads again once its entry is `TENANT_READ_MAX_AGE_MS` old. So a registration change is
 * seen everywhere within that bound (plus one read's time), and by its writer's own instance
 * at once. test/integration/tenant-reads.test.ts holds both.
 */
export const TENANT_READ_MAX_AGE_MS = 1_000;

/** The caches whose tenants a write must drop: one name per item kind. */
export type TenantCacheKind = 'registry' | 'webhooks';

/** Tenants one cache keeps at most; a function instance serves few (the least recently read go first). */
const MAX_TENANTS = 1_000;

const caches = new Map<TenantCacheKind, Set<TenantCache<unknown>>>();

export class TenantCache<T> {
  private readonly entries = new Map<string, { readAt: number; value: Promise<T> }>();

  constructor(
    kind: TenantCacheKind,
    private readonly read: (tenant: string) => Promise<T>,
    private readonly now: () => number = Date.now,
    private readonly maxAgeMs = TENANT_READ_MAX_AGE_MS,
  ) {
    const ofKind = caches.get(kind) ?? new Set();
    ofKind.add(this as TenantCache<unknown>);
    caches.set(kind, ofKind);
  }

  /**
   * The tenant's value, read when none was read within the bound (or within `maxAgeMs`: 0 for a
   * request that missed something in the copy); requests at once share one read.
   */
  get(tenant: string, maxAgeMs: number = this.maxAgeMs): Promise<T> {
    const now = this.now();
    const entry = this.entries.get(tenant);
    if (entry && now - entry.readAt < Math.min(maxAgeMs, this.maxAgeMs) && now >= entry.readAt) {
      // Most recently read last, so that the oldest is dropped first.
      this.entries.delete(tenant);
      this.entries.set(tenant, entry);
      return entry.value;
    }
    const fresh = { readAt: now, value: this.read(tenant) };
    this.entries.set(tenant, fresh);
    if (this.entries.size > MAX_TENANTS) this.entries.delete(this.entries.keys().next().value as string);
    // A failed read is not kept: the next request reads again.
    fresh.value.catch(() => {
      if (this.entries.get(tenant) === fresh) this.entries.delete(tenant);
    });
    return fresh.value;
  }

  /** Forgets the tenant: the next request reads it again. */
  drop(tenant: string): void {
    this.entries.delete(tenant);
  }
}

/** After a write of the tenant's `kind` items: every cache of that kind in this process reads them again. */
export function invalidateTenant(kind: TenantCacheKind, tenant: string): void {
  for (const cache of caches.get(kind) ?? []) cache.drop(tenant);
}
