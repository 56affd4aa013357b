import {
  DescribeStreamCommand,
  GetRecordsCommand,
  GetShardIteratorCommand,
  type Shard,
  type ShardIteratorType,
  type AttributeValue as StreamsAttributeValue,
  type _Record as StreamsRecord,
} from '@aws-sdk/client-dynamodb-streams';
import type { AttributeValue, DynamoDBBatchResponse, DynamoDBRecord, DynamoDBStreamEvent } from 'aws-lambda';
import { matchesStreamFilter } from '../store/events/stream-images.js';

/**
 * What Lambda's event source mapping does for a DynamoDB stream, for the local server: it
 * reads DynamoDB Local's stream and calls the change hook with the very event shape Lambda
 * sends, filtered by the same patterns, one batch at a time per shard, with partial batch
 * failures honoured:
 *
 * - shards are found with DescribeStream; a shard that ends (its NextShardIterator is null)
 *   is done, and its children, found on the next DescribeStream, are read from their start
 *   only once their parent is done, so a session's records stay in order across a rollover;
 * - at start every open shard is read from LATEST: changes made while no server ran produce
 *   no events (documented in docs/api.md). Shards found later are read from TRIM_HORIZON;
 * - a batch whose handler throws, or reports failures, is retried from the first failed
 *   record (`retryAttempts` times, with backoff); then it is logged and skipped, which is what
 *   the SQS on-failure destination does for a deployed stack.
 */

/** The part of `DynamoDBStreamsClient` the poller uses. */
export interface StreamsClient {
  send(command: DescribeStreamCommand | GetShardIteratorCommand | GetRecordsCommand): Promise<unknown>;
}

// biome-ignore lint/suspicious/noConfusingVoidType: a Lambda stream handler may answer nothing (no partial batch failures).
export type StreamHandler = (event: DynamoDBStreamEvent) => Promise<DynamoDBBatchResponse | void>;

export interface StreamPollerOptions {
  client: StreamsClient;
  streamArn: string;
  handler: StreamHandler;
  /** Event filter patterns; a record matching none never reaches the handler. @default all records */
  filters?: readonly unknown[];
  /** @default 'LATEST' */
  startingPosition?: 'LATEST' | 'TRIM_HORIZON';
  /** Pause between polls of a shard that had nothing new. @default 200 */
  intervalMs?: number;
  /**
   * Pause between polls once the stream has been quiet (nothing read, no `nudge`) for
   * `quietAfterMs`. A nudge ends such a pause at once. @default intervalMs (no idle pace)
   */
  idleIntervalMs?: number;
  /** How long after the last record read or nudge the poller keeps its `intervalMs` pace. @default 2_000 */
  quietAfterMs?: number;
  /** Records per GetRecords and per handler call. @default 100 */
  batchSize?: number;
  /** Retries of a failing batch before it is logged and skipped. @default 3 */
  retryAttempts?: number;
  /** How often to look for new shards even when none ended. @default 10_000 */
  describeEveryMs?: number;
  log?: Pick<Console, 'warn' | 'error'>;
}

interface TrackedShard {
  id: string;
  parentId: string | undefined;
  /** Where reading (re)starts when there is no iterator. */
  start: { type: 'LATEST' | 'TRIM_HORIZON' } | { type: 'AFTER_SEQUENCE_NUMBER'; sequenceNumber: string };
  iterator: string | undefined;
  done: boolean;
}

export class StreamPoller {
  private readonly shards = new Map<string, TrackedShard>();
  private readonly intervalMs: number;
  private readonly idleIntervalMs: number;
  private readonly quietAfterMs: number;
  /** When a record was last read or a write last announced (`nudge`). */
  private lastStir = Date.now();
  /** True while the poller sleeps its idle pause, which a nudge ends. */
  private idle = false;
  private readonly batchSize: number;
  private readonly retryAttempts: number;
  private readonly describeEveryMs: number;
  private readonly log: Pick<Console, 'warn' | 'error'>;
  private lastDescribe = 0;
  private describeSoon = false;
  private stopped = false;
  private wake: (() => void) | undefined;
  private loop: Promise<void> | undefined;

  constructor(private readonly options: StreamPollerOptions) {
    this.intervalMs = options.intervalMs ?? 200;
    this.idleIntervalMs = options.idleIntervalMs ?? this.intervalMs;
    this.quietAfterMs = options.quietAfterMs ?? 2_000;
    this.batchSize = options.batchSize ?? 100;
    this.retryAttempts = options.retryAttempts ?? 3;
    this.describeEveryMs = options.describeEveryMs ?? 10_000;
    this.log = options.log ?? console;
  }

  /** Positions every open shard (LATEST by default) and starts polling; resolves once positioned. */
  async start(): Promise<void> {
    await this.discover(true);
    // Position now, not at the first poll: a write right after start must produce its event.
    await Promise.all(this.active().map((shard) => this.position(shard)));
    this.loop = this.run();
  }

  /**
   * Stops polling once the batch in hand (if any) is done. With `drain`, one last round then
   * hands over what is already on the stream (without retries), so the last writes before a
   * shutdown still produce their events.
   */
  async stop(options: { drain?: boolean } = {}): Promise<void> {
    this.stopped = true;
    this.wake?.();
    await this.loop;
    if (!options.drain || this.loop === undefined) return;
    // Records become readable some 20–50 ms after their write.
    await new Promise((resolve) => setTimeout(resolve, 100));
    try {
      await this.pollOnce();
    } catch (error) {
      this.log.warn('agentstate: could not read the last stream records before stopping', error);
    }
  }

  /**
   * After DynamoDB Local came back on the same data: its shard iterators died with the old
   * process, so every shard is positioned again where it stopped (after its last delivered
   * record), and the stream is described again.
   */
  reposition(): void {
    for (const shard of this.shards.values()) shard.iterator = undefined;
    this.describeSoon = true;
  }

  /**
   * Something was just written to the table (the server answered a request): poll at the
   * usual pace again, at once if the poller was idle. Cheap enough to call on every request.
   */
  nudge(): void {
    this.lastStir = Date.now();
    if (this.idle) this.wake?.();
  }

  /** The shards being read, for tests and diagnostics. */
  shardStates(): Array<{ id: string; parentId: string | undefined; done: boolean }> {
    return [...this.shards.values()].map(({ id, parentId, done }) => ({ id, parentId, done }));
  }

  /** One round: new shards if due, then one GetRecords (and handler call) per active shard. */
  async pollOnce(): Promise<{ records: number; full: boolean }> {
    if (this.describeSoon || Date.now() - this.lastDescribe >= this.describeEveryMs) await this.discover(false);
    const results = await Promise.all(this.active().map((shard) => this.pollShard(shard)));
    return { records: results.reduce((sum, count) => sum + count, 0), full: results.some((count) => count >= this.batchSize) };
  }

  private async run(): Promise<void> {
    let failures = 0;
    while (!this.stopped) {
      let full = false;
      try {
        const round = await this.pollOnce();
        full = round.full;
        if (round.records > 0) this.lastStir = Date.now();
        failures = 0;
      } catch (error) {
        // Said once per outage (DynamoDB Local down, restarting), then retried more slowly.
        if (failures++ === 0) this.log.warn('agentstate: reading the table stream failed; retrying', error);
      }
      // A full batch means more is waiting: go again at once, as Lambda does.
      if (full) continue;
      if (failures > 0) await this.sleep(Math.min(this.intervalMs * 2 ** failures, 2_000));
      else if (Date.now() - this.lastStir < this.quietAfterMs) await this.sleep(this.intervalMs);
      else {
        // Quiet: every poll of an idle stream costs both processes CPU, so poll seldom until
        // a write announces itself (nudge) or the idle pause ends.
        this.idle = true;
        await this.sleep(this.idleIntervalMs);
        this.idle = false;
      }
    }
  }

  private active(): TrackedShard[] {
    return [...this.shards.values()].filter((shard) => {
      if (shard.done) return false;
      const parent = shard.parentId === undefined ? undefined : this.shards.get(shard.parentId);
      // A child waits for its parent: a partition's older records are in the parent.
      return parent === undefined || parent.done;
    });
  }

  private async discover(initial: boolean): Promise<void> {
    const found: Shard[] = [];
    let startAfter: string | undefined;
    do {
      const output = (await this.options.client.send(
        new DescribeStreamCommand({ StreamArn: this.options.streamArn, ...(startAfter ? { ExclusiveStartShardId: startAfter } : {}) }),
      )) as { StreamDescription?: { Shards?: Shard[]; LastEvaluatedShardId?: string } };
      found.push(...(output.StreamDescription?.Shards ?? []));
      startAfter = output.StreamDescription?.LastEvaluatedShardId;
    } while (startAfter);
    this.lastDescribe = Date.now();
    this.describeSoon = false;

    for (const shard of found) {
      if (!shard.ShardId || this.shards.has(shard.ShardId)) continue;
      const closed = shard.SequenceNumberRange?.EndingSequenceNumber !== undefined;
      this.shards.set(shard.ShardId, {
        id: shard.ShardId,
        parentId: shard.ParentShardId,
        // At start, what is already closed is history; what is open is read from the
        // starting position. Anything that appears later is new, so all of it is read.
        start: { type: initial ? (this.options.startingPosition ?? 'LATEST') : 'TRIM_HORIZON' },
        iterator: undefined,
        done: initial && closed && (this.options.startingPosition ?? 'LATEST') === 'LATEST',
      });
    }
  }

  private async position(shard: TrackedShard): Promise<void> {
    const output = (await this.options.client.send(
      new GetShardIteratorCommand({
        StreamArn: this.options.streamArn,
        ShardId: shard.id,
        ShardIteratorType: shard.start.type as ShardIteratorType,
        ...(shard.start.type === 'AFTER_SEQUENCE_NUMBER' ? { SequenceNumber: shard.start.sequenceNumber } : {}),
      }),
    )) as { ShardIterator?: string };
    shard.iterator = output.ShardIterator;
    if (!shard.iterator) this.finish(shard);
  }

  /** Reads one batch of a shard and hands it over; returns how many records it read. */
  private async pollShard(shard: TrackedShard): Promise<number> {
    if (!shard.iterator) await this.position(shard);
    if (!shard.iterator || shard.done) return 0;
    let output: { Records?: StreamsRecord[]; NextShardIterator?: string };
    try {
      output = (await this.options.client.send(
        new GetRecordsCommand({ ShardIterator: shard.iterator, Limit: this.batchSize }),
      )) as typeof output;
    } catch (error) {
      const name = (error as Error).name;
      if (name === 'ExpiredIteratorException') {
        shard.iterator = undefined; // re-positioned from its last record on the next poll
        return 0;
      }
      if (name === 'TrimmedDataAccessException') {
        this.log.warn(`agentstate: stream records of shard ${shard.id} expired before they were read`);
        shard.start = { type: 'TRIM_HORIZON' };
        shard.iterator = undefined;
        return 0;
      }
      if (name === 'ResourceNotFoundException') {
        this.finish(shard);
        return 0;
      }
      throw error;
    }
    const records = output.Records ?? [];
    if (records.length > 0) {
      await this.deliver(records);
      const last = records[records.length - 1]?.dynamodb?.SequenceNumber;
      if (last) shard.start = { type: 'AFTER_SEQUENCE_NUMBER', sequenceNumber: last };
    }
    shard.iterator = output.NextShardIterator;
    if (!shard.iterator) this.finish(shard);
    return records.length;
  }

  private finish(shard: TrackedShard): void {
    shard.done = true;
    // Its children (if it rolled over) are on the next DescribeStream.
    this.describeSoon = true;
  }

  /** Filters, then calls the handler, retrying from the first failed record as Lambda does. */
  private async deliver(records: StreamsRecord[]): Promise<void> {
    const filters = this.options.filters;
    let batch = records
      .map((record) => toLambdaRecord(record, this.options.streamArn))
      .filter((record) => !filters || filters.some((pattern) => matchesStreamFilter(pattern, record)));
    for (let attempt = 0; batch.length > 0; attempt++) {
      let failedAt: number;
      try {
        const response = await this.options.handler({ Records: batch });
        const failures = response?.batchItemFailures ?? [];
        if (failures.length === 0) return;
        const positions = failures.map((failure) =>
          batch.findIndex((record) => record.dynamodb?.SequenceNumber === failure.itemIdentifier),
        );
        // An identifier that names no record of the batch fails the whole batch (Lambda's rule).
        failedAt = positions.some((position) => position < 0) ? 0 : Math.min(...positions);
      } catch (error) {
        this.log.error('agentstate: the change hook failed on a batch', error);
        failedAt = 0;
      }
      batch = batch.slice(failedAt);
      if (attempt >= this.retryAttempts || this.stopped) {
        this.log.error(
          `agentstate: ${batch.length} stream record(s) failed ${attempt + 1} times and are skipped (in AWS they go to the on-failure queue):`,
          JSON.stringify(batch.map((record) => ({ sequenceNumber: record.dynamodb?.SequenceNumber, keys: record.dynamodb?.Keys }))),
        );
        return;
      }
      await this.sleep(Math.min(2_000, 250 * 2 ** attempt));
    }
  }

  private sleep(ms: number): Promise<void> {
    if (this.stopped) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.wake = done;
    });
  }
}

/** A record as the SDK reads it → as Lambda delivers it (epoch seconds, base64 binaries, the stream ARN). */
export function toLambdaRecord(record: StreamsRecord, streamArn: string): DynamoDBRecord {
  const data = record.dynamodb;
  const created = data?.ApproximateCreationDateTime;
  return {
    eventID: record.eventID,
    eventName: record.eventName as DynamoDBRecord['eventName'],
    eventVersion: record.eventVersion,
    eventSource: record.eventSource,
    awsRegion: record.awsRegion,
    eventSourceARN: streamArn,
    ...(record.userIdentity ? { userIdentity: record.userIdentity } : {}),
    dynamodb: {
      ...(created ? { ApproximateCreationDateTime: Math.floor(new Date(created).getTime() / 1000) } : {}),
      ...(data?.Keys ? { Keys: toLambdaImage(data.Keys) } : {}),
      ...(data?.NewImage ? { NewImage: toLambdaImage(data.NewImage) } : {}),
      ...(data?.OldImage ? { OldImage: toLambdaImage(data.OldImage) } : {}),
      ...(data?.SequenceNumber ? { SequenceNumber: data.SequenceNumber } : {}),
      ...(data?.SizeBytes !== undefined ? { SizeBytes: data.SizeBytes } : {}),
      ...(data?.StreamViewType ? { StreamViewType: data.StreamViewType as NonNullable<DynamoDBRecord['dynamodb']>['StreamViewType'] } : {}),
    },
  };
}

function toLambdaImage(image: Record<string, StreamsAttributeValue>): Record<string, AttributeValue> {
  return Object.fromEntries(Object.entries(image).map(([name, value]) => [name, toLambdaValue(value)]));
}

function toLambdaValue(value: StreamsAttributeValue): AttributeValue {
  if (value.B !== undefined) return { B: Buffer.from(value.B).toString('base64') };
  if (value.BS !== undefined) return { BS: value.BS.map((item) => Buffer.from(item).toString('base64')) };
  if (value.M !== undefined) return { M: toLambdaImage(value.M) };
  if (value.L !== undefined) return { L: value.L.map(toLambdaValue) };
  return value as AttributeValue;
}
