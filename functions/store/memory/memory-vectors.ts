import { QueryCommand, type QueryCommandOutput, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { CodedEntry, Namespace, VectorCandidate } from '../../core/memory/memory.js';
import { MEMORY_ITEM_KIND } from '../table/item-kinds.js';
import * as keys from '../table/keys.js';
import { tableKeys } from '../table/table.js';
import { type Item, isConditionFailure, type TableClient } from '../table/table-client.js';
import { floatsOf, memoryItem, NAMESPACE_CREATIONS, namespaceEntry } from './memory-codecs.js';
import { OVERFLOW_PAGE, pageKey, pagePrefix, pagesFor } from './memory-codes.js';

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
 * A search with a vector reads the codes of its namespaces' embeddings (memory-codes.ts), with
 * consistent reads (a put is found as soon as it answered), and then the items it ranks
 * (core/memory/memory-service.ts); a namespace whose pages overflowed has every live item with
 * an embedding of the vector's dimensions read instead (`scanEmbeddings`). DynamoDB's own vector
 * indexes are not used: they are fixed to one number of dimensions per index, filter by
 * equality only, and are not read-your-writes; DynamoDB Local has none. A namespace larger than
 * one 1 MB read is read in key ranges side by side after its first read.
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
 * Lists `namespace` after a put created an item in it, and counts the creation
 * (namespace-entries.ts `forgetNamespace`: the change hook forgets an emptied namespace only if
 * no item was created in it since it looked, and a put that lands behind its look is counted
 * here, after the item is written). With `dimensions`, those of the item's embedding: an entry
 * the hook forgot meanwhile gets them back (an entry that has dimensions keeps its own).
 */
export async function listCreation(table: TableClient, tenant: string, namespace: Namespace, dimensions?: number): Promise<void> {
  const values: Record<string, unknown> = { ':now': new Date(table.now()).toISOString(), ':one': 1 };
  if (dimensions !== undefined) values[':dimensions'] = dimensions;
  await table.send(
    new UpdateCommand({
      TableName: table.tableName,
      Key: namespaceEntry.key(tenant, namespace),
      UpdateExpression: `SET listedAt = if_not_exists(listedAt, :now)${dimensions === undefined ? '' : ', vd = if_not_exists(vd, :dimensions)'} ADD ${NAMESPACE_CREATIONS} :one`,
      ExpressionAttributeValues: values,
    }),
  );
}

/**
 * The codes kept in the pages of `namespaces`, handed to `visit` as they are read (in no
 * particular order); answers the namespaces whose pages overflowed. Each namespace's first read
 * takes up to 1 MB of pages; past that, its remaining pages are read in up to 16 ranges at once.
 */
export async function scanCodes(
  table: TableClient,
  tenant: string,
  namespaces: ReadonlyArray<Namespace>,
  dimensions: number,
  visit: (entry: CodedEntry) => void,
): Promise<Namespace[]> {
  const overflowed: Namespace[] = [];
  const pages = pagesFor(dimensions);
  const read = (partition: string, low: string, high: string, start?: Item): Promise<QueryCommandOutput> =>
    table.send(
      new QueryCommand({
        TableName: table.tableName,
        KeyConditionExpression: 'pk = :pk AND sk BETWEEN :low AND :high',
        ExpressionAttributeValues: { ':pk': partition, ':low': low, ':high': high },
        ConsistentRead: true,
        ...(start ? { ExclusiveStartKey: start } : {}),
      }),
    );
  const take = (namespace: Namespace, items: readonly Item[] | undefined) => {
    for (const page of items ?? []) {
      if (page.sk === OVERFLOW_PAGE) {
        overflowed.push(namespace);
        continue;
      }
      for (const [name, code] of Object.entries(page)) {
        if (name.startsWith('c:') && code instanceof Uint8Array) visit({ namespace, key: name.slice(2), code });
      }
    }
  };
  const last = `${pagePrefix}\x7f`;
  const queue: Array<() => Promise<void>> = namespaces.map((namespace) => async () => {
    const partition = keys.memoryNamespace(tenant, namespace);
    const first = await read(partition, pagePrefix, last);
    take(namespace, first.Items);
    if (!first.LastEvaluatedKey) return;
    // The pages after the first read's last, in ranges of page numbers; the last range runs on
    // to the overflow mark.
    const after = Number(String(first.LastEvaluatedKey.sk).slice(pagePrefix.length));
    if (!Number.isInteger(after)) return; // it stopped at the overflow mark, the last there is
    const step = Math.max(1, Math.ceil((pages - after - 1) / PARALLEL_READS));
    for (let low = after + 1; low < pages; low += step) {
      const high = low + step >= pages ? last : pageKey(low + step - 1);
      queue.push(async () => {
        let start: Item | undefined;
        do {
          const page = await read(partition, pageKey(low), high, start);
          take(namespace, page.Items);
          start = page.LastEvaluatedKey;
        } while (start);
      });
    }
    if (after + 1 >= pages) {
      queue.push(async () => take(namespace, (await read(partition, pageKey(pages), last)).Items));
    }
  });
  await drain(queue);
  return overflowed;
}

/** Runs the queue's reads, 16 at a time; reads queued while others run are taken too. */
async function drain(queue: Array<() => Promise<void>>): Promise<void> {
  const worker = async () => {
    for (let next = queue.shift(); next; next = queue.shift()) await next();
  };
  while (queue.length > 0) await Promise.all(Array.from({ length: PARALLEL_READS }, worker));
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
  // Workers that find the queue empty stop; a namespace's ranges join the queue while others run.
  await drain(queue);
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
