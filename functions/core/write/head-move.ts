import type { Caller, Schema } from '../model/fields.js';
import { requireMayMoveHead } from '../model/fields.js';
import type { SessionScope, Tip } from '../model/model.js';
import type { SessionStore } from '../model/ports.js';
import { pointedVersion } from './write-target.js';

/** A write that moves what the head reads: from the head's version to `to` (a head switch, an append off the head). */
export interface HeadMove {
  scope: SessionScope;
  tip: Tip;
  from: number;
  to: number;
}

/**
 * `403 field_forbidden` when moving the head from `move.from` to `move.to` would change a
 * declared field `caller` may not write (API.md section 7, for a key limited to agents). The two
 * states are read only when the versions differ and the session has typed fields.
 */
export async function requireMayMoveHeadTo(
  store: Pick<SessionStore, 'getVersion'>,
  move: HeadMove,
  schema: Schema | null,
  caller: Caller,
): Promise<void> {
  if (!schema || move.from === move.to) return;
  const stateAt = async (version: number) =>
    version === 0 ? null : ((await pointedVersion(store, move.scope, version, move.tip))?.state ?? null);
  const [from, to] = await Promise.all([stateAt(move.from), stateAt(move.to)]);
  requireMayMoveHead(schema, caller, from, to);
}
