import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import type { Tip } from '../../core/model/model.js';
import * as versionItem from '../state/version-item.js';
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

function isWireFormat(item: Record<string, unknown>): boolean {
  const sk = item.sk as { S?: string } | string | undefined;
  return typeof sk === 'object' && sk !== null && typeof sk.S === 'string';
}
