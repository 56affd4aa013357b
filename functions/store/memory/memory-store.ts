import { GetCommand, QueryCommand, type QueryCommandOutput, UpdateCommand, type UpdateCommandInput } from '@aws-sdk/lib-dynamodb';
import { AgentStateError } from '../../core/kernel/errors.js';
import {
  type CodedEntry,
  type EmbeddingOption,
  type MemoryAddress,
  type MemoryCandidate,
  type MemoryDeleteResult,
  type MemoryItem,
  type MemoryPrecondition,
  type MemoryPutResult,
  type MemoryStore,
  type MemoryWalk,
  type MemoryWrite,
  type Namespace,
  pathKey,
  type VectorCandidate,
} from '../../core/memory/memory.js';
import { embeddingCode } from '../../core/memory/memory-vector.js';
import type { Page } from '../../core/model/model.js';
import { MEMORY_ITEM_KIND } from '../table/item-kinds.js';
import * as keys from '../table/keys.js';
import { pageOf, prefixPageQuery } from '../table/paging.js';
import { tableKeys } from '../table/table.js';
import { batchGet, conditions, type Item, isConditionFailure, type TableClient } from '../table/table-client.js';
import { embeddingBytes, floatsOf, historyItem, memoryItem, namespaceEntry } from './memory-codecs.js';
import { codeStamp, keepCode } from './memory-codes.js';
import {
  decodeListCursor,
  decodeWalkCursor,
  encodeListCursor,
  encodeWalkCursor,
  namespaceList,
  searchList,
  type WalkPosition,
} from './memory-cursors.js';
import { deleteMemoryItem, expectedVersions, liveVersion, oldItemOf } from './memory-delete.js';
import { claimDimensions, listCreation, scanCodes, scanEmbeddings } from './memory-vectors.js';

/**
 * Memory items (API.md section 10; memory-codecs.ts has their shapes). A get is one GetItem;
 * a put or a delete one UpdateItem, whose expression numbers the versions itself, so
 * concurrent puts never lose one another and take 1, 2, 3, … without a gap:
 *
 *   put A ── UpdateItem version = if_not_exists(version, 0) + 1 ──> v4
 *   put B ── UpdateItem version = if_not_exists(version, 0) + 1 ──> v5 (DynamoDB serializes them)
 *
 * A delete leaves a tombstone (kind `mem:deleted`, already expired, so TTL removes it) with
 * neither value nor version, so the next put starts a new item at version 1; its stream
 * record is the delete's event. An item past its `expiresAt` reads as absent until TTL
 * removes it; a put over it starts a new item too (a second request, in that case only).
 */
export class DynamoDbMemoryStore implements MemoryStore {
  constructor(private readonly table: TableClient) {}

  async get(address: MemoryAddress, options: EmbeddingOption = {}): Promise<MemoryItem | null> {
    const { Item } = await this.table.send(
      new GetCommand({
        TableName: this.table.tableName,
        Key: memoryItem.key(address.tenant, address.namespace, address.key),
        ConsistentRead: true,
      }),
    );
    return memoryItem.isLive(Item, this.table.nowSeconds()) ? memoryItem.decode(Item, options) : null;
  }

  async getMany(
    tenant: string,
    items: ReadonlyArray<{ namespace: Namespace; key: string }>,
    options: EmbeddingOption = {},
  ): Promise<MemoryItem[]> {
    const found = await batchGet(
      this.table,
      items.map((item) => memoryItem.key(tenant, item.namespace, item.key)),
    );
    const nowSeconds = this.table.nowSeconds();
    return found.filter((item) => memoryItem.isLive(item, nowSeconds)).map((item) => memoryItem.decode(item, options));
  }

  /**
   * An item with an embedding first claims the namespace's dimensions (which also lists the
   * namespace); a put that created an item lists its namespace after writing it, counting the
   * creation (memory-vectors.ts `listCreation`, which the change hook's forgetting of an
   * emptied namespace looks at). Either way a search and the namespace list find it as soon
   * as the put answered.
   */
  async put(address: MemoryAddress, write: MemoryWrite): Promise<MemoryPutResult> {
    if (write.embedding) {
      const held = await claimDimensions(this.table, address.tenant, address.namespace, write.embedding.length);
      if (held !== null) return { outcome: 'dimensions_mismatch', dimensions: held };
    }
    const result = await this.putItem(address, write);
    if (result.outcome === 'written' && result.created)
      await listCreation(this.table, address.tenant, address.namespace, write.embedding?.length);
    // Its code before the put answers, so a search ranks it at once (memory-codes.ts).
    if (result.outcome === 'written' && write.embedding) {
      const code = embeddingCode(floatsOf(embeddingBytes(write.embedding)));
      await keepCode(this.table, address, code, codeStamp(result.item), { replacing: !result.created });
    }
    return result;
  }

  scanCodes(
    tenant: string,
    namespaces: ReadonlyArray<Namespace>,
    dimensions: number,
    visit: (entry: CodedEntry) => void,
  ): Promise<Namespace[]> {
    return scanCodes(this.table, tenant, namespaces, dimensions, visit);
  }

  scanEmbeddings(
    tenant: string,
    namespaces: ReadonlyArray<Namespace>,
    dimensions: number,
    visit: (candidate: VectorCandidate) => void,
  ): Promise<void> {
    return scanEmbeddings(this.table, tenant, namespaces, dimensions, visit);
  }

  private async putItem(address: MemoryAddress, write: MemoryWrite): Promise<MemoryPutResult> {
    // At most three rounds: a put that finds an expired item replaces it, and only a writer
    // that raced that very replacement goes round again.
    for (let round = 0; ; round++) {
      // One instant for `updatedAt` and the expiry counted from it.
      const nowMs = this.table.now();
      const now = new Date(nowMs).toISOString();
      const nowSeconds = Math.floor(nowMs / 1000);
      try {
        const { Attributes } = await this.table.send(new UpdateCommand(this.putInput(address, write, now, nowSeconds, null)));
        return written(Attributes as Item);
      } catch (error) {
        if (!isConditionFailure(error)) throw error;
        const old = oldItemOf(error);
        if (write.condition.kind !== 'none') return { outcome: 'precondition_failed', currentVersion: liveVersion(old, nowSeconds) };
        // The item is there but expired: replace it, on the condition that it still is.
        if (!old || round >= 2) throw new AgentStateError('conflict', 'the item changed while it was written; retry');
        try {
          const { Attributes } = await this.table.send(new UpdateCommand(this.putInput(address, write, now, nowSeconds, old)));
          return written(Attributes as Item);
        } catch (replaceError) {
          if (!isConditionFailure(replaceError)) throw replaceError;
        }
      }
    }
  }

  /**
   * The UpdateItem of a put. `expired`: the expired item it replaces (a new item at version
   * 1, on the condition that the expired one is still there unchanged).
   */
  private putInput(address: MemoryAddress, write: MemoryWrite, now: string, nowSeconds: number, expired: Item | null): UpdateCommandInput {
    const attributes = memoryItem.attributes(
      write.value,
      now,
      address.key,
      write.author,
      write.embedding && embeddingBytes(write.embedding),
    );
    const names: Record<string, string> = { '#kind': 'kind', '#value': 'value', '#ttl': tableKeys.timeToLive };
    const values: Record<string, unknown> = { ':now': now, ':nowSeconds': nowSeconds };
    const set: string[] = [];
    const remove: string[] = ['deletedAt'];
    for (const [name, value] of Object.entries(attributes)) {
      const path = name === 'kind' ? '#kind' : name === 'value' ? '#value' : name;
      if (value === undefined) remove.push(path);
      else {
        set.push(`${path} = :${name}`);
        values[`:${name}`] = value;
      }
    }
    if (write.ttlSeconds === undefined) remove.push('#ttl');
    else {
      set.push('#ttl = :expiresAt');
      values[':expiresAt'] = nowSeconds + write.ttlSeconds;
    }
    const notExpired = '(attribute_not_exists(#ttl) OR #ttl > :nowSeconds)';
    let condition: string;
    const { condition: precondition } = write;
    const fresh = expired !== null || precondition.kind === 'absent';
    if (fresh) {
      set.push('version = :one', 'createdAt = :now');
      values[':one'] = 1;
    } else if (precondition.kind === 'version' || precondition.kind === 'exists') {
      set.push('version = version + :one', 'createdAt = if_not_exists(createdAt, :now)');
      values[':one'] = 1;
    } else {
      set.push('version = if_not_exists(version, :zero) + :one', 'createdAt = if_not_exists(createdAt, :now)');
      values[':zero'] = 0;
      values[':one'] = 1;
    }
    if (expired !== null) {
      condition = '#kind = :live AND version = :expiredVersion AND #ttl <= :nowSeconds';
      values[':live'] = MEMORY_ITEM_KIND.item;
      values[':expiredVersion'] = expired.version;
    } else {
      switch (precondition.kind) {
        case 'none':
          values[':deleted'] = MEMORY_ITEM_KIND.deleted;
          condition = `${conditions.itemIsNew} OR #kind = :deleted OR ${notExpired}`;
          break;
        case 'version':
          condition = `#kind = :live AND version IN (${expectedVersions(precondition.versions, values)}) AND ${notExpired}`;
          values[':live'] = MEMORY_ITEM_KIND.item;
          break;
        case 'exists':
          condition = `#kind = :live AND ${notExpired}`;
          values[':live'] = MEMORY_ITEM_KIND.item;
          break;
        case 'absent':
          values[':deleted'] = MEMORY_ITEM_KIND.deleted;
          condition = `${conditions.itemIsNew} OR #kind = :deleted OR #ttl <= :nowSeconds`;
          break;
      }
    }
    return {
      TableName: this.table.tableName,
      Key: memoryItem.key(address.tenant, address.namespace, address.key),
      UpdateExpression: `SET ${set.join(', ')} REMOVE ${remove.join(', ')}`,
      ConditionExpression: condition,
      ExpressionAttributeNames: names,
      ExpressionAttributeValues: values,
      ReturnValues: 'ALL_NEW',
      ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
    };
  }

  delete(address: MemoryAddress, condition: MemoryPrecondition, author: string | null): Promise<MemoryDeleteResult> {
    return deleteMemoryItem(this.table, address, condition, author);
  }

  async listNamespaces(
    tenant: string,
    options: { prefixes: ReadonlyArray<Namespace>; maxDepth?: number; limit: number; cursor?: string },
  ): Promise<Page<string[]>> {
    const { maxDepth, limit } = options;
    let after = options.cursor === undefined ? null : decodeListCursor(options.cursor, namespaceList(this.table, tenant));
    // One more than a page, to know whether there is a next one; `resumes[i]` is where the
    // listing goes on after `namespaces[i]`.
    const namespaces: string[][] = [];
    const resumes: string[] = [];
    for (const prefix of options.prefixes) {
      const low = pathKey(prefix);
      const high = `${low}\x7f`;
      if (after !== null && after >= high) continue;
      let start = after !== null && after >= low ? after : null;
      for (let more = true; more && namespaces.length <= limit; ) {
        const { Items = [], LastEvaluatedKey } = await this.queryNamespaces(tenant, low, high, start, limit + 1 - namespaces.length);
        more = LastEvaluatedKey !== undefined;
        for (const entry of Items) {
          const namespace = namespaceEntry.namespaceOf(entry);
          const cut = maxDepth === undefined ? namespace : namespace.slice(0, maxDepth);
          // A namespace cut to maxDepth stands for all those below it: skip past them.
          const skip = maxDepth !== undefined && namespace.length >= maxDepth;
          start = skip ? `${pathKey(cut)}\x7f` : String(entry.sk);
          namespaces.push(cut);
          resumes.push(start);
          if (skip) {
            // Past the prefix's range when the cut is the prefix itself (or above it, for a
            // limited key's root): nothing more under it, and DynamoDB refuses a start out there.
            more = start < high;
            break;
          }
          if (namespaces.length > limit) break;
        }
      }
      after = null;
      if (namespaces.length > limit) break;
    }
    if (namespaces.length <= limit) return { items: namespaces };
    return { items: namespaces.slice(0, limit), next: encodeListCursor(resumes[limit - 1] as string, namespaceList(this.table, tenant)) };
  }

  async namespacesWithin(tenant: string, prefixes: ReadonlyArray<Namespace>, max: number): Promise<string[][]> {
    const found: string[][] = [];
    for (const prefix of prefixes) {
      const low = pathKey(prefix);
      let start: string | null = null;
      do {
        const page: QueryCommandOutput = await this.queryNamespaces(tenant, low, `${low}\x7f`, start, max - found.length);
        for (const entry of page.Items ?? []) found.push(namespaceEntry.namespaceOf(entry));
        start = page.LastEvaluatedKey ? String(page.LastEvaluatedKey.sk) : null;
      } while (start !== null && found.length < max);
      if (found.length >= max) break;
    }
    return found;
  }

  /** One page of the namespace list between `low` and `high` (the whole list when `low` is the root's ''), after `after`. */
  private queryNamespaces(tenant: string, low: string, high: string, after: string | null, limit: number) {
    const partition = keys.memoryNamespaces(tenant);
    const whole = low === '';
    return this.table.send(
      new QueryCommand({
        TableName: this.table.tableName,
        KeyConditionExpression: whole ? 'pk = :pk' : 'pk = :pk AND sk BETWEEN :low AND :high',
        ExpressionAttributeValues: whole ? { ':pk': partition } : { ':pk': partition, ':low': low, ':high': high },
        ProjectionExpression: 'pk, sk',
        // Consistent: a namespace a put listed before it answered is in every list after.
        ConsistentRead: true,
        Limit: Math.max(1, limit),
        ...(after === null ? {} : { ExclusiveStartKey: { pk: partition, sk: after } }),
      }),
    );
  }

  walk(tenant: string, namespaces: ReadonlyArray<Namespace>, options: { cursor?: string; pageSize: number; binding: string }): MemoryWalk {
    const list = searchList(this.table, tenant, options.binding);
    const start = options.cursor === undefined ? null : decodeWalkCursor(options.cursor, list);
    const perStream = Math.max(25, Math.min(options.pageSize, Math.ceil(options.pageSize / namespaces.length)));
    return new IndexWalk(this.table, tenant, namespaces, { start, pageSize: perStream, list });
  }

  async history(tenant: string, item: MemoryItem, options: { limit: number; cursor?: string }): Promise<Page<MemoryItem>> {
    const range = {
      tableName: this.table.tableName,
      partition: historyItem.partition(tenant, item.namespace, item.key),
      prefix: `${item.createdAt}#`,
    };
    const first = options.cursor === undefined;
    const limit = first ? options.limit - 1 : options.limit;
    // The current version is the item itself; the history partition holds those it replaced.
    const current = { pk: range.partition, sk: keys.memoryHistoryVersion(item.createdAt, item.version) };
    if (limit === 0) return item.version > 1 ? pageOf([item], current, range) : { items: [item] };
    const query = prefixPageQuery(range, { limit, newestFirst: true, ...(first ? {} : { cursor: options.cursor as string }) });
    const { Items = [], LastEvaluatedKey } = await this.table.send(
      new QueryCommand({ ...query, ...(first ? { ExclusiveStartKey: current } : {}) }),
    );
    const older = Items.map((entry) => historyItem.decode(item.namespace, item.key, entry));
    return pageOf(first ? [item, ...older] : older, LastEvaluatedKey, range);
  }
}

function written(attributes: Item): MemoryPutResult {
  const item = memoryItem.decode(attributes);
  return { outcome: 'written', item, created: item.version === 1 };
}

/** One namespace's part of a walk: its entries read so far and where its index read stopped. */
interface Stream {
  namespace: Namespace;
  /** The namespace's partition in the index. */
  partition: string;
  /** Its ids joined by `/`: how namespaces are ordered within one recency. */
  path: string;
  buffer: MemoryCandidate[];
  recencies: string[];
  /** The key the last read stopped at; null once it reached the end. */
  next: Item | null | 'start';
}

/**
 * A k-way merge of the namespaces' index partitions, newest first. The order is total:
 * recency (`<updatedAt>#<key>`) descending, then the namespace path descending, so one
 * position resumes every namespace: a namespace after the position's own in that order still
 * has the entry at exactly the position's recency to give, the others only older ones.
 */
class IndexWalk implements MemoryWalk {
  private readonly streams: Stream[];
  private last: WalkPosition | null;

  private readonly pageSize: number;
  /** The search this walk is of (`searchList`): its cursors open for it alone. */
  private readonly list: string;

  constructor(
    private readonly table: TableClient,
    tenant: string,
    namespaces: ReadonlyArray<Namespace>,
    options: { start: WalkPosition | null; pageSize: number; list: string },
  ) {
    this.last = options.start;
    this.pageSize = options.pageSize;
    this.list = options.list;
    this.streams = namespaces.map((namespace) => ({
      namespace,
      partition: keys.memoryNamespace(tenant, namespace),
      path: namespace.join('/'),
      buffer: [],
      recencies: [],
      next: 'start',
    }));
  }

  async peek(): Promise<MemoryCandidate | null> {
    const stream = await this.head();
    return stream?.buffer[0] ?? null;
  }

  async next(): Promise<MemoryCandidate | null> {
    const stream = await this.head();
    if (!stream) return null;
    const candidate = stream.buffer.shift() as MemoryCandidate;
    this.last = { recency: stream.recencies.shift() as string, namespace: stream.path };
    return candidate;
  }

  mayHaveMore(): boolean {
    return this.streams.some((stream) => stream.buffer.length > 0 || stream.next !== null);
  }

  position(): string {
    return encodeWalkCursor(this.list, this.last);
  }

  /** The stream whose first entry comes next, reading the index where a stream ran dry. */
  private async head(): Promise<Stream | null> {
    await Promise.all(
      this.streams.filter((stream) => stream.buffer.length === 0 && stream.next !== null).map((stream) => this.read(stream)),
    );
    let best: Stream | null = null;
    for (const stream of this.streams) {
      const recency = stream.recencies[0];
      if (recency === undefined) continue;
      const bestRecency = best?.recencies[0];
      if (!best || bestRecency === undefined || recency > bestRecency || (recency === bestRecency && stream.path > best.path))
        best = stream;
    }
    return best;
  }

  private async read(stream: Stream): Promise<void> {
    // Until a stream's first page, it resumes from the walk's position (see the class comment).
    while (stream.buffer.length === 0 && stream.next !== null) {
      const { memoryIndex } = tableKeys;
      const from = stream.next === 'start' ? this.last : null;
      const inclusive = from !== null && stream.path < from.namespace;
      const { Items = [], LastEvaluatedKey } = await this.table.send(
        new QueryCommand({
          TableName: this.table.tableName,
          IndexName: memoryIndex.name,
          KeyConditionExpression: from === null ? 'pk = :pk' : `pk = :pk AND mu ${inclusive ? '<=' : '<'} :from`,
          ExpressionAttributeValues: { ':pk': stream.partition, ...(from === null ? {} : { ':from': from.recency }) },
          ScanIndexForward: false,
          // A local index, read consistently: every put and delete that answered is in it.
          ConsistentRead: true,
          Limit: this.pageSize,
          ...(stream.next === 'start' ? {} : { ExclusiveStartKey: stream.next }),
        }),
      );
      for (const entry of Items) {
        stream.buffer.push(memoryItem.candidate(entry));
        stream.recencies.push(String(entry.mu));
      }
      stream.next = LastEvaluatedKey ?? null;
    }
  }
}
