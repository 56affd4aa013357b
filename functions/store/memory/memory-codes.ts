import { DeleteCommand, GetCommand, QueryCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { MemoryAddress, Namespace } from '../../core/memory/memory.js';
import { codeBytes } from '../../core/memory/memory-vector.js';
import * as keys from '../table/keys.js';
import { queryAll } from '../table/paging.js';
import { type Item, isConditionFailure, type TableClient } from '../table/table-client.js';

/**
 * The codes of a namespace's embeddings (core/memory/memory-vector.ts `embeddingCode`, one byte
 * a number), kept in pages beside its items, so that a search reads some 4 KB pages of codes
 * instead of every item with its value and 32-bit embedding (memory-vectors.ts `scanCodes`):
 *
 *   pk M#<tenant>#<namespace path>   sk V#<page, 6 digits>   c:<key> the code, n:<key> its stamp,
 *                                                            held: how many codes the page holds
 *   pk M#<tenant>#<namespace path>   sk V#overflow           its pages could not hold every code
 *
 * An item's page is a hash of its key, among as many pages as 100,000 codes of the namespace's
 * dimensions need at about 4 KB a page, so a put rewrites a page of a few KB however large the
 * namespace (a 400 KB page of a large layout would cost 400 write units a put). Each code
 * carries its item's stamp (`<createdAt>#<version>`): a write replaces only an older code, a
 * delete removes only the code of what it deleted, so puts and deletes of one key in any order
 * leave the newest. Pages have no `kind`, so the stream's filter leaves them out, and no `mu`,
 * so the memory index does too. A module of its own: a user's erasure deletes items (and their
 * codes) from a function that carries no search.
 */

/** What 100,000 codes of a namespace should fit in, a page holding about this many bytes. */
const PAGE_BYTES = 4096;
const PAGED_ITEMS = 100_000;
/** A code's share of its page besides the code: two attribute names with the key, and the stamp. */
const ENTRY_OVERHEAD_BYTES = 80;

const PAGE_PREFIX = 'V#';
export const OVERFLOW_PAGE = `${PAGE_PREFIX}overflow`;

/** How many pages a namespace of `dimensions` spreads its codes over. */
export function pagesFor(dimensions: number): number {
  return Math.ceil((PAGED_ITEMS * (codeBytes(dimensions) + ENTRY_OVERHEAD_BYTES)) / PAGE_BYTES);
}

/** The sort key of page `index`. */
export function pageKey(index: number): string {
  return `${PAGE_PREFIX}${String(index).padStart(6, '0')}`;
}

export const pagePrefix = PAGE_PREFIX;

/** The page of `key` among `pages` (FNV-1a over its UTF-16 units: stable, even, cheap). */
export function pageIndexOf(key: string, pages: number): number {
  let hash = 0x811c9dc5;
  for (let index = 0; index < key.length; index++) {
    hash ^= key.charCodeAt(index);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash % pages;
}

/** An item's stamp: a later life or a later version of the same life sorts after. */
export function codeStamp(item: { createdAt: string; version: number }): string {
  return keys.memoryHistoryVersion(item.createdAt, item.version);
}

function codeNames(key: string): Record<string, string> {
  return { '#code': `c:${key}`, '#stamp': `n:${key}` };
}

function pageAddress(table: TableClient, item: MemoryAddress, dimensions: number) {
  return {
    TableName: table.tableName,
    Key: { pk: keys.memoryNamespace(item.tenant, item.namespace), sk: pageKey(pageIndexOf(item.key, pagesFor(dimensions))) },
  };
}

/**
 * Keeps `code` as the code of `key` unless its page holds a newer one. A code new to its page
 * counts itself in `held`; one that replaces another does not. A page that cannot grow (past
 * DynamoDB's 400 KB, some millions of items into a namespace) marks the namespace's pages as
 * overflowed, and searches read its items instead.
 */
export async function keepCode(
  table: TableClient,
  item: MemoryAddress,
  code: Uint8Array,
  stamp: string,
  options: { replacing?: boolean } = {},
): Promise<void> {
  const address = pageAddress(table, item, code.length - codeBytes(0));
  const { key } = item;
  const values = { ':code': code, ':stamp': stamp };
  const added = {
    ...address,
    UpdateExpression: 'SET #code = :code, #stamp = :stamp ADD held :one',
    ConditionExpression: 'attribute_not_exists(#stamp)',
    ExpressionAttributeNames: codeNames(key),
    ExpressionAttributeValues: { ...values, ':one': 1 },
  };
  const replaced = {
    ...address,
    UpdateExpression: 'SET #code = :code, #stamp = :stamp',
    ConditionExpression: '#stamp < :stamp',
    ExpressionAttributeNames: codeNames(key),
    ExpressionAttributeValues: values,
  };
  try {
    // Each condition fails only while the other would hold, but a put or delete of the key may
    // land between two rounds: a third round settles every order of two; when all fail, a newer
    // code is there (and the change hook mends any order rarer than that, from the stream).
    for (const update of options.replacing ? [replaced, added, replaced] : [added, replaced, added]) {
      try {
        await table.send(new UpdateCommand(update));
        return;
      } catch (error) {
        if (!isConditionFailure(error)) throw error;
      }
    }
  } catch (error) {
    if (!isItemTooLarge(error)) throw error;
    await table.send(
      new UpdateCommand({
        TableName: table.tableName,
        Key: { pk: keys.memoryNamespace(item.tenant, item.namespace), sk: OVERFLOW_PAGE },
        UpdateExpression: 'SET held = :zero',
        ExpressionAttributeValues: { ':zero': 0 },
      }),
    );
  }
}

/** The stamp of the code `item`'s page holds for it, or null (read eventually consistent: the change hook's check). */
export async function heldStamp(table: TableClient, item: MemoryAddress, dimensions: number): Promise<string | null> {
  const { Item } = await table.send(
    new GetCommand({
      ...pageAddress(table, item, dimensions),
      ProjectionExpression: '#stamp',
      ExpressionAttributeNames: { '#stamp': `n:${item.key}` },
    }),
  );
  const stamp = Item?.[`n:${item.key}`];
  return typeof stamp === 'string' ? stamp : null;
}

/** Removes the code of `key` when it is the one of `stamp` or older (a delete's, of what it deleted). */
export async function dropCode(table: TableClient, item: MemoryAddress, dimensions: number, stamp: string): Promise<void> {
  try {
    await table.send(
      new UpdateCommand({
        ...pageAddress(table, item, dimensions),
        UpdateExpression: 'REMOVE #code, #stamp ADD held :minus',
        ConditionExpression: '#stamp <= :stamp',
        ExpressionAttributeNames: codeNames(item.key),
        ExpressionAttributeValues: { ':stamp': stamp, ':minus': -1 },
      }),
    );
  } catch (error) {
    if (!isConditionFailure(error)) throw error;
  }
}

/**
 * Deletes the namespace's pages that hold no code (and its overflow mark), when the namespace
 * is taken off the list: a page's key names the namespace, so a user's erasure must not leave
 * it. A page a put wrote to meanwhile holds a code and stays.
 */
export async function dropEmptyPages(table: TableClient, tenant: string, namespace: Namespace): Promise<void> {
  const pk = keys.memoryNamespace(tenant, namespace);
  const pages: Item[] = [];
  await queryAll(
    (start) =>
      table.send(
        new QueryCommand({
          TableName: table.tableName,
          KeyConditionExpression: 'pk = :pk AND begins_with(sk, :pages)',
          ExpressionAttributeValues: { ':pk': pk, ':pages': PAGE_PREFIX },
          ProjectionExpression: 'sk',
          ConsistentRead: true,
          ExclusiveStartKey: start,
        }),
      ),
    (page) => pages.push(page),
  );
  for (const page of pages) {
    try {
      await table.send(
        new DeleteCommand({
          TableName: table.tableName,
          Key: { pk, sk: page.sk },
          ConditionExpression: 'held = :zero OR attribute_not_exists(held) OR sk = :overflow',
          ExpressionAttributeValues: { ':zero': 0, ':overflow': OVERFLOW_PAGE },
        }),
      );
    } catch (error) {
      if (!isConditionFailure(error)) throw error;
    }
  }
}

/** DynamoDB's answer to a write that would make an item pass 400 KB. */
function isItemTooLarge(error: unknown): boolean {
  return error instanceof Error && error.name === 'ValidationException' && /item size/i.test(error.message);
}
