import { randomUUID } from 'node:crypto';
import type { AttributeValue, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import {
  BatchGetCommand,
  BatchWriteCommand,
  DynamoDBDocumentClient,
  TransactWriteCommand,
  type TransactWriteCommandInput,
} from '@aws-sdk/lib-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import { AgentStateError } from '../../core/kernel/errors.js';
import { StaleTipError } from '../../core/model/ports.js';

/** An item as the document client returns it. */
export type Item = Record<string, unknown>;

export type TransactItem = NonNullable<TransactWriteCommandInput['TransactItems']>[number];

/** A transaction item and what it is, so that a cancellation reason can be explained. */
export interface TaggedItem {
  role: 'tip' | 'session' | 'document' | 'entry';
  item: TransactItem;
}

/** Condition fragments every store uses, named so that a write says what it guards against. */
export const conditions = {
  itemIsNew: 'attribute_not_exists(pk)',
  itemExists: 'attribute_exists(pk)',
} as const;

const BATCH_GET_LIMIT = 100;
const BATCH_WRITE_LIMIT = 25;

/**
 * The one table as every store talks to it: the document client, the table's name and the
 * clock, with DynamoDB's failures translated into API errors. The functions below it add what
 * DynamoDB leaves to the caller: transactions whose cancellations are explained, batches that
 * retry what was left unprocessed, conditional writes whose failed condition is an answer.
 * (Functions rather than methods, so that a bundle carries only the ones its stores use.)
 * Only the stores (this folder) use it; nothing above them sees a DynamoDB exception.
 */
export class TableClient {
  /** Sends a command, turning DynamoDB's capacity and availability failures into API errors. */
  readonly send: DynamoDBDocumentClient['send'];

  constructor(
    client: DynamoDBClient,
    readonly tableName: string,
    /** The clock of every time a store writes or compares (TTLs, leases, tombstones): epoch ms. */
    readonly now: () => number = Date.now,
  ) {
    const doc = DynamoDBDocumentClient.from(client, { marshallOptions: { removeUndefinedValues: true } });
    this.send = (async (command: Parameters<DynamoDBDocumentClient['send']>[0]) => {
      try {
        return await doc.send(command);
      } catch (error) {
        throw translateServiceError(error);
      }
    }) as DynamoDBDocumentClient['send'];
  }

  /** The clock in epoch seconds, as TTL attributes count. */
  nowSeconds(): number {
    return Math.floor(this.now() / 1000);
  }
}

/**
 * Runs a transaction and explains a cancellation by the role of the item that failed: the
 * tip (the log's next place) or a document means the session moved on (re-read and retry).
 * A conflict with another transaction wrote nothing either, so it is a moved tip too.
 */
export async function transact(table: TableClient, items: TaggedItem[]): Promise<void> {
  // Conditional puts carry this transaction's id and return the old item when they fail, so
  // a retry of a transaction that had in fact landed (its answer lost) is recognised.
  const writeId = randomUUID();
  const transactItems = items.map(({ role, item }) =>
    (role === 'tip' || role === 'document') && item.Put
      ? { Put: { ...item.Put, Item: { ...item.Put.Item, writeId }, ReturnValuesOnConditionCheckFailure: 'ALL_OLD' as const } }
      : item,
  );
  try {
    await table.send(new TransactWriteCommand({ TransactItems: transactItems }));
  } catch (error) {
    const reasons = (error as { CancellationReasons?: Array<{ Item?: Record<string, unknown> }> }).CancellationReasons ?? [];
    if (reasons.some((reason) => isOwnWrite(reason.Item, writeId))) return;
    throw translateCancellation(error, items);
  }
}

/**
 * A transaction's session item refused it: gone, or expired while nothing is in its log
 * (session-writes.ts, `sessionUpsert`), or there where the writer took it to be absent. A moved
 * tip to its caller, who may carry out the expiry. `item`: the session item as it refused, when
 * its update or check asked for it (`ReturnValuesOnConditionCheckFailure`) and it was there.
 */
export class SessionItemRefused extends StaleTipError {
  constructor(readonly item?: Item) {
    super();
  }
}

/** The items that exist among `itemKeys`, read consistently (with `projection`, those attributes of them), 100 a request, all in parallel. */
export async function batchGet(
  table: TableClient,
  itemKeys: readonly Item[],
  projection?: { ProjectionExpression: string; ExpressionAttributeNames: Record<string, string> },
): Promise<Item[]> {
  const found: Item[] = [];
  await Promise.all(
    chunks(itemKeys, BATCH_GET_LIMIT).map(async (chunk) => {
      let pending: Item[] = chunk;
      for (let attempt = 0; pending.length > 0; attempt++) {
        if (attempt > 0) await backoff(attempt);
        const { Responses, UnprocessedKeys } = await table.send(
          new BatchGetCommand({ RequestItems: { [table.tableName]: { Keys: pending, ConsistentRead: true, ...projection } } }),
        );
        found.push(...(Responses?.[table.tableName] ?? []));
        pending = (UnprocessedKeys?.[table.tableName]?.Keys as Item[] | undefined) ?? [];
      }
    }),
  );
  return found;
}

/** Puts `items` unconditionally, 25 a request, all in parallel (what is left unprocessed is retried). */
export async function batchPut(table: TableClient, items: readonly Item[]): Promise<void> {
  await Promise.all(
    chunks(items, BATCH_WRITE_LIMIT).map(async (chunk) => {
      let pending = chunk.map((Item) => ({ PutRequest: { Item } }));
      for (let attempt = 0; pending.length > 0; attempt++) {
        if (attempt > 0) await backoff(attempt);
        const { UnprocessedItems } = await table.send(new BatchWriteCommand({ RequestItems: { [table.tableName]: pending } }));
        pending = (UnprocessedItems?.[table.tableName] as typeof pending | undefined) ?? [];
      }
    }),
  );
}

/** Deletes the items with `itemKeys`, 25 a request, one request after the other. */
export function batchDelete(table: TableClient, itemKeys: readonly Item[]): Promise<void> {
  return batchWrite(
    table,
    itemKeys.map((Key) => ({ DeleteRequest: { Key } })),
  );
}

type WriteRequest = { DeleteRequest: { Key: Item } } | { PutRequest: { Item: Item } };

/** Sends write requests 25 a request, one request after the other, retrying what comes back unprocessed. */
async function batchWrite(table: TableClient, requests: readonly WriteRequest[]): Promise<void> {
  for (const chunk of chunks(requests, BATCH_WRITE_LIMIT)) {
    let pending = chunk;
    for (let attempt = 0; pending.length > 0; attempt++) {
      if (attempt > 0) await backoff(attempt);
      const { UnprocessedItems } = await table.send(new BatchWriteCommand({ RequestItems: { [table.tableName]: pending } }));
      pending = (UnprocessedItems?.[table.tableName] as typeof pending | undefined) ?? [];
    }
  }
}

/**
 * Runs a conditional write: true when it landed, false when its condition was false (a lease
 * someone else holds, a record that is not ours to change). Every other failure goes on.
 */
export async function conditionally(write: Promise<unknown>): Promise<boolean> {
  try {
    await write;
    return true;
  } catch (error) {
    if (isConditionFailure(error)) return false;
    throw error;
  }
}

/** A conditional write that found its condition false; `Item` is the old item when it was asked for. */
export function isConditionFailure(error: unknown): error is Error & { Item?: Record<string, unknown> } {
  return error instanceof Error && error.name === 'ConditionalCheckFailedException';
}

/**
 * Whether an item returned with a failed condition is the one this very write put there. The
 * SDK retries a request whose answer was lost; if the first attempt landed, the retry fails
 * its condition on our own item, which is success.
 */
export function isOwnWrite(item: Record<string, unknown> | undefined, writeId: string, attribute = 'writeId'): boolean {
  if (!item) return false;
  // Returned items come in wire format ({S: …}), or unmarshalled through the document client.
  const value = item[attribute] as { S?: string } | string | undefined;
  return (typeof value === 'string' ? value : value?.S) === writeId;
}

const throttlingErrors = new Set(['ProvisionedThroughputExceededException', 'ThrottlingException', 'RequestLimitExceeded']);
const unavailableErrors = new Set(['InternalServerError', 'ServiceUnavailable', 'ServiceUnavailableException']);
const networkCodes = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'TimeoutError']);

function throttled(error: Error): AgentStateError {
  return new AgentStateError('throttled', 'the table is over its request rate; retry with backoff', {}, { cause: error });
}

/**
 * With a local index on the table (the memory index, table.ts), DynamoDB keeps at most 10 GB
 * under one partition key: a memory namespace, or a session, that holds that much takes no
 * more until something is deleted. A limit of the data, told as one (`413`), never a `500`.
 */
function collectionFull(error: Error): AgentStateError {
  return new AgentStateError(
    'payload_too_large',
    'this namespace or session holds 10 GB, the most the table keeps under one key; delete some of it to write more',
    {},
    { cause: error },
  );
}

/**
 * The SDK has already retried what is safe to retry. What is left is told to the client
 * plainly: too much load is `429 throttled`, an unreachable or failing DynamoDB `503`.
 */
function translateServiceError(error: unknown): unknown {
  if (!(error instanceof Error)) return error;
  if (throttlingErrors.has(error.name)) return throttled(error);
  if (error.name === 'ItemCollectionSizeLimitExceededException') return collectionFull(error);
  const status = (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
  const code = (error as { code?: string }).code ?? '';
  if (
    unavailableErrors.has(error.name) ||
    (status !== undefined && status >= 500) ||
    networkCodes.has(code) ||
    networkCodes.has(error.name)
  ) {
    return new AgentStateError('unavailable', 'the database is unavailable; retry shortly', {}, { cause: error });
  }
  return error;
}

function translateCancellation(error: unknown, items: readonly TaggedItem[]): unknown {
  if (!(error instanceof Error)) return error;
  if (error.name === 'TransactionConflictException') return new StaleTipError();
  if (error.name !== 'TransactionCanceledException') return error;
  const reasons = (error as { CancellationReasons?: Array<{ Code?: string; Item?: Item }> }).CancellationReasons ?? [];
  const codes = reasons.map((reason) => reason.Code ?? 'None');
  if (codes.includes('TransactionConflict')) return new StaleTipError();
  const failed = codes.indexOf('ConditionalCheckFailed');
  if (failed >= 0 && items[failed]?.role === 'session') return new SessionItemRefused(documentItem(reasons[failed]?.Item));
  if (failed >= 0 && items[failed]) return new StaleTipError();
  if (codes.some((code) => throttlingErrors.has(code) || code === 'ThrottlingError')) return throttled(error);
  if (codes.includes('ItemCollectionSizeLimitExceeded')) return collectionFull(error);
  return error;
}

/** An item a transaction's refusal returned, as the document client reads items: a cancellation carries it in wire format ({S: …}). */
function documentItem(item: Item | undefined): Item | undefined {
  const wire = typeof item?.pk === 'object' && item.pk !== null && 'S' in item.pk;
  return item && wire ? unmarshall(item as Record<string, AttributeValue>) : item;
}

function chunks<T>(list: readonly T[], size: number): T[][] {
  const result: T[][] = [];
  for (let offset = 0; offset < list.length; offset += size) result.push(list.slice(offset, offset + size));
  return result;
}

function backoff(attempt: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.random() * Math.min(200, 10 * 2 ** attempt)));
}
