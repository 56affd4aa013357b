/**
 * The index writes a table's writes caused, priced per index partition key from the table's
 * stream (NEW_AND_OLD_IMAGES): no DynamoDB answer says which index key a write moved, but the
 * two images do. DynamoDB's rules: a write that adds an item to an index puts its projection
 * (one unit per started KB), one that removes it deletes it, one that changes the index key
 * does both, and one that changes only projected attributes puts it again; a write that
 * changes nothing the index holds costs the index nothing (capacity-rules.ts, `indexWrites`).
 */
import { DescribeTableCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import {
  type _Record,
  DescribeStreamCommand,
  DynamoDBStreamsClient,
  GetRecordsCommand,
  GetShardIteratorCommand,
} from '@aws-sdk/client-dynamodb-streams';
import { indexWrites, type TableShape, tableShape, type WireItem } from './capacity-rules.js';
import type { KeyCharge } from './dynamodb-recorder.js';

/** Reads a table's stream from where it was at `open()`, and prices what came since. */
export class IndexWriteTap {
  private readonly streams: DynamoDBStreamsClient;
  private readonly iterators = new Map<string, string | undefined>();
  private streamArn = '';
  private shape: TableShape = { keys: [], indexes: [] };

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
    // Local indexes too: AWS bills their writes alike (in the table partition's own throughput).
    this.shape = tableShape(Table ?? {});
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

  /** The index writes a stream record shows (capacity-rules.ts prices them). */
  private price(record: _Record): KeyCharge[] {
    const before = record.dynamodb?.OldImage as WireItem | undefined;
    const after = record.dynamodb?.NewImage as WireItem | undefined;
    return indexWrites(this.shape, before, after).map((write) => ({
      key: write.key,
      where: write.index,
      operation: 'index write',
      readUnits: 0,
      writeUnits: write.writeUnits,
    }));
  }
}
