import { QueryCommand, type QueryCommandOutput, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { Namespace, VectorCandidate } from '../../core/memory/memory.js';
import { MEMORY_ITEM_KIND } from '../table/item-kinds.js';
import * as keys from '../table/keys.js';
import { tableKeys } from '../table/table.js';
import { type Item, isConditionFailure, type TableClient } from '../table/table-client.js';
import { floatsOf, memoryItem, namespaceEntry } from './memory-codecs.js';

/**
 * Embeddings of memory items (API.md section 10), kept on the item itself as attribute `ve`:
 * its numbers as 32-bit floats, 4 bytes each (a 1,536-number embedding is 6 KiB, where its
 * JSON text is some 30 KiB), written in the same UpdateItem as the value, so an item and its
 * embedding never disagree. Not part of the value: not counted in its 256 KiB, not in `vs`,
 * not in the memory index's projection, and returned only when asked. A namespace's entry in
 * the namespace list (`MN#<tenant>` / `<path>/`) holds `vd`, the dimensions its embeddings
 * share: the first embedding put claims it, conditionally, so two puts of other dimensions at
 * once cannot both win.
 *
 * A search with a vector reads every live item of its namespaces with an embedding of the
 * vector's dimensions, with consistent reads (a put is found as soon as it answered), from the
 * table itself: DynamoDB (and DynamoDB Local) has no vector index, so the ranking is exact and
 * the same code runs in both. A namespace larger than one page (1 MB) is read in key ranges
 * side by side after its first page.
 */

/** How many key ranges are read at once, over all namespaces of one search. */
const PARALLEL_READS = 16;

/**
 * The ranges a namespace past its first page is read in, by the first character of the key
 * (ids are `- . 0-9 : @ A-Z _ a-z ~`, in that byte order): each range ends just before the next
 * one's first character. `\x7f` sorts after every character an id may hold.
 */
const RANGE_STARTS = ['', '4', '8', 'A', 'N', 'a', 'e', 'i', 'n', 's'];
const BEFORE: Record<string, string> = { '4': '3', '8': '7', A: '@', N: 'M', a: '_', e: 'd', i: 'h', n: 'm', s: 'r' };

/**
 * Claims `dimensions` for the embeddings of `namespace` and lists the namespace (a put is listed
 * as soon as it answered): null when the claim holds, else the namespace's own dimensions.
 */
export async function claimDimensions(
  table: TableClient,
  tenant: string,
  namespace: Namespace,
  dimensions: number,
): Promise<number | null> {
  try {
    await table.send(
      new UpdateCommand({
        TableName: table.tableName,
        Key: namespaceEntry.key(tenant, namespace),
        UpdateExpression: 'SET listedAt = if_not_exists(listedAt, :now), vd = if_not_exists(vd, :dimensions)',
        ConditionExpression: 'attribute_not_exists(vd) OR vd = :dimensions',
        ExpressionAttributeValues: { ':now': new Date(table.now()).toISOString(), ':dimensions': dimensions },
        ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
      }),
    );
    return null;
  } catch (error) {
    if (!isConditionFailure(error)) throw error;
    const held = (error.Item as { vd?: { N?: string } } | undefined)?.vd?.N;
    return held === undefined ? dimensions : Number(held);
  }
}

/**
 * Lists `namespace` in the namespace list (an update that keeps the entry's dimensions), so a
 * namespace is listed, and searched, as soon as the put of its first item answered; the change
 * hook lists it too, and forgets it when its last item goes.
 */
export async function listNamespace(table: TableClient, tenant: string, namespace: Namespace): Promise<void> {
  await table.send(
    new UpdateCommand({
      TableName: table.tableName,
      Key: namespaceEntry.key(tenant, namespace),
      UpdateExpression: 'SET listedAt = if_not_exists(listedAt, :now)',
      ExpressionAttributeValues: { ':now': new Date(table.now()).toISOString() },
    }),
  );
}

/**
 * Every live item of `namespaces` whose embedding has `dimensions` numbers, handed to `visit`
 * page by page as it is read (in no particular order).
 */
export async function scanEmbeddings(
  table: TableClient,
  tenant: string,
  namespaces: ReadonlyArray<Namespace>,
  dimensions: number,
  visit: (candidate: VectorCandidate) => void,
): Promise<void> {
  const nowSeconds = table.nowSeconds();
  const read = (partition: string, range: readonly [string, string], start?: Item): Promise<QueryCommandOutput> =>
    table.send(
      new QueryCommand({
        TableName: table.tableName,
        KeyConditionExpression: 'pk = :pk AND sk BETWEEN :low AND :high',
        FilterExpression: '#kind = :live AND size(ve) = :bytes AND (attribute_not_exists(#ttl) OR #ttl > :now)',
        ExpressionAttributeNames: { '#kind': 'kind', '#ttl': tableKeys.timeToLive },
        ExpressionAttributeValues: {
          ':pk': partition,
          ':low': range[0],
          ':high': range[1],
          ':live': MEMORY_ITEM_KIND.item,
          ':bytes': dimensions * 4,
          ':now': nowSeconds,
        },
        ConsistentRead: true,
        ...(start ? { ExclusiveStartKey: start } : {}),
      }),
    );
  const take = (items: readonly Item[] | undefined) => {
    for (const item of items ?? []) visit(candidateOf(item));
  };
  // A pool of reads: each namespace's first page, then the ranges of those that go on.
  const queue: Array<() => Promise<void>> = namespaces.map((namespace) => async () => {
    const partition = keys.memoryNamespace(tenant, namespace);
    const whole = keyRange('', undefined);
    const first = await read(partition, whole);
    take(first.Items);
    if (!first.LastEvaluatedKey) return;
    for (const range of rangesAfter(String(first.LastEvaluatedKey.sk))) {
      queue.push(async () => {
        let start = range.from === undefined ? undefined : (first.LastEvaluatedKey as Item);
        do {
          const page = await read(partition, range.keys, start);
          take(page.Items);
          start = page.LastEvaluatedKey;
        } while (start);
      });
    }
  });
  const worker = async () => {
    for (let next = queue.shift(); next; next = queue.shift()) await next();
  };
  // Workers that find the queue empty stop; a namespace's ranges join the queue while others run.
  await Promise.all(Array.from({ length: PARALLEL_READS }, worker));
  while (queue.length > 0) await Promise.all(Array.from({ length: PARALLEL_READS }, worker));
}

/** The sort keys from a range's first character to just before the next range's (`undefined`: to the end). */
function keyRange(start: string, next: string | undefined): readonly [string, string] {
  const low = `${keys.memoryKeyPrefix}${start}`;
  const high = next === undefined ? `${keys.memoryKeyPrefix}\x7f` : `${keys.memoryKeyPrefix}${BEFORE[next]}\x7f`;
  return [low, high];
}

/** The ranges left after the key `after` (where a first page stopped): the one it is in resumes there. */
function rangesAfter(after: string): Array<{ keys: readonly [string, string]; from?: string }> {
  const ranges: Array<{ keys: readonly [string, string]; from?: string }> = [];
  RANGE_STARTS.forEach((start, index) => {
    const range = keyRange(start, RANGE_STARTS[index + 1]);
    if (range[1] < after) return;
    ranges.push(range[0] <= after ? { keys: range, from: after } : { keys: range });
  });
  return ranges;
}

function candidateOf(item: Item): VectorCandidate {
  let decoded: ReturnType<typeof memoryItem.decode> | undefined;
  const entry = memoryItem.candidate(item);
  return {
    vector: floatsOf(item.ve as Uint8Array),
    fields: entry.fields,
    partial: entry.partial,
    item: () => {
      decoded ??= memoryItem.decode(item);
      return decoded;
    },
  };
}
