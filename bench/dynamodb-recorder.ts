/**
 * A recording proxy in front of DynamoDB: every request that passes it is priced per partition
 * key, whoever sent it (the handlers, the change hook, the webhook hook). It asks each request
 * for `ReturnConsumedCapacity: INDEXES`, reads the table's capacity from the answer, and splits
 * a batch's or a transaction's capacity over the keys it names. Used by the partition-load
 * measurement (bench/partition-load.ts); the index writes a write causes are priced from the
 * table's stream (bench/index-writes.ts), because no answer says which index key a write moved.
 *
 * Where DynamoDB Local does not say what AWS would bill, the recorder prices the request by
 * DynamoDB's published rules, with the meter's estimator (bench/capacity-rules.ts): a
 * transaction's items from their sizes before and after it (two units per started KB of each,
 * the larger of the two, condition checks included; a cancelled one as if it had written), a
 * write that failed its condition at the size of the item that is there, a read that found
 * nothing at its minimum, and a read that failed at nothing.
 */
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { buffer } from 'node:stream/consumers';
import {
  beforeTransaction,
  itemSize,
  kilobytes,
  type PricedTransactItem,
  priceFailedWrite,
  type WireItem,
  type WireValue,
} from './capacity-rules.js';

/** One key's share of one request. */
export interface KeyCharge {
  /** The partition key's value, e.g. `S#t#session-1`. */
  key: string;
  /** `table`, or the index's name for a query of an index (index writes: index-writes.ts). */
  where: string;
  readUnits: number;
  writeUnits: number;
  /** The request (or its part) that touched this key: the operation's name (a transaction's with its item's kind, `TransactWriteItems Update`). */
  operation: string;
  /** The item's sort key, for a request (or a transaction's part) that names one item. */
  sortKey?: string;
}

export interface RecordedRequest {
  operation: string;
  /** The error's name when DynamoDB refused the request (`ConditionalCheckFailedException`…). */
  error?: string;
  charges: KeyCharge[];
}

const CAPACITY_OPERATIONS = new Set([
  'GetItem',
  'PutItem',
  'UpdateItem',
  'DeleteItem',
  'Query',
  'Scan',
  'BatchGetItem',
  'BatchWriteItem',
  'TransactGetItems',
  'TransactWriteItems',
]);
const READ_OPERATIONS = new Set(['GetItem', 'Query', 'Scan', 'BatchGetItem', 'TransactGetItems']);
const SINGLE_WRITES = new Set(['PutItem', 'UpdateItem', 'DeleteItem']);

interface Answer {
  /** 0: the request did not reach DynamoDB or its answer did not come back. */
  status: number;
  headers: Record<string, string | string[] | undefined>;
  raw: Buffer;
}

/** What the recorder learnt about a request besides its answer (capacity-rules.ts). */
interface Estimates {
  /** A TransactWriteItems' items, priced from their sizes. */
  transaction?: PricedTransactItem[];
  /** A single-item write that failed its condition: the units AWS bills for it. */
  failedUnits?: number;
}

export interface DynamoDbRecorder {
  /** The proxy's endpoint, to give the clients in place of DynamoDB's. */
  url: string;
  /** The requests recorded since the last `take()`, and a fresh start. */
  take(): RecordedRequest[];
  close(): Promise<void>;
}

/** Starts the proxy in front of `target` (DynamoDB Local's endpoint). */
export async function startDynamoDbRecorder(target: string): Promise<DynamoDbRecorder> {
  const upstream = new URL(target);
  /** Each table's partition key and each index's, from DescribeTable answers seen on the way (or asked). */
  const schema = new TableSchemas(target);
  let recorded: RecordedRequest[] = [];
  const server: Server = createServer((req, res) => {
    void (async () => {
      const body = await buffer(req);
      const targetHeader = String(req.headers['x-amz-target'] ?? '');
      const operation = targetHeader.startsWith('DynamoDB_20120810.') ? targetHeader.slice('DynamoDB_20120810.'.length) : '';
      let input: Record<string, unknown> | undefined;
      let sent = body;
      if (CAPACITY_OPERATIONS.has(operation)) {
        input = JSON.parse(body.toString('utf8')) as Record<string, unknown>;
        input.ReturnConsumedCapacity = 'INDEXES';
        sent = Buffer.from(JSON.stringify(input));
      }
      const headers = { ...req.headers, host: upstream.host, 'content-length': String(sent.length) };
      const forward = () =>
        new Promise<Answer>((resolve) => {
          const forwarded = httpRequest(
            { hostname: upstream.hostname, port: upstream.port, path: req.url, method: req.method, headers },
            (answer) => {
              const chunks: Buffer[] = [];
              answer.on('data', (chunk: Buffer) => chunks.push(chunk));
              answer.on('end', () => resolve({ status: answer.statusCode ?? 500, headers: answer.headers, raw: Buffer.concat(chunks) }));
              answer.on('error', () => resolve({ status: 0, headers: {}, raw: Buffer.alloc(0) }));
            },
          );
          forwarded.on('error', () => resolve({ status: 0, headers: {}, raw: Buffer.alloc(0) }));
          forwarded.end(sent);
        });
      let finishTransaction: ((committed: boolean) => Promise<PricedTransactItem[]>) | undefined;
      if (operation === 'TransactWriteItems' && input) {
        // Its items are read before it (straight from DynamoDB, unrecorded) and again after it has
        // answered, off the request's path, to price it.
        finishTransaction = await beforeTransaction(target, input).catch(() => undefined);
      }
      const answer = await forward();
      if (answer.status === 0) {
        res.destroy();
        return;
      }
      res.writeHead(answer.status, answer.headers);
      res.end(answer.raw);
      if (!input) return;
      const { status, raw } = answer;
      const priced = input;
      void (async () => {
        await schema.ready(priced);
        const failedCondition = status >= 400 && raw.includes('ConditionalCheckFailedException') && SINGLE_WRITES.has(operation);
        const failedUnits = failedCondition ? await priceFailedWrite(target, priced) : undefined;
        const transaction = await finishTransaction?.(status < 400);
        recorded.push(priceRequest(schema, operation, priced, status, raw, { transaction, failedUnits }));
      })().catch(() => {});
    })();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    take: () => {
      const taken = recorded;
      recorded = [];
      return taken;
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** The partition key attribute of each table and index, learnt once per table by DescribeTable. */
class TableSchemas {
  private readonly known = new Map<string, Promise<Map<string, string>>>();
  private readonly resolved = new Map<string, Map<string, string>>();

  constructor(private readonly endpoint: string) {}

  /** Waits until the tables `input` names are described. */
  async ready(input: Record<string, unknown>): Promise<void> {
    await Promise.all(tablesOf(input).map((table) => this.describe(table)));
  }

  /** The partition key attribute of `table` (or of its index `index`). */
  partitionKey(table: string, index?: string): string {
    return this.resolved.get(table)?.get(index ?? '') ?? 'pk';
  }

  private describe(table: string): Promise<Map<string, string>> {
    let found = this.known.get(table);
    if (!found) {
      found = describeTable(this.endpoint, table).then((keys) => {
        this.resolved.set(table, keys);
        return keys;
      });
      this.known.set(table, found);
    }
    return found;
  }
}

async function describeTable(endpoint: string, table: string): Promise<Map<string, string>> {
  const response = await fetch(endpoint, {
    method: 'POST',
    headers: {
      'content-type': 'application/x-amz-json-1.0',
      'x-amz-target': 'DynamoDB_20120810.DescribeTable',
      authorization: 'AWS4-HMAC-SHA256 Credential=local/20200101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0',
    },
    body: JSON.stringify({ TableName: table }),
  });
  const keys = new Map<string, string>();
  if (!response.ok) return keys;
  const { Table } = (await response.json()) as {
    Table?: {
      KeySchema?: Array<{ AttributeName: string; KeyType: string }>;
      GlobalSecondaryIndexes?: Array<{ IndexName: string; KeySchema: Array<{ AttributeName: string; KeyType: string }> }>;
    };
  };
  const hash = (schema?: Array<{ AttributeName: string; KeyType: string }>) => schema?.find((key) => key.KeyType === 'HASH')?.AttributeName;
  keys.set('', hash(Table?.KeySchema) ?? 'pk');
  for (const index of Table?.GlobalSecondaryIndexes ?? []) keys.set(index.IndexName, hash(index.KeySchema) ?? 'pk');
  return keys;
}

function tablesOf(input: Record<string, unknown>): string[] {
  if (typeof input.TableName === 'string') return [input.TableName];
  if (input.RequestItems && typeof input.RequestItems === 'object') return Object.keys(input.RequestItems);
  const items = (input.TransactItems ?? []) as Array<Record<string, { TableName?: string } | undefined>>;
  return [...new Set(items.flatMap((item) => Object.values(item).map((part) => part?.TableName ?? '')))].filter(Boolean);
}

interface Capacity {
  TableName?: string;
  CapacityUnits?: number;
  Table?: { CapacityUnits?: number };
  GlobalSecondaryIndexes?: Record<string, { CapacityUnits?: number }>;
}

/** What one request cost, per partition key. */
function priceRequest(
  schema: TableSchemas,
  operation: string,
  input: Record<string, unknown>,
  status: number,
  raw: Buffer,
  estimates: Estimates = {},
): RecordedRequest {
  let output: Record<string, unknown> = {};
  try {
    output = JSON.parse(raw.toString('utf8')) as Record<string, unknown>;
  } catch {
    // Not JSON: priced as a failure below.
  }
  const failed = status >= 400;
  const error = failed ? String(output.__type ?? 'Unknown').replace(/^.*#/, '') : undefined;
  const read = READ_OPERATIONS.has(operation);
  const consumed = ([] as Capacity[]).concat((output.ConsumedCapacity as Capacity | Capacity[] | undefined) ?? []);
  const charge = (key: string, units: number, where = 'table', item?: WireItem): KeyCharge => ({
    key,
    where,
    operation,
    readUnits: read ? units : 0,
    writeUnits: read ? 0 : units,
    ...(item?.sk ? { sortKey: stringOf(item.sk) } : {}),
  });
  const pkOf = (table: string, item: WireItem | undefined) => stringOf(item?.[schema.partitionKey(table)]);
  // A read that finds nothing still costs its minimum in AWS (DynamoDB Local reports 0).
  const least = read ? (input.ConsistentRead === true ? 1 : 0.5) : 0;
  const tableUnits = (capacity: Capacity | undefined) => Math.max(least, capacity?.Table?.CapacityUnits ?? capacity?.CapacityUnits ?? 0);

  switch (operation) {
    case 'GetItem':
    case 'DeleteItem':
    case 'UpdateItem': {
      const table = String(input.TableName);
      const key = pkOf(table, input.Key as WireItem);
      // A failed conditional write is billed at the item that is there (capacity-rules.ts); a failed read is not.
      const units = failed ? (read ? 0 : (estimates.failedUnits ?? 0)) : tableUnits(consumed[0]);
      return { operation, ...(error ? { error } : {}), charges: [charge(key, units, 'table', input.Key as WireItem)] };
    }
    case 'PutItem': {
      const table = String(input.TableName);
      const item = input.Item as WireItem;
      const units = failed ? (estimates.failedUnits ?? 0) : tableUnits(consumed[0]);
      return { operation, ...(error ? { error } : {}), charges: [charge(pkOf(table, item), units, 'table', item)] };
    }
    case 'Query':
    case 'Scan': {
      const table = String(input.TableName);
      const index = typeof input.IndexName === 'string' ? input.IndexName : undefined;
      const key = operation === 'Scan' ? '<scan>' : queryPartition(input, schema.partitionKey(table, index));
      const units = failed
        ? 0
        : index
          ? Math.max(least, consumed[0]?.GlobalSecondaryIndexes?.[index]?.CapacityUnits ?? consumed[0]?.CapacityUnits ?? 0)
          : tableUnits(consumed[0]);
      return { operation, ...(error ? { error } : {}), charges: [charge(key, units, index ?? 'table')] };
    }
    case 'BatchGetItem': {
      const charges: KeyCharge[] = [];
      for (const [table, request] of Object.entries(input.RequestItems as Record<string, { Keys: WireItem[] }>)) {
        const units = failed ? 0 : tableUnits(consumed.find((entry) => entry.TableName === table));
        // Each key's share: the units split evenly (the answer does not say per item).
        for (const key of request.Keys) charges.push(charge(pkOf(table, key), units / request.Keys.length));
      }
      return { operation, ...(error ? { error } : {}), charges };
    }
    case 'BatchWriteItem': {
      const charges: KeyCharge[] = [];
      for (const [table, requests] of Object.entries(
        input.RequestItems as Record<string, Array<{ PutRequest?: { Item: WireItem }; DeleteRequest?: { Key: WireItem } }>>,
      )) {
        const sized = requests.map((entry) =>
          entry.PutRequest
            ? { key: pkOf(table, entry.PutRequest.Item), units: kilobytes(itemSize(entry.PutRequest.Item)) }
            : { key: pkOf(table, entry.DeleteRequest?.Key), units: 1 },
        );
        // Unprocessed items are sent again and priced then: only what was processed counts here.
        const unprocessed = new Set(
          (
            (
              output.UnprocessedItems as
                | Record<string, Array<{ PutRequest?: { Item: WireItem }; DeleteRequest?: { Key: WireItem } }>>
                | undefined
            )?.[table] ?? []
          ).map((entry) => JSON.stringify(entry)),
        );
        const reported = tableUnits(consumed.find((entry) => entry.TableName === table));
        const estimated = sized.reduce((sum, entry) => sum + entry.units, 0);
        requests.forEach((entry, position) => {
          if (failed || unprocessed.has(JSON.stringify(entry))) return;
          const share = sized[position] as { key: string; units: number };
          charges.push(charge(share.key, estimated > 0 ? (reported * share.units) / estimated : 0));
        });
      }
      return { operation, ...(error ? { error } : {}), charges };
    }
    case 'TransactWriteItems': {
      // DynamoDB Local rounds a transaction's total, not each item: every item is priced by the
      // rules instead (capacity-rules.ts), cancelled or not. Its index writes come from the stream.
      if (estimates.transaction) {
        return {
          operation,
          ...(error ? { error } : {}),
          charges: estimates.transaction.map((part) => ({
            ...charge(pkOf(part.table, part.key), part.writeUnits, 'table', part.key),
            operation: `${operation} ${part.kind}`,
          })),
        };
      }
      // Its items could not be read: its Puts by their size, every other item as under 1 KB.
      const charges: KeyCharge[] = [];
      for (const item of input.TransactItems as Array<Record<string, { TableName: string; Item?: WireItem; Key?: WireItem } | undefined>>) {
        const [kind, part] = Object.entries(item)[0] as [string, { TableName: string; Item?: WireItem; Key?: WireItem }];
        const units = kind === 'Put' ? 2 * kilobytes(itemSize(part.Item ?? {})) : 2;
        charges.push(charge(pkOf(part.TableName, part.Item ?? part.Key), units, 'table', part.Item ?? part.Key));
      }
      return { operation, ...(error ? { error } : {}), charges };
    }
    case 'TransactGetItems': {
      const items = input.TransactItems as Array<{ Get: { TableName: string; Key: WireItem } }>;
      const total = failed ? 0 : consumed.reduce((sum, entry) => sum + tableUnits(entry), 0);
      return {
        operation,
        ...(error ? { error } : {}),
        charges: items.map(({ Get }) => charge(pkOf(Get.TableName, Get.Key), total / items.length)),
      };
    }
    default:
      return { operation, charges: [] };
  }
}

/** The value a Query's key condition binds to the partition key (`pk = :pk`, `#p = :v`). */
function queryPartition(input: Record<string, unknown>, partitionKey: string): string {
  const names = (input.ExpressionAttributeNames ?? {}) as Record<string, string>;
  const values = (input.ExpressionAttributeValues ?? {}) as Record<string, WireValue>;
  const condition = String(input.KeyConditionExpression ?? '');
  for (const match of condition.matchAll(/([#\w]+)\s*=\s*(:\w+)/g)) {
    const name = (match[1] as string).startsWith('#') ? names[match[1] as string] : match[1];
    if (name === partitionKey) return stringOf(values[match[2] as string]);
  }
  return '<unknown>';
}

function stringOf(value: WireValue | undefined): string {
  if (!value) return '<none>';
  if (typeof value.S === 'string') return value.S;
  if (typeof value.N === 'string') return value.N;
  return JSON.stringify(value);
}
