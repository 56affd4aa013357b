import { decodeStoredJson } from '../../core/json/json.js';
import type { IdempotencyClaim, StoredResponse } from '../../core/model/ports.js';
import { decodeText } from '../state/state-codec.js';
import * as keys from '../table/keys.js';
import { tableKeys } from '../table/table.js';
import type { Item } from '../table/table-client.js';

// Idempotency-Key claims: I#<tenant>#<key> / I. Imported as a namespace (item-codecs.ts):
// `idempotencyItem.encode`.

export const key = (tenant: string, idempotencyKey: string): Item => ({
  pk: keys.idempotency(tenant, idempotencyKey),
  sk: keys.idempotencySort,
});

/** A pending claim: its holder's fingerprint, until when it counts as alive, and its expiry. */
export const encode = (
  tenant: string,
  idempotencyKey: string,
  claim: { fingerprint: string; lockedUntil: number; expiresAt: number },
): Item => ({
  ...key(tenant, idempotencyKey),
  fingerprint: claim.fingerprint,
  status: 'pending',
  lockedUntil: claim.lockedUntil,
  [tableKeys.timeToLive]: claim.expiresAt,
});

/** The name the state codec keeps a done claim's answer under (`response`, `responseZ`, …). */
export const responseText = 'response';

/**
 * The claim that holds a key: done with its answer, still in progress, or unfinished (its
 * lock lapsed at `now` without an answer kept); `pieces` as `decodeText` takes them.
 */
export function decodeHolder(
  item: Item,
  pieces: ReadonlyMap<string, Item>,
  now: number,
  lifetimeSeconds: number,
): Exclude<IdempotencyClaim, { outcome: 'claimed' }> {
  const fingerprint = String(item.fingerprint);
  const response = item.status === 'done' ? decodeText(item, responseText, pieces) : null;
  if (response !== null) {
    return { outcome: 'done', fingerprint, response: decodeStoredJson(response) as unknown as StoredResponse };
  }
  const lockedUntil = Number(item.lockedUntil);
  // The claim's id is its writer's; it was made a lifetime before it expires.
  const claim =
    typeof item.writeId === 'string'
      ? { id: item.writeId, since: (Number(item[tableKeys.timeToLive]) - lifetimeSeconds) * 1000 }
      : undefined;
  return {
    outcome: item.status === 'pending' && lockedUntil >= now ? 'in_progress' : 'unfinished',
    fingerprint,
    lockedUntil,
    ...(claim ? { claim } : {}),
  };
}
