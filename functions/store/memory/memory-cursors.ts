import { openCursor, sealCursor } from '../../core/kernel/sealing.js';
import { invalidCursor } from '../table/paging.js';
import type { TableClient } from '../table/table-client.js';

/** Where a search's walk stands: after the entry `(recency, namespace)`; null before the first. */
export interface WalkPosition {
  recency: string;
  namespace: string;
}

/*
 * Memory cursors are sealed (core/kernel/sealing.ts) like every list cursor: they show no namespace,
 * no position and no tenant, and open only for the list that made them (the tenant and, for a
 * search, its prefix and filter), so a tampered or borrowed one is `400 invalid_request`.
 */

/** What a search cursor is bound to: the table, the tenant and the search (its binding). */
export function searchList(table: TableClient, tenant: string, binding: string): string {
  return JSON.stringify(['memory search', table.tableName, tenant, binding]);
}

export function encodeWalkCursor(list: string, position: WalkPosition | null): string {
  return sealCursor(position === null ? {} : { r: position.recency, n: position.namespace }, list);
}

export function decodeWalkCursor(cursor: string, list: string): WalkPosition | null {
  const payload = openCursor(cursor, list) as { r?: unknown; n?: unknown } | null;
  if (!payload || typeof payload !== 'object') throw invalidCursor();
  if (payload.r === undefined && payload.n === undefined) return null;
  if (typeof payload.r !== 'string' || typeof payload.n !== 'string') throw invalidCursor();
  return { recency: payload.r, namespace: payload.n };
}

/** What a namespace list's cursor is bound to: the table and the tenant. */
export function namespaceList(table: TableClient, tenant: string): string {
  return JSON.stringify(['memory namespaces', table.tableName, tenant]);
}

export function encodeListCursor(after: string, list: string): string {
  return sealCursor({ a: after }, list);
}

export function decodeListCursor(cursor: string, list: string): string {
  const payload = openCursor(cursor, list) as { a?: unknown } | null;
  if (typeof payload?.a !== 'string') throw invalidCursor();
  return payload.a;
}
