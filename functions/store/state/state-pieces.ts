import { DeleteCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import type { SessionScope } from '../../core/model/model.js';
import * as keys from '../table/keys.js';
import { forEachInRange } from '../table/paging.js';
import { batchGet, batchPut, conditionally, type Item, type TableClient } from '../table/table-client.js';
import { missingPieces, PIECE_PREFIX, type Piece } from './state-codec.js';
import type { EncodedVersion } from './version-item.js';
import * as versionItem from './version-item.js';

/**
 * The piece items of large states (state-codec.ts), in their session's partition:
 *
 *   S#<tenant>#<session>   B#<hash>   z: the piece (brotli), at: when it was last put (epoch ms)
 *
 * A version's pieces are put before the version item that names them, and only those its
 * base version does not already name (those exist while it does). Reading fetches every piece
 * of every version read in one round (BatchGetItem, 100 keys a request, in parallel).
 */

/**
 * The items a reader of `items` (version items) needs, by sort key: the pieces they name, and
 * the versions their splices are on (state-codec.ts); none when all are inline.
 */
export async function piecesOf(table: TableClient, scope: SessionScope, items: readonly Item[]): Promise<Map<string, Item>> {
  const wanted = new Set(items.flatMap((item) => versionItem.readKeys(item)));
  if (wanted.size === 0) return new Map();
  const pk = keys.session(scope);
  const found = await batchGet(
    table,
    [...wanted].map((sk) => ({ pk, sk })),
  );
  return new Map(found.map((item) => [String(item.sk), item]));
}

/**
 * Puts the pieces of a version about to be written: those the codec found its base version's
 * checkpoint does not name (those exist while it does), none for a splice. Putting a piece
 * that exists already (the same bytes, so the same key) only moves its `at` forward, which
 * keeps the collector off it while this write is in flight.
 */
export async function putPieces(table: TableClient, scope: SessionScope, encoded: EncodedVersion): Promise<Piece[]> {
  // Each piece once: a state and the commands that set it often share text (BatchWriteItem refuses duplicates).
  const seen = new Set<string>();
  const pieces = [...missingPieces(encoded.state, seen), ...(encoded.commands ? missingPieces(encoded.commands, seen) : [])];
  if (pieces.length === 0) return pieces;
  const pk = keys.session(scope);
  const at = table.now();
  await batchPut(
    table,
    pieces.map((piece) => ({ pk, sk: piece.sk, z: piece.z, at })),
  );
  return pieces;
}

/** Pieces younger than this are never collected: a write may still be about to name them. */
export const PIECE_GRACE_MS = 15 * 60 * 1000;
/** A session's pieces are swept at most this often. */
const SWEEP_INTERVAL_MS = 10 * 60 * 1000;
/** The item that records a session's last sweep; `B~` sorts after every `B#<hash>`. */
const SWEEP_MARKER = 'B~sweep';

/**
 * Removes the pieces of a session that no version names: those a write put before a version
 * item it never wrote (it crashed, or lost the race for its slot and its retry cut the state
 * differently). A piece is removed only when it is older than `graceMs` and no version item
 * names it, and only if it was not put again meanwhile (its `at` unchanged):
 *
 *   writer: put pieces P (at t) ── crash ✗            (P named by nothing)
 *   sweep at t + grace: versions name {Q…}; P unnamed, at = t ≤ cutoff → delete if at = t ✓
 *   writer2 puts P again (at t2) before the delete → the delete's condition fails, P stays ✓
 *
 * A writer never names a piece it did not put itself unless the version it was computed from
 * names it, and a named piece is never removed, so no version ever loses a piece. Resolves
 * with how many pieces it removed.
 */
export async function collectPieces(table: TableClient, scope: SessionScope, graceMs = PIECE_GRACE_MS): Promise<number> {
  const pk = keys.session(scope);
  const cutoff = table.now() - graceMs;
  const pieces: Array<{ sk: string; at: number }> = [];
  const named = new Set<string>();
  await Promise.all([
    forEachInRange(table, { partition: pk, prefix: PIECE_PREFIX }, (item) => pieces.push({ sk: String(item.sk), at: Number(item.at) }), {
      ProjectionExpression: 'sk, #at',
      ExpressionAttributeNames: { '#at': 'at' },
    }),
    forEachInRange(
      table,
      { partition: pk, prefix: keys.logPrefix },
      (item) => {
        for (const sk of versionItem.pieceKeys(item)) named.add(sk);
      },
      { ProjectionExpression: 'sk, stateP, commandsP' },
    ),
  ]);
  let removed = 0;
  for (const piece of pieces) {
    if (named.has(piece.sk) || !(piece.at <= cutoff)) continue;
    const deleted = await conditionally(
      table.send(
        new DeleteCommand({
          TableName: table.tableName,
          Key: { pk, sk: piece.sk },
          ConditionExpression: '#at = :at',
          ExpressionAttributeNames: { '#at': 'at' },
          ExpressionAttributeValues: { ':at': piece.at },
        }),
      ),
    );
    if (deleted) removed++;
  }
  return removed;
}

/**
 * `collectPieces`, at most once per SWEEP_INTERVAL_MS per session: the change hook calls it
 * for every session with a large state in a batch, and the first call in an interval claims
 * the sweep with a conditional write. Resolves with the pieces removed (0 when not its turn).
 */
export async function sweepPieces(table: TableClient, scope: SessionScope, graceMs = PIECE_GRACE_MS): Promise<number> {
  const now = table.now();
  const claimed = await conditionally(
    table.send(
      new PutCommand({
        TableName: table.tableName,
        Item: { pk: keys.session(scope), sk: SWEEP_MARKER, at: now },
        ConditionExpression: 'attribute_not_exists(pk) OR #at < :since',
        ExpressionAttributeNames: { '#at': 'at' },
        ExpressionAttributeValues: { ':since': now - SWEEP_INTERVAL_MS },
      }),
    ),
  );
  return claimed ? collectPieces(table, scope, graceMs) : 0;
}
