import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { PutCommand } from '@aws-sdk/lib-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import type { Tip } from '../../core/model/model.js';
import { StaleTipError } from '../../core/model/ports.js';
import * as versionItem from '../state/version-item.js';
import { KIND_ATTRIBUTE, LOG_ITEM_KIND } from '../table/item-kinds.js';
import { type Item, isConditionFailure, isOwnWrite, type TableClient } from '../table/table-client.js';
import { isFence, readLogItem, tipOf } from './log-items.js';
import type { SlotClaim } from './session-writes.js';

/**
 * The single conditional put of a change (log-writer.ts): a lost race comes back with the
 * change that won it, or as `LifeClosedError` when a delete's fence or tombstone took the place.
 */
export async function putChange(table: TableClient, item: Item, claim: SlotClaim): Promise<void> {
  try {
    await table.send(new PutCommand({ TableName: table.tableName, Item: item, ...claim, ReturnValuesOnConditionCheckFailure: 'ALL_OLD' }));
  } catch (error) {
    if (!isConditionFailure(error)) throw error;
    // The SDK retries a request whose answer was lost; if the first attempt landed, the
    // place now holds our own change and the retry fails its condition. That is success.
    if (typeof item.writeId === 'string' ? isOwnWrite(error.Item, item.writeId) : isOwnWrite(error.Item, String(item.ik), 'ik')) return;
    if (closesLife(error.Item)) throw new LifeClosedError('the session is being deleted');
    // A lone mark's claim failed over the very place it read: what is there now (the mark
    // taken into the life, or moved on by another follow) is no tip to retry on. Read again.
    throw new StaleTipError(undefined, claim.ExpressionAttributeValues ? undefined : winnerOf(error.Item));
  }
}

/** The change that took the place a lost write wanted, as a tip to retry on (when its state came with it). */
function winnerOf(old: Record<string, unknown> | undefined): Tip | undefined {
  if (!old) return undefined;
  const item = isWireFormat(old) ? unmarshall(old as Record<string, AttributeValue>) : old;
  if (versionItem.pieceKeys(item).length > 0) return undefined;
  const entry = readLogItem(item);
  if (!entry || isFence(entry)) return undefined;
  return tipOf(entry, { withState: true });
}

/**
 * Whether the item that took the place a lost write wanted is a delete's fence or one of its
 * tombstones: the life the write was based on is closed (or being erased), not merely moved on.
 */
function closesLife(old: Record<string, unknown> | undefined): boolean {
  if (!old) return false;
  const kind = old[KIND_ATTRIBUTE] as { S?: string } | string | undefined;
  return (typeof kind === 'object' && kind !== null ? kind.S : kind) === LOG_ITEM_KIND.tombstone;
}

/** A write lost its place to a delete's fence or tombstone (`closesLife`): to its caller a lost race like any. */
export class LifeClosedError extends StaleTipError {}

function isWireFormat(item: Record<string, unknown>): boolean {
  const sk = item.sk as { S?: string } | string | undefined;
  return typeof sk === 'object' && sk !== null && typeof sk.S === 'string';
}
