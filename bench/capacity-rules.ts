/**
 * What AWS would bill for a write DynamoDB Local does not price by AWS's rules: the one place
 * the bench estimates capacity, for both of its accountings (the meter of sections 1, 3, 5…,
 * bench/meter.ts, and the per-key recorder of the partition load, bench/dynamodb-recorder.ts),
 * so that both price the same request alike.
 *
 * DynamoDB's published rules (Developer Guide, "Capacity unit consumption for write
 * operations", "Amazon DynamoDB Transactions: how it works", "Global secondary indexes"):
 *
 * - A write costs one unit per started KB of the item; a `PutItem` that replaces an item and
 *   an `UpdateItem` cost the larger of the item before and after (a one-attribute update of a
 *   3 KB item costs 3); a `DeleteItem` the item it deleted; one unit at least.
 * - A conditional write whose condition fails is billed too: the size of the item that is
 *   there (one unit when there is none).
 * - A transaction (`TransactWriteItems`) costs two units per started KB of every item it
 *   names, the `ConditionCheck`s included, each rounded on its own, with the same
 *   before-and-after rule; a cancelled transaction is billed as if it had written.
 * - An index write is an ordinary write of the index entry (keys plus projected attributes):
 *   a new entry is a put, a removed one a delete, a moved index key both, a changed projected
 *   attribute a put; a transaction's index writes propagate after it, as ordinary writes.
 *
 * What DynamoDB Local reports instead (measured, bench/capacity-rules.ts's unit test cites the
 * cases): plain `PutItem`, `UpdateItem`, `DeleteItem` and `BatchWriteItem` follow the rules,
 * index writes included in `TOTAL` and itemised with `INDEXES`; a failed conditional write
 * reports nothing; a `TransactWriteItems` rounds the sum of its items' sizes instead of each
 * item (a 100 B put, a 1.5 KB update and a 100 B check: 6, not 8), prices a `ConditionCheck`
 * in 4 KB steps like a read, and charges its index writes twice. Those are what this module
 * prices from the items themselves, read before and after the request straight from DynamoDB
 * (an unmetered `BatchGetItem`; under concurrent writers an item may change in between, so
 * the figure is an estimate of what the request met).
 */

/** An attribute value as DynamoDB's JSON protocol carries it (`{"S": "x"}`). */
export type WireValue = Record<string, unknown>;
export type WireItem = Record<string, WireValue>;

/** Write units of an item of `bytes`: one per started KB, one at least. */
export function kilobytes(bytes: number): number {
  return Math.max(1, Math.ceil(bytes / 1024));
}

/** An item's size as DynamoDB counts it: attribute names plus values, in the wire format. */
export function itemSize(item: WireItem): number {
  return Object.entries(item).reduce((sum, [name, value]) => sum + Buffer.byteLength(name) + valueSize(value), 0);
}

function valueSize(value: WireValue): number {
  const [type, inner] = Object.entries(value)[0] ?? ['NULL', true];
  switch (type) {
    case 'S':
      return Buffer.byteLength(String(inner));
    case 'N':
      return (
        Math.ceil(
          Math.max(
            1,
            String(inner)
              .replace(/[^0-9]/g, '')
              .replace(/^0+/, '').length,
          ) / 2,
        ) + 1
      );
    case 'B':
      // Base64 on the wire; bytes in the images a stream client hands over.
      return inner instanceof Uint8Array ? inner.byteLength : Buffer.from(String(inner), 'base64').byteLength;
    case 'SS':
      return (inner as string[]).reduce((sum, entry) => sum + Buffer.byteLength(entry), 0);
    case 'NS':
      return (inner as string[]).reduce((sum, entry) => sum + valueSize({ N: entry }), 0);
    case 'BS':
      return (inner as Array<string | Uint8Array>).reduce((sum, entry) => sum + valueSize({ B: entry }), 0);
    case 'L':
      return 3 + (inner as WireValue[]).reduce((sum, entry) => sum + 1 + valueSize(entry), 0);
    case 'M':
      return 3 + Object.entries(inner as WireItem).reduce((sum, [name, entry]) => sum + 1 + Buffer.byteLength(name) + valueSize(entry), 0);
    default:
      return 1;
  }
}

export type TransactKind = 'Put' | 'Update' | 'Delete' | 'ConditionCheck';

/** The bytes of an item before and after a write (`undefined`: no item). */
export interface ItemSizes {
  before?: number;
  after?: number;
}

/**
 * Write units of one item of a transaction, table only: twice the larger of the item before
 * and after, in started KB (a `ConditionCheck` or a `Delete` has only a before).
 */
export function transactItemUnits(kind: TransactKind, sizes: ItemSizes): number {
  const after = kind === 'Put' || kind === 'Update' ? (sizes.after ?? 0) : 0;
  return 2 * kilobytes(Math.max(sizes.before ?? 0, after));
}

/** Write units of a conditional write whose condition failed: the item that is there, one unit at least. */
export function failedWriteUnits(existing: number | undefined): number {
  return kilobytes(existing ?? 0);
}

/** Read units at least, for a read that finds nothing (DynamoDB Local reports 0 for an empty Query). */
export function leastReadUnits(consistent: boolean): number {
  return consistent ? 1 : 0.5;
}

/** One item a transaction names. */
export interface TransactTarget {
  kind: TransactKind;
  table: string;
  /** The item's primary key (a Put's taken from its item by the table's key attributes). */
  key: WireItem;
  /** A Put's item, as sent. */
  item?: WireItem;
}

/** The items a `TransactWriteItems` input names, in order. */
export function transactTargets(input: Record<string, unknown>, keyAttributes: (table: string) => string[]): TransactTarget[] {
  const items = (input.TransactItems ?? []) as Array<Record<string, { TableName: string; Item?: WireItem; Key?: WireItem } | undefined>>;
  return items.map((entry) => {
    const [kind, part] = Object.entries(entry).find(([, value]) => value !== undefined) as [
      TransactKind,
      { TableName: string; Item?: WireItem; Key?: WireItem },
    ];
    const key = part.Key ?? Object.fromEntries(keyAttributes(part.TableName).map((name) => [name, part.Item?.[name] as WireValue]));
    return { kind, table: part.TableName, key, ...(part.Item ? { item: part.Item } : {}) };
  });
}

/** Sends one DynamoDB JSON request straight to `endpoint` (unsigned: DynamoDB Local takes any credentials). */
async function dynamoDbCall(endpoint: string, operation: string, body: unknown): Promise<Record<string, unknown>> {
  const response = await fetch(endpoint, {
    method: 'POST',
    headers: {
      'content-type': 'application/x-amz-json-1.0',
      'x-amz-target': `DynamoDB_20120810.${operation}`,
      authorization: 'AWS4-HMAC-SHA256 Credential=local/20200101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0',
    },
    body: JSON.stringify(body),
  });
  const answer = (await response.json()) as Record<string, unknown>;
  if (!response.ok) throw new Error(`${operation} answered ${response.status}: ${JSON.stringify(answer)}`);
  return answer;
}

/** The items at `targets`' keys as they are now (`undefined`: none), read consistently and unmetered. */
async function readItems(endpoint: string, targets: ReadonlyArray<{ table: string; key: WireItem }>): Promise<Array<WireItem | undefined>> {
  const found = new Map<string, WireItem>();
  const id = (table: string, key: WireItem) =>
    `${table} ${JSON.stringify(Object.entries(key).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))}`;
  let pending: Record<string, { Keys: WireItem[]; ConsistentRead: true }> = {};
  for (const { table, key } of targets) {
    pending[table] ??= { Keys: [], ConsistentRead: true };
    if (!pending[table].Keys.some((known) => id(table, known) === id(table, key))) pending[table].Keys.push(key);
  }
  for (let round = 0; round < 10 && Object.keys(pending).length > 0; round++) {
    const answer = await dynamoDbCall(endpoint, 'BatchGetItem', { RequestItems: pending });
    const keyNames = (table: string) => Object.keys(targets.find((target) => target.table === table)?.key ?? {});
    for (const [table, items] of Object.entries((answer.Responses ?? {}) as Record<string, WireItem[]>)) {
      for (const item of items)
        found.set(id(table, Object.fromEntries(keyNames(table).map((name) => [name, item[name] as WireValue]))), item);
    }
    pending = (answer.UnprocessedKeys ?? {}) as typeof pending;
  }
  return targets.map(({ table, key }) => found.get(id(table, key)));
}

/** A secondary index as its writes are priced. */
export interface IndexShape {
  name: string;
  partitionKey: string;
  sortKey?: string;
  /** `ALL`, or the attributes it holds besides the table's and its own keys. */
  projected: 'ALL' | string[];
}

/** A table's key attributes and its indexes (global and local). */
export interface TableShape {
  keys: string[];
  indexes: IndexShape[];
}

interface DescribedIndex {
  IndexName?: string;
  KeySchema?: Array<{ AttributeName?: string; KeyType?: string }>;
  Projection?: { ProjectionType?: string; NonKeyAttributes?: string[] };
}

/** A table's shape from a DescribeTable answer's `Table`. */
export function tableShape(table: {
  KeySchema?: Array<{ AttributeName?: string; KeyType?: string }>;
  GlobalSecondaryIndexes?: DescribedIndex[];
  LocalSecondaryIndexes?: DescribedIndex[];
}): TableShape {
  const shapeOf = (index: DescribedIndex): IndexShape => {
    const sortKey = index.KeySchema?.find((key) => key.KeyType === 'RANGE')?.AttributeName;
    return {
      name: index.IndexName as string,
      partitionKey: index.KeySchema?.find((key) => key.KeyType === 'HASH')?.AttributeName as string,
      ...(sortKey ? { sortKey } : {}),
      projected:
        index.Projection?.ProjectionType === 'ALL'
          ? 'ALL'
          : index.Projection?.ProjectionType === 'INCLUDE'
            ? [...(index.Projection.NonKeyAttributes ?? [])]
            : [],
    };
  };
  return {
    keys: (table.KeySchema ?? []).map((key) => key.AttributeName as string),
    indexes: [...(table.GlobalSecondaryIndexes ?? []), ...(table.LocalSecondaryIndexes ?? [])].map(shapeOf),
  };
}

/** One index entry written (put or deleted) by a write to the table. */
export interface IndexWrite {
  index: string;
  /** The index entry's partition key value. */
  key: string;
  writeUnits: number;
}

/**
 * The index writes a table write made, from the item before and after it: a new entry is a
 * put of its projection (one unit per started KB), a removed one a delete, a moved index key
 * both, a changed projected attribute a put again; a write that changes nothing an index
 * holds costs that index nothing.
 */
export function indexWrites(shape: TableShape, before: WireItem | undefined, after: WireItem | undefined): IndexWrite[] {
  const writes: IndexWrite[] = [];
  for (const index of shape.indexes) {
    const indexed = (item: WireItem) =>
      item[index.partitionKey] !== undefined && (index.sortKey === undefined || item[index.sortKey] !== undefined);
    const projection = (item: WireItem): WireItem => {
      if (index.projected === 'ALL') return item;
      const names = new Set([...shape.keys, index.partitionKey, ...(index.sortKey ? [index.sortKey] : []), ...index.projected]);
      return Object.fromEntries(Object.entries(item).filter(([name]) => names.has(name)));
    };
    const old = before && indexed(before) ? projection(before) : undefined;
    const now = after && indexed(after) ? projection(after) : undefined;
    const keyOf = (item: WireItem) => JSON.stringify([item[index.partitionKey], index.sortKey ? item[index.sortKey] : null]);
    const write = (item: WireItem): IndexWrite => ({
      index: index.name,
      key: String((item[index.partitionKey] as { S?: string }).S ?? JSON.stringify(item[index.partitionKey])),
      writeUnits: kilobytes(itemSize(item)),
    });
    if (old && now && keyOf(old) === keyOf(now)) {
      if (JSON.stringify(sortedEntries(old)) !== JSON.stringify(sortedEntries(now))) writes.push(write(now));
      continue;
    }
    if (old) writes.push(write(old));
    if (now) writes.push(write(now));
  }
  return writes;
}

function sortedEntries(item: WireItem): Array<[string, unknown]> {
  return Object.entries(item).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

const shapes = new Map<string, Promise<TableShape>>();

/** `table`'s shape at `endpoint`, described once. */
function describeShape(endpoint: string, table: string): Promise<TableShape> {
  const id = `${endpoint} ${table}`;
  let shape = shapes.get(id);
  if (!shape) {
    shape = dynamoDbCall(endpoint, 'DescribeTable', { TableName: table }).then((answer) => tableShape((answer.Table ?? {}) as never));
    shape.catch(() => shapes.delete(id));
    shapes.set(id, shape);
  }
  return shape;
}

/** One item of a priced transaction: its table units, and the index writes it made (none when cancelled). */
export interface PricedTransactItem extends TransactTarget {
  writeUnits: number;
  indexWrites: IndexWrite[];
}

/**
 * Reads the items a `TransactWriteItems` names, before it is sent, and answers the function
 * that prices it once it has answered (whether it committed): it reads the items again after
 * a commit and prices every item by the rules above, a cancelled transaction's items as if
 * written, at their size before.
 */
export async function beforeTransaction(
  endpoint: string,
  input: Record<string, unknown>,
): Promise<(committed: boolean) => Promise<PricedTransactItem[]>> {
  const tables = [
    ...new Set(
      ((input.TransactItems ?? []) as Array<Record<string, { TableName: string } | undefined>>).flatMap((entry) =>
        Object.values(entry).map((part) => part?.TableName ?? ''),
      ),
    ),
  ].filter(Boolean);
  const shapeOf = new Map(await Promise.all(tables.map(async (table) => [table, await describeShape(endpoint, table)] as const)));
  const targets = transactTargets(input, (table) => shapeOf.get(table)?.keys ?? []);
  const before = await readItems(endpoint, targets);
  return async (committed) => {
    const after = committed ? await readItems(endpoint, targets) : before;
    return targets.map((target, position) => {
      const old = before[position];
      const now = after[position];
      const sizes = { ...(old ? { before: itemSize(old) } : {}), ...(now ? { after: itemSize(now) } : {}) };
      const shape = shapeOf.get(target.table) ?? { keys: [], indexes: [] };
      return { ...target, writeUnits: transactItemUnits(target.kind, sizes), indexWrites: committed ? indexWrites(shape, old, now) : [] };
    });
  };
}

/** The key a single-item write names (`Key`, or a Put's item's key attributes). */
async function writeTarget(endpoint: string, input: Record<string, unknown>): Promise<{ table: string; key: WireItem }> {
  const table = String(input.TableName);
  if (input.Key) return { table, key: input.Key as WireItem };
  const { keys } = await describeShape(endpoint, table);
  const item = (input.Item ?? {}) as WireItem;
  return { table, key: Object.fromEntries(keys.map((name) => [name, item[name] as WireValue])) };
}

/** Write units of a single-item write whose condition failed: the item there now (a failed write changed nothing). */
export async function priceFailedWrite(endpoint: string, input: Record<string, unknown>): Promise<number> {
  const [existing] = await readItems(endpoint, [await writeTarget(endpoint, input)]);
  return failedWriteUnits(existing ? itemSize(existing) : undefined);
}
