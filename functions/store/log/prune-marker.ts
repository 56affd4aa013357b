import { UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { SessionScope } from '../../core/model/model.js';
import { decodeLineage, encodeLineage, type LineageEntry } from '../state/lineage.js';
import * as keys from '../table/keys.js';
import { tableKeys } from '../table/table.js';
import { conditionally, type Item, isConditionFailure, type TableClient } from '../table/table-client.js';
import { type PointerPass, passOf, storedPass } from './prune-pointers.js';

/**
 * A session's retention marker (history-prune.ts): where its runs got to, when the last one
 * was claimed, and when the next one is due without a write.
 *
 *   S#<tenant>#<session>   U~prune   at: when a run last claimed the session (epoch ms);
 *                                    life, w: the first version not yet decided on;
 *                                    kept: the versions below w that were kept (lineage runs);
 *                                    large: whether the session had a large state;
 *                                    scan: a pass over the node index under way (prune-pointers.ts);
 *                                    dpk, dsk: when a run is due (the index `byPruneDue`), only
 *                                    while one is: prune-due.ts finds them every minute
 *
 * A run is due again (`dsk`) when the last one left something for later (a backlog, versions
 * whose events were not built yet), when a write came while it was not a run's turn, and, for
 * a session with `keepDays`, when its oldest version inside the window leaves it by age alone.
 * A session with nothing due has no entry in the index.
 */

const MARKER = 'U~prune';

export interface Marker {
  life: number;
  /** The first version not yet decided on. */
  w: number;
  kept: LineageEntry[];
  /** Whether the session had a large state (splice chains to keep). */
  large: boolean;
  /** A pass over the node index under way (prune-pointers.ts), or null. */
  scan: PointerPass | null;
}

/**
 * Claims the session's next run: at most one per `everyMs` (0: at once). When it is not its
 * turn, the session is marked due for when it is (unless it already is, by then): what the
 * write that asked for this run pushed out of the window is then pruned without another write.
 */
export async function claimRun(
  table: TableClient,
  scope: SessionScope,
  everyMs: number,
): Promise<{ at: number; marker: Marker | null } | null> {
  const at = table.now();
  try {
    const { Attributes } = await table.send(
      new UpdateCommand({
        TableName: table.tableName,
        Key: markerKey(scope),
        UpdateExpression: 'SET #at = :at',
        ...(everyMs > 0 ? { ConditionExpression: 'attribute_not_exists(#at) OR #at < :since' } : {}),
        ExpressionAttributeNames: { '#at': 'at' },
        ExpressionAttributeValues: { ':at': at, ...(everyMs > 0 ? { ':since': at - everyMs } : {}) },
        ReturnValues: 'ALL_OLD',
        ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
      }),
    );
    return { at, marker: markerOf(Attributes) };
  } catch (error) {
    if (!isConditionFailure(error)) throw error;
    const lastRun = numberOf(error.Item?.at);
    const nextTurn = (lastRun ?? at) + everyMs;
    const due = stringOf(error.Item?.[tableKeys.pruneDueIndex.sortKey]);
    // Written at most once per run: once due by its next turn, a write finds it so and writes nothing.
    if (due === undefined || due > keys.pruneDueAt(nextTurn)) await markDue(table, scope, nextTurn);
    return null;
  }
}

/**
 * Marks the session due for a run at `dueMs`, unless it is due earlier already (a PATCH that
 * sets a retention, a write that found it was not a run's turn).
 */
export async function markDue(table: TableClient, scope: SessionScope, dueMs: number): Promise<void> {
  const { partitionKey, sortKey } = tableKeys.pruneDueIndex;
  await conditionally(
    table.send(
      new UpdateCommand({
        TableName: table.tableName,
        Key: markerKey(scope),
        UpdateExpression: 'SET #dpk = :dpk, #dsk = :dsk',
        ConditionExpression: 'attribute_not_exists(#dsk) OR #dsk > :dsk',
        ExpressionAttributeNames: { '#dpk': partitionKey, '#dsk': sortKey },
        ExpressionAttributeValues: { ':dpk': keys.pruneDue(keys.pruneDueShard(scope)), ':dsk': keys.pruneDueAt(dueMs) },
      }),
    ),
  );
}

/**
 * Records where the run got to and when the next is due (null: none is, until a write), if no
 * later run claimed the session meanwhile.
 */
export async function saveMarker(
  table: TableClient,
  scope: SessionScope,
  claimedAt: number,
  marker: Marker,
  dueMs: number | null,
): Promise<void> {
  const { partitionKey, sortKey } = tableKeys.pruneDueIndex;
  const due = dueMs === null ? {} : { ':dpk': keys.pruneDue(keys.pruneDueShard(scope)), ':dsk': keys.pruneDueAt(dueMs) };
  await conditionally(
    table.send(
      new UpdateCommand({
        TableName: table.tableName,
        Key: markerKey(scope),
        UpdateExpression: [
          `SET #life = :life, #w = :w, #kept = :kept, #large = :large${dueMs === null ? '' : ', #dpk = :dpk, #dsk = :dsk'}${marker.scan ? ', #scan = :scan' : ''}`,
          [...(dueMs === null ? ['#dpk', '#dsk'] : []), ...(marker.scan ? [] : ['#scan'])].join(', '),
        ]
          .filter(Boolean)
          .join(' REMOVE '),
        ConditionExpression: '#at = :claimed',
        ExpressionAttributeNames: {
          '#at': 'at',
          '#life': 'life',
          '#w': 'w',
          '#kept': 'kept',
          '#large': 'large',
          '#dpk': partitionKey,
          '#dsk': sortKey,
          '#scan': 'scan',
        },
        ExpressionAttributeValues: {
          ':claimed': claimedAt,
          ':life': marker.life,
          ':w': marker.w,
          ':kept': encodeLineage(marker.kept),
          ':large': marker.large,
          ...due,
          ...(marker.scan ? { ':scan': storedPass(marker.scan) } : {}),
        },
      }),
    ),
  );
}

/** A run that found nothing to do (no retention, no history): nothing is due until a write. */
export async function clearDue(table: TableClient, scope: SessionScope, claimedAt: number): Promise<void> {
  await conditionally(
    table.send(
      new UpdateCommand({
        TableName: table.tableName,
        Key: markerKey(scope),
        UpdateExpression: 'REMOVE #dpk, #dsk',
        ConditionExpression: '#at = :claimed',
        ExpressionAttributeNames: { '#at': 'at', '#dpk': tableKeys.pruneDueIndex.partitionKey, '#dsk': tableKeys.pruneDueIndex.sortKey },
        ExpressionAttributeValues: { ':claimed': claimedAt },
      }),
    ),
  );
}

/** Whether a key found on the retention index is a session's marker. */
export function isMarkerKey(sk: unknown): boolean {
  return sk === MARKER;
}

function markerKey(scope: SessionScope) {
  return { pk: keys.session(scope), sk: MARKER };
}

function markerOf(item: Item | undefined): Marker | null {
  if (!item || typeof item.life !== 'number' || typeof item.w !== 'number') return null;
  return { life: item.life, w: item.w, kept: decodeLineage(item.kept), large: item.large === true, scan: passOf(item.scan) };
}

// An item returned with a failed condition comes in wire format ({N: …}), or unmarshalled.
function numberOf(value: unknown): number | undefined {
  const raw = typeof value === 'object' && value !== null ? (value as { N?: string }).N : value;
  const number = Number(raw);
  return raw === undefined || !Number.isFinite(number) ? undefined : number;
}

function stringOf(value: unknown): string | undefined {
  const raw = typeof value === 'object' && value !== null ? (value as { S?: string }).S : value;
  return typeof raw === 'string' ? raw : undefined;
}
