import { DescribeTableCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import {
  DescribeStreamCommand,
  DynamoDBStreamsClient,
  GetRecordsCommand,
  GetShardIteratorCommand,
  type _Record as StreamRecord,
} from '@aws-sdk/client-dynamodb-streams';
import type { DeployedFunction, Deployment } from './deployment.js';
import type { Invocation, LambdaService } from './lambda.js';

/** One event source mapping of the template: its function, filter and batching. */
interface Mapping {
  fn: DeployedFunction;
  filters: unknown[];
  batchSize: number;
  reportsFailures: boolean;
}

/**
 * The event source mappings of the template on DynamoDB Local's stream: what Lambda does
 * between the table and its consumers (the change hook and the webhook hook, each reading the
 * stream on its own). It reads the stream's records, drops those no filter pattern of a
 * mapping matches (FilterCriteria, the event pattern syntax), and invokes the mapping's
 * function with the DynamoDB Streams event as the Lambda developer guide shows it (`Records[]`
 * of `eventID`, `eventName`, `eventVersion`, `eventSource: "aws:dynamodb"`, `awsRegion`,
 * `dynamodb` with `ApproximateCreationDateTime` in epoch seconds, `Keys`, `NewImage`,
 * `OldImage`, `SequenceNumber`, `SizeBytes`, `StreamViewType`, and `eventSourceARN`).
 */
export class StreamEventSource {
  private readonly streams: DynamoDBStreamsClient;
  private readonly mappings: Mapping[];
  private iterators = new Map<string, string>();
  private streamArn = '';

  constructor(
    private readonly deployment: Deployment,
    private readonly lambda: LambdaService,
    private readonly dynamoDb: DynamoDBClient,
    endpoint: string,
  ) {
    // The stream's mappings (those of a queue are queue-source.ts's).
    const streamMappings = deployment
      .ofType('AWS::Lambda::EventSourceMapping')
      .filter(([, mapping]) => !String(deployment.resolve(mapping.Properties.EventSourceArn)).startsWith('arn:aws:sqs:'));
    this.mappings = streamMappings.map(([, mapping]) => {
      const properties = (mapping as { Properties: Record<string, any> }).Properties;
      const functionId = properties.FunctionName.Ref as string;
      return {
        fn: deployment.functions().find((candidate) => candidate.logicalId === functionId) as DeployedFunction,
        filters: (properties.FilterCriteria?.Filters ?? []).map((filter: { Pattern: string }) => JSON.parse(filter.Pattern)),
        batchSize: Number(properties.BatchSize ?? 100),
        reportsFailures: (properties.FunctionResponseTypes ?? []).includes('ReportBatchItemFailures'),
      };
    });
    if (this.mappings.length === 0) throw new Error('the template has no event source mapping');
    this.streams = new DynamoDBStreamsClient({
      endpoint,
      region: deployment.region,
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    });
  }

  /** Positions at the stream's current end: what is written from now on is delivered. */
  async start(): Promise<void> {
    const table = await this.dynamoDb.send(new DescribeTableCommand({ TableName: this.deployment.tableName }));
    this.streamArn = table.Table?.LatestStreamArn as string;
    const { StreamDescription } = await this.streams.send(new DescribeStreamCommand({ StreamArn: this.streamArn }));
    for (const shard of StreamDescription?.Shards ?? []) {
      const { ShardIterator } = await this.streams.send(
        new GetShardIteratorCommand({ StreamArn: this.streamArn, ShardId: shard.ShardId, ShardIteratorType: 'LATEST' }),
      );
      if (ShardIterator) this.iterators.set(shard.ShardId as string, ShardIterator);
    }
  }

  /** Every record written since the last call (waiting for the stream to catch up), unfiltered. */
  async read(expectAtLeast = 1, timeoutMs = 5_000): Promise<StreamRecord[]> {
    const records: StreamRecord[] = [];
    const until = Date.now() + timeoutMs;
    do {
      for (const [shardId, iterator] of this.iterators) {
        const output = await this.streams.send(new GetRecordsCommand({ ShardIterator: iterator, Limit: 1000 }));
        records.push(...(output.Records ?? []));
        if (output.NextShardIterator) this.iterators.set(shardId, output.NextShardIterator);
      }
      if (records.length >= expectAtLeast) break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    } while (Date.now() < until);
    return records;
  }

  /** The records some mapping's filter lets through, in the event shape Lambda invokes with. */
  eventRecords(records: StreamRecord[]): Array<Record<string, any>> {
    return records.map((record) => this.lambdaRecord(record)).filter((record) => this.mappings.some((mapping) => passes(mapping, record)));
  }

  /**
   * Delivers records as the mappings do: to each mapping's function, the records its filter
   * lets through, in batches of its size (mappings in template order, the change hook first).
   * Returns each invocation with its function and the records it carried. With
   * ReportBatchItemFailures, a batch that reports failures is not redelivered here: the test
   * looks at the answer.
   */
  async deliver(
    records: Array<Record<string, any>>,
  ): Promise<Array<{ fn: DeployedFunction; invocation: Invocation; records: Array<Record<string, any>> }>> {
    const deliveries: Array<{ fn: DeployedFunction; invocation: Invocation; records: Array<Record<string, any>> }> = [];
    for (const mapping of this.mappings) {
      const passed = records.filter((record) => passes(mapping, record));
      for (let offset = 0; offset < passed.length; offset += mapping.batchSize) {
        const batch = passed.slice(offset, offset + mapping.batchSize);
        const invocation = await this.lambda.invoke(mapping.fn, { Records: batch });
        if (!mapping.reportsFailures && invocation.result?.batchItemFailures)
          throw new Error('the mapping does not report batch item failures');
        deliveries.push({ fn: mapping.fn, invocation, records: batch });
      }
    }
    return deliveries;
  }

  private lambdaRecord(record: StreamRecord): Record<string, any> {
    const { dynamodb } = record;
    return {
      eventID: record.eventID,
      eventName: record.eventName,
      eventVersion: record.eventVersion ?? '1.1',
      eventSource: 'aws:dynamodb',
      awsRegion: this.deployment.region,
      dynamodb: {
        ApproximateCreationDateTime: Math.floor(new Date(dynamodb?.ApproximateCreationDateTime ?? Date.now()).getTime() / 1000),
        Keys: dynamodb?.Keys,
        ...(dynamodb?.NewImage ? { NewImage: lambdaImage(dynamodb.NewImage) } : {}),
        ...(dynamodb?.OldImage ? { OldImage: lambdaImage(dynamodb.OldImage) } : {}),
        SequenceNumber: dynamodb?.SequenceNumber,
        SizeBytes: dynamodb?.SizeBytes,
        StreamViewType: dynamodb?.StreamViewType,
      },
      // Who made the change, when it was not a request (a TTL deletion: DynamoDB's own principal).
      ...(record.userIdentity ? { userIdentity: { type: record.userIdentity.Type, principalId: record.userIdentity.PrincipalId } } : {}),
      eventSourceARN: this.streamArn,
    };
  }
}

/** An image as Lambda hands it over: JSON, binary values in base64 (the SDK reads them as bytes). */
function lambdaImage(image: Record<string, any>): Record<string, any> {
  return Object.fromEntries(Object.entries(image).map(([name, value]) => [name, lambdaValue(value)]));
}

function lambdaValue(value: Record<string, any>): Record<string, any> {
  if (value.B instanceof Uint8Array) return { B: Buffer.from(value.B).toString('base64') };
  if (Array.isArray(value.BS)) return { BS: value.BS.map((item: Uint8Array) => Buffer.from(item).toString('base64')) };
  if (value.M) return { M: lambdaImage(value.M) };
  if (Array.isArray(value.L)) return { L: value.L.map(lambdaValue) };
  return value;
}

function passes(mapping: Mapping, record: Record<string, any>): boolean {
  return mapping.filters.length === 0 || mapping.filters.some((pattern) => matchesPattern(pattern, record));
}

/**
 * The event pattern syntax Lambda filters with: an object pattern matches field by field
 * (every field named must be present), a list matches if any of its entries does; entries are
 * values, or `{prefix}`, `{exists}`, `{"anything-but"}`. Anything else is refused loudly, so a
 * pattern this emulation does not know never passes silently.
 */
function matchesPattern(pattern: unknown, value: unknown): boolean {
  if (Array.isArray(pattern)) return pattern.some((entry) => matchesEntry(entry, value));
  if (pattern === null || typeof pattern !== 'object') throw new Error(`not an event pattern: ${JSON.stringify(pattern)}`);
  if (value === null || typeof value !== 'object') return false;
  return Object.entries(pattern).every(([key, inner]) => {
    const field = (value as Record<string, unknown>)[key];
    if (Array.isArray(inner) && inner.some((entry) => isOperator(entry) && 'exists' in entry)) return matchesPattern(inner, field);
    return field !== undefined && matchesPattern(inner, field);
  });
}

function isOperator(entry: unknown): entry is Record<string, unknown> {
  return entry !== null && typeof entry === 'object' && !Array.isArray(entry);
}

function matchesEntry(entry: unknown, value: unknown): boolean {
  if (!isOperator(entry)) return entry === value;
  if ('prefix' in entry) return typeof value === 'string' && value.startsWith(String(entry.prefix));
  if ('exists' in entry) return entry.exists === (value !== undefined);
  if ('anything-but' in entry) {
    const excluded = ([] as unknown[]).concat(entry['anything-but']);
    return value !== undefined && !excluded.includes(value);
  }
  throw new Error(`event pattern operator not emulated: ${JSON.stringify(entry)}`);
}
