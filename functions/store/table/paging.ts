import { QueryCommand, type QueryCommandInput } from '@aws-sdk/lib-dynamodb';
import { AgentStateError } from '../../core/kernel/errors.js';
import { openCursor, sealCursor } from '../../core/kernel/sealing.js';
import type { Page } from '../../core/model/model.js';
import type { Item, TableClient } from './table-client.js';

/** One page of a Query: what came back and the key DynamoDB stopped at. */
export type QueryPage = { Items?: Item[]; LastEvaluatedKey?: Item };

/**
 * Runs a Query to its end, page by page (`ExclusiveStartKey` is the previous page's last key),
 * and hands every item to `each` in order.
 */
export async function queryAll(query: (start: Item | undefined) => Promise<QueryPage>, each: (item: Item) => void): Promise<void> {
  let start: Item | undefined;
  do {
    const { Items, LastEvaluatedKey } = await query(start);
    for (const item of Items ?? []) each(item);
    start = LastEvaluatedKey;
  } while (start);
}

/**
 * A page of a list; `next` is the key DynamoDB stopped at, sealed for `list` (core/kernel/sealing.ts):
 * it shows clients nothing of the table's keys or the tenant, and opens only for that list.
 */
export function pageOf<T>(items: T[], lastKey: Item | undefined, list: PrefixRange | string): Page<T> {
  return lastKey ? { items, next: sealCursor(lastKey, listName(list)) } : { items };
}

/** What a cursor is bound to: the table, the partition (which holds the tenant) and the kind of item. */
function listName(list: PrefixRange | string): string {
  return typeof list === 'string' ? list : JSON.stringify([list.tableName, list.partition, list.prefix]);
}

/** The items of one partition whose sort key starts with `prefix`: a list of one kind. */
export interface PrefixRange {
  tableName: string;
  partition: string;
  prefix: string;
}

/** The Query of every item of a range, in sort-key order, read consistently (`TableClient.forEachInRange`). */
function rangeQuery(range: PrefixRange): QueryCommandInput {
  return { ...inRange(range), ConsistentRead: true };
}

function inRange(range: PrefixRange): QueryCommandInput {
  return {
    TableName: range.tableName,
    KeyConditionExpression: 'pk = :pk AND begins_with(sk, :prefix)',
    ExpressionAttributeValues: { ':pk': range.partition, ':prefix': range.prefix },
  };
}

/**
 * The Query of one page of a list kept under a sort-key prefix: `limit` items from `cursor`
 * on, in sort-key order (or newest first). The cursor must be a key of this very range, so a
 * cursor from another list or tenant is refused rather than read from.
 */
export function prefixPageQuery(
  range: PrefixRange,
  options: { limit: number; cursor?: string; newestFirst?: boolean; consistent?: boolean },
): QueryCommandInput {
  const start = options.cursor === undefined ? undefined : decodeCursor(options.cursor, ['pk', 'sk'], range);
  if (start && (start.pk !== range.partition || !String(start.sk).startsWith(range.prefix))) throw invalidCursor();
  return {
    ...inRange(range),
    ...(options.newestFirst ? { ScanIndexForward: false } : {}),
    ...(options.consistent ? { ConsistentRead: true } : {}),
    Limit: options.limit,
    ExclusiveStartKey: start,
  };
}

/**
 * The key DynamoDB stopped at, from a cursor `pageOf` sealed for this `list`; it must have
 * exactly the attributes of its list. Anything else is `400 invalid_request`.
 */
export function decodeCursor(cursor: string, attributes: readonly string[], list: PrefixRange | string): Item {
  const parsed = openCursor(cursor, listName(list));
  if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) {
    const entries = Object.entries(parsed);
    const shaped =
      entries.length === attributes.length && entries.every(([name, value]) => attributes.includes(name) && typeof value === 'string');
    if (shaped) return parsed as Item;
  }
  throw invalidCursor();
}

export function invalidCursor(): AgentStateError {
  return new AgentStateError('invalid_request', 'cursor is not valid for this list', { field: 'cursor' });
}

/**
 * Hands every item of one partition under a sort-key prefix to `each`, in sort-key order,
 * read consistently and to the end: what a caller reads whole right before acting on it (a
 * webhook or follower registered just before a write must get that write's event).
 */
export async function forEachInRange(
  table: TableClient,
  range: { partition: string; prefix: string },
  each: (item: Item) => void,
  projection: { ProjectionExpression?: string; ExpressionAttributeNames?: Record<string, string> } = {},
): Promise<void> {
  await queryAll(
    (start) =>
      table.send(new QueryCommand({ ...rangeQuery({ tableName: table.tableName, ...range }), ...projection, ExclusiveStartKey: start })),
    each,
  );
}
