import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import type { Tip } from '../../core/model/model.js';
import { StaleTipError } from '../../core/model/ports.js';
import * as versionItem from '../state/version-item.js';
import { KIND_ATTRIBUTE, LOG_ITEM_KIND } from '../table/item-kinds.js';
import { isFence, readLogItem, tipOf } from './log-items.js';

/** The change that took the place a lost write wanted, as a tip to retry on (when its state came with it). */
export function winnerOf(old: Record<string, unknown> | undefined): Tip | undefined {
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
export function closesLife(old: Record<string, unknown> | undefined): boolean {
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
