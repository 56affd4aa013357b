import { type _Record, DescribeStreamCommand, type GetRecordsCommand, GetShardIteratorCommand } from '@aws-sdk/client-dynamodb-streams';
import type { DynamoDBBatchResponse, DynamoDBStreamEvent } from 'aws-lambda';
import { describe, expect, it } from 'vitest';
import { StreamPoller, type StreamsClient, toLambdaRecord } from '../../functions/local/stream-poller.js';
import { LOG_ITEM_KIND } from '../../functions/store/table/item-kinds.js';

const ARN = 'arn:aws:dynamodb:ddblocal:000000000000:table/t/stream/2025-01-01T00:00:00.000';

interface FakeShard {
  id: string;
  parent?: string;
  records: _Record[];
  /** Closed: its last GetRecords returns no NextShardIterator once everything is read. */
  closed: boolean;
}

/**
 * A stream in memory, speaking the three Streams API calls the poller uses. Iterators are
 * `<shard>@<position>`; LATEST points past the records there now.
 */
class FakeStream implements StreamsClient {
  readonly shards: FakeShard[] = [];
  readonly calls: string[] = [];
  private seq = 0;

  add(id: string, parent?: string): FakeShard {
    const shard: FakeShard = { id, records: [], closed: false, ...(parent ? { parent } : {}) };
    this.shards.push(shard);
    return shard;
  }

  put(shardId: string, sessionKey: string, kind: string = LOG_ITEM_KIND.version): string {
    const shard = this.shards.find((candidate) => candidate.id === shardId) as FakeShard;
    const sequenceNumber = String(++this.seq).padStart(21, '0');
    shard.records.push({
      eventID: `e${this.seq}`,
      eventName: 'INSERT',
      eventVersion: '1.1',
      eventSource: 'aws:dynamodb',
      awsRegion: 'ddblocal',
      dynamodb: {
        ApproximateCreationDateTime: new Date('2025-06-01T10:00:00.000Z'),
        Keys: { pk: { S: sessionKey }, sk: { S: `V#${sequenceNumber}` } },
        NewImage: {
          pk: { S: sessionKey },
          sk: { S: `V#${sequenceNumber}` },
          kind: { S: kind },
          blob: { B: new TextEncoder().encode('hi') },
        },
        SequenceNumber: sequenceNumber,
        SizeBytes: 10,
        StreamViewType: 'NEW_AND_OLD_IMAGES',
      },
    });
    return sequenceNumber;
  }

  async send(command: DescribeStreamCommand | GetShardIteratorCommand | GetRecordsCommand): Promise<unknown> {
    if (command instanceof DescribeStreamCommand) {
      this.calls.push('describe');
      return {
        StreamDescription: {
          Shards: this.shards.map((shard) => ({
            ShardId: shard.id,
            ...(shard.parent ? { ParentShardId: shard.parent } : {}),
            SequenceNumberRange: {
              StartingSequenceNumber: '0',
              ...(shard.closed ? { EndingSequenceNumber: shard.records.at(-1)?.dynamodb?.SequenceNumber ?? '0' } : {}),
            },
          })),
        },
      };
    }
    if (command instanceof GetShardIteratorCommand) {
      const { ShardId, ShardIteratorType, SequenceNumber } = command.input;
      this.calls.push(`iterator ${ShardId} ${ShardIteratorType}`);
      const shard = this.shards.find((candidate) => candidate.id === ShardId) as FakeShard;
      const position =
        ShardIteratorType === 'LATEST'
          ? shard.records.length
          : ShardIteratorType === 'TRIM_HORIZON'
            ? 0
            : shard.records.findIndex((record) => record.dynamodb?.SequenceNumber === SequenceNumber) + 1;
      return { ShardIterator: `${ShardId}@${position}` };
    }
    const [shardId, at] = String(command.input.ShardIterator).split('@') as [string, string];
    const shard = this.shards.find((candidate) => candidate.id === shardId) as FakeShard;
    const position = Number(at);
    const records = shard.records.slice(position, position + (command.input.Limit ?? 1000));
    const next = position + records.length;
    this.calls.push(`records ${shardId} ${records.length}`);
    const finished = shard.closed && next >= shard.records.length;
    return { Records: records, ...(finished ? {} : { NextShardIterator: `${shardId}@${next}` }) };
  }
}

/** A handler that records what it is given and answers as told. */
function recordingHandler(
  // biome-ignore lint/suspicious/noConfusingVoidType: answers as a stream handler may, with nothing (StreamHandler).
  answer: (event: DynamoDBStreamEvent, call: number) => DynamoDBBatchResponse | void | Promise<DynamoDBBatchResponse | void> = () => {},
) {
  const batches: string[][] = [];
  const handler = async (event: DynamoDBStreamEvent) => {
    batches.push(event.Records.map((record) => record.dynamodb?.SequenceNumber as string));
    return answer(event, batches.length);
  };
  return { handler, batches, seen: () => batches.flat() };
}

const quiet = { warn: () => {}, error: () => {} };

describe('StreamPoller', () => {
  it('starts from LATEST: records already on the stream are not handed over', async () => {
    // Prepare
    const stream = new FakeStream();
    stream.add('shard-1');
    stream.put('shard-1', 'S#t#old');
    const { handler, seen } = recordingHandler();
    const poller = new StreamPoller({ client: stream, streamArn: ARN, handler, log: quiet });

    // Act
    await poller.start();
    await poller.stop();
    const fresh = stream.put('shard-1', 'S#t#new');
    await poller.pollOnce();

    // Assess
    expect(seen()).toEqual([fresh]);
  });

  it('reads a child shard from its start, and only after its parent is finished', async () => {
    // Prepare: shard-1 rolls over to shard-2 while records are still unread in shard-1.
    const stream = new FakeStream();
    const parent = stream.add('shard-1');
    const { handler, seen } = recordingHandler();
    const poller = new StreamPoller({ client: stream, streamArn: ARN, handler, batchSize: 2, describeEveryMs: 0, log: quiet });
    await poller.start();
    await poller.stop();
    const first = [stream.put('shard-1', 'S#t#s'), stream.put('shard-1', 'S#t#s'), stream.put('shard-1', 'S#t#s')];
    parent.closed = true;
    stream.add('shard-2', 'shard-1');
    const later = [stream.put('shard-2', 'S#t#s'), stream.put('shard-2', 'S#t#s')];

    // Act
    await poller.pollOnce(); // parent: 2 records; the child waits
    await poller.pollOnce(); // parent: the last record, and it ends
    await poller.pollOnce(); // the child, from its first record
    await poller.pollOnce();

    // Assess
    expect(seen()).toEqual([...first, ...later]);
    expect(stream.calls).toContain('iterator shard-2 TRIM_HORIZON');
    expect(poller.shardStates()).toEqual([
      { id: 'shard-1', parentId: undefined, done: true },
      { id: 'shard-2', parentId: 'shard-1', done: false },
    ]);
  });

  it('skips shards that were already closed when it started', async () => {
    const stream = new FakeStream();
    const old = stream.add('shard-0');
    stream.put('shard-0', 'S#t#s');
    old.closed = true;
    stream.add('shard-1', 'shard-0');
    const { handler, seen } = recordingHandler();
    const poller = new StreamPoller({ client: stream, streamArn: ARN, handler, log: quiet });

    await poller.start();
    await poller.stop();
    const fresh = stream.put('shard-1', 'S#t#s');
    await poller.pollOnce();

    expect(seen()).toEqual([fresh]);
    expect(stream.calls.filter((call) => call.startsWith('iterator'))).toEqual(['iterator shard-1 LATEST']);
  });

  it('hands over only what matches the filters, in Lambda’s record shape', async () => {
    // Prepare
    const stream = new FakeStream();
    stream.add('shard-1');
    let event: DynamoDBStreamEvent | undefined;
    const poller = new StreamPoller({
      client: stream,
      streamArn: ARN,
      handler: async (given) => {
        event = given;
      },
      filters: [{ dynamodb: { NewImage: { kind: { S: [LOG_ITEM_KIND.version] } } } }],
      log: quiet,
    });
    await poller.start();
    await poller.stop();
    stream.put('shard-1', 'S#t#s', LOG_ITEM_KIND.head);
    const version = stream.put('shard-1', 'S#t#s', LOG_ITEM_KIND.version);

    // Act
    await poller.pollOnce();

    // Assess
    expect(event?.Records).toHaveLength(1);
    expect(event?.Records[0]).toMatchObject({
      eventName: 'INSERT',
      eventSourceARN: ARN,
      dynamodb: {
        ApproximateCreationDateTime: Date.parse('2025-06-01T10:00:00.000Z') / 1000,
        SequenceNumber: version,
        NewImage: { kind: { S: LOG_ITEM_KIND.version }, blob: { B: 'aGk=' } },
      },
    });
  });

  it('retries a batch from its first reported failure, as Lambda does', async () => {
    // Prepare
    const stream = new FakeStream();
    stream.add('shard-1');
    const { handler, batches } = recordingHandler((event, call) =>
      call === 1 ? { batchItemFailures: [{ itemIdentifier: event.Records[1]?.dynamodb?.SequenceNumber as string }] } : undefined,
    );
    const sequence = [stream.put('shard-1', 'S#t#a'), stream.put('shard-1', 'S#t#b'), stream.put('shard-1', 'S#t#c')];
    const poller = new StreamPoller({ client: stream, streamArn: ARN, handler, log: quiet, startingPosition: 'TRIM_HORIZON' });

    // Act
    await poller.start();
    await waitUntil(() => batches.length >= 2);
    await poller.stop();

    // Assess
    expect(batches.slice(0, 2)).toEqual([sequence, sequence.slice(1)]);
  });

  it('gives up on a batch after its retries and moves on, logging what it skipped', async () => {
    // Prepare
    const stream = new FakeStream();
    stream.add('shard-1');
    const errors: unknown[][] = [];
    const { handler, batches } = recordingHandler((event) => {
      if (event.Records.some((record) => record.dynamodb?.Keys?.pk?.S === 'S#t#poison')) throw new Error('cannot read it');
    });
    stream.put('shard-1', 'S#t#poison');
    const poller = new StreamPoller({
      client: stream,
      streamArn: ARN,
      handler,
      retryAttempts: 1,
      startingPosition: 'TRIM_HORIZON',
      log: { warn: () => {}, error: (...args: unknown[]) => errors.push(args) },
    });

    // Act
    await poller.start();
    await waitUntil(() => batches.length >= 2);
    const after = stream.put('shard-1', 'S#t#fine');
    await waitUntil(() => batches.flat().includes(after));
    await poller.stop();

    // Assess
    expect(batches.length).toBe(3);
    expect(String(errors.at(-1)?.[0])).toContain('failed 2 times and are skipped');
  });

  it('polls seldom once the stream is quiet, and at once again when nudged', async () => {
    // Prepare: a quiet stream is polled every minute, a busy one every 10 ms.
    const stream = new FakeStream();
    stream.add('shard-1');
    const { handler, seen } = recordingHandler();
    const poller = new StreamPoller({
      client: stream,
      streamArn: ARN,
      handler,
      intervalMs: 10,
      idleIntervalMs: 60_000,
      quietAfterMs: 0,
      log: quiet,
    });
    await poller.start();
    await new Promise((resolve) => setTimeout(resolve, 300));
    const quietPolls = stream.calls.filter((call) => call.startsWith('records')).length;

    // Act: a write, announced.
    const written = stream.put('shard-1', 'S#t#s');
    poller.nudge();
    for (let waited = 0; seen().length === 0 && waited < 10_000; waited += 10) await new Promise((resolve) => setTimeout(resolve, 10));
    await poller.stop();

    // Assess: one poll in 300 quiet ms (not 30), and the write handed over without waiting out the minute.
    expect(quietPolls).toBeLessThanOrEqual(1);
    expect(seen()).toEqual([written]);
  });

  it('hands over the last records when stopped with drain', async () => {
    const stream = new FakeStream();
    stream.add('shard-1');
    const { handler, seen } = recordingHandler();
    const poller = new StreamPoller({ client: stream, streamArn: ARN, handler, intervalMs: 60_000, log: quiet });
    await poller.start();
    const last = stream.put('shard-1', 'S#t#s');

    await poller.stop({ drain: true });

    expect(seen()).toEqual([last]);
  });
});

describe('toLambdaRecord', () => {
  it('turns dates into epoch seconds and binaries into base64, and names the stream', () => {
    const record = toLambdaRecord(
      {
        eventName: 'MODIFY',
        dynamodb: {
          ApproximateCreationDateTime: new Date(1_700_000_000_000),
          OldImage: { list: { L: [{ B: new Uint8Array([1, 2]) }, { M: { set: { BS: [new Uint8Array([3])] } } }] } },
          SequenceNumber: '7',
        },
      },
      ARN,
    );

    expect(record).toEqual({
      eventName: 'MODIFY',
      eventSourceARN: ARN,
      dynamodb: {
        ApproximateCreationDateTime: 1_700_000_000,
        OldImage: { list: { L: [{ B: 'AQI=' }, { M: { set: { BS: ['Aw=='] } } }] } },
        SequenceNumber: '7',
      },
    });
  });
});

async function waitUntil(check: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
