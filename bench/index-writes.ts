/**
 * The index writes a table's writes caused, priced per index partition key from the table's
 * stream (NEW_AND_OLD_IMAGES): no DynamoDB answer says which index key a write moved, but the
 * two images do. DynamoDB's rules: a write that adds an item to an index puts its projection
 * (one unit per started KB), one that removes it deletes it, one that changes the index key
 * does both, and one that changes only projected attributes puts it again; a write that
 * changes nothing the index holds costs the index nothing.
 */
import { DescribeTableCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import {
  type _Record,
  DescribeStreamCommand,
  DynamoDBStreamsClient,
  GetRecordsCommand,
  GetShardIteratorCommand,
} from '@aws-sdk/client-dynamodb-streams';
import { itemSize, type KeyCharge, kilobytes, type WireItem } from './dynamodb-recorder.js';

interface IndexShape {
  name: string;
  partitionKey: string;
  sortKey?: string;
  /** `ALL`, or the attributes it holds besides the table's and its own keys. */
  projected: 'ALL' | string[];
}

/** Reads a table's stream from where it was at `open()`, and prices what came since. */
export class IndexWriteTap {
  private readonly streams: DynamoDBStreamsClient;
  private readonly iterators = new Map<string, string | undefined>();
  private streamArn = '';
  private indexes: IndexShape[] = [];
  private tableKeys: string[] = [];

  constructor(
    private readonly client: DynamoDBClient,
    private readonly tableName: string,
    endpoint: string,
  ) {
    this.streams = new DynamoDBStreamsClient({
      endpoint,
      region: 'us-east-1',
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    });
  }

  /** Learns the indexes and skips every record written so far. */
  async open(): Promise<void> {
    const { Table } = await this.client.send(new DescribeTableCommand({ TableName: this.tableName }));
    this.streamArn = Table?.LatestStreamArn ?? '';
    if (!this.streamArn) throw new Error(`table ${this.tableName} has no stream to price index writes from`);
    this.tableKeys = (Table?.KeySchema ?? []).map((key) => key.AttributeName as string);
    this.indexes = (Table?.GlobalSecondaryIndexes ?? []).map((index) => ({
      name: index.IndexName as string,
      partitionKey: index.KeySchema?.find((key) => key.KeyType === 'HASH')?.AttributeName as string,
      ...(index.KeySchema?.find((key) => key.KeyType === 'RANGE')
        ? { sortKey: index.KeySchema?.find((key) => key.KeyType === 'RANGE')?.AttributeName as string }
        : {}),
      projected:
        index.Projection?.ProjectionType === 'ALL'
          ? 'ALL'
          : index.Projection?.ProjectionType === 'INCLUDE'
            ? [...(index.Projection.NonKeyAttributes ?? [])]
            : [],
    }));
    await this.records();
  }

  /** Every index write since the last call (or `open()`), one charge per index key written. */
  async take(): Promise<KeyCharge[]> {
    return (await this.records()).flatMap((record) => this.price(record));
  }

  close(): void {
    this.streams.destroy();
  }

  private async records(): Promise<_Record[]> {
    const { StreamDescription } = await this.streams.send(new DescribeStreamCommand({ StreamArn: this.streamArn }));
    for (const shard of StreamDescription?.Shards ?? []) {
      const id = shard.ShardId as string;
      if (this.iterators.has(id)) continue;
      const { ShardIterator } = await this.streams.send(
        new GetShardIteratorCommand({ StreamArn: this.streamArn, ShardId: id, ShardIteratorType: 'TRIM_HORIZON' }),
      );
      this.iterators.set(id, ShardIterator);
    }
    const records: _Record[] = [];
    for (const [id, start] of this.iterators) {
      let iterator = start;
      while (iterator) {
        const { Records, NextShardIterator } = await this.streams.send(new GetRecordsCommand({ ShardIterator: iterator, Limit: 1000 }));
        records.push(...(Records ?? []));
        // An open shard answers an empty page at its end, with an iterator to read on from later.
        if (!Records?.length) {
          iterator = NextShardIterator;
          break;
        }
        iterator = NextShardIterator;
      }
      this.iterators.set(id, iterator);
    }
    return records;
  }

  private price(record: _Record): KeyCharge[] {
    const before = record.dynamodb?.OldImage as WireItem | undefined;
    const after = record.dynamodb?.NewImage as WireItem | undefined;
    const charges: KeyCharge[] = [];
    for (const index of this.indexes) {
      const old = before && this.indexed(index, before) ? this.projection(index, before) : undefined;
      const now = after && this.indexed(index, after) ? this.projection(index, after) : undefined;
      const keyOf = (item: WireItem) => JSON.stringify([item[index.partitionKey], index.sortKey ? item[index.sortKey] : null]);
      const charge = (item: WireItem): KeyCharge => ({
        key: String((item[index.partitionKey] as { S?: string }).S ?? JSON.stringify(item[index.partitionKey])),
        where: index.name,
        operation: 'index write',
        readUnits: 0,
        writeUnits: kilobytes(itemSize(item)),
      });
      if (old && now && keyOf(old) === keyOf(now)) {
        if (JSON.stringify(sorted(old)) !== JSON.stringify(sorted(now))) charges.push(charge(now));
        continue;
      }
      if (old) charges.push(charge(old));
      if (now) charges.push(charge(now));
    }
    return charges;
  }

  private indexed(index: IndexShape, item: WireItem): boolean {
    return item[index.partitionKey] !== undefined && (index.sortKey === undefined || item[index.sortKey] !== undefined);
  }

  /** What the index holds of `item`: the table's keys, its own, and what it projects. */
  private projection(index: IndexShape, item: WireItem): WireItem {
    if (index.projected === 'ALL') return item;
    const names = new Set([...this.tableKeys, index.partitionKey, ...(index.sortKey ? [index.sortKey] : []), ...index.projected]);
    return Object.fromEntries(Object.entries(item).filter(([name]) => names.has(name)));
  }
}

function sorted(item: WireItem): Array<[string, unknown]> {
  return Object.entries(item).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}
