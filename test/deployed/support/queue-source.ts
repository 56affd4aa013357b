import type { QueuedMessage } from './aws-stand-in.js';
import type { DeployedFunction, Deployment } from './deployment.js';
import type { Invocation, LambdaService } from './lambda.js';

/** One SQS event source mapping of the template: its queue, function and batching. */
interface Mapping {
  fn: DeployedFunction;
  queueArn: string;
  batchSize: number;
  reportsFailures: boolean;
}

/**
 * The template's SQS event source mappings over the stand-in's queues (aws-stand-in.ts): what
 * Lambda does between a queue and its function. It hands a mapping's function the messages
 * waiting on its queue, in batches of the mapping's size, as the SQS event the Lambda
 * developer guide shows (`Records[]` of `messageId`, `receiptHandle`, `body`, `attributes`
 * with `ApproximateReceiveCount`, `SentTimestamp`, `MessageGroupId`, `MessageDeduplicationId`;
 * `messageAttributes` of `stringValue` and `dataType`; `md5OfBody`, `eventSource: "aws:sqs"`,
 * `eventSourceARN`, `awsRegion`). A message the function did not report failed is deleted;
 * with ReportBatchItemFailures, the failed ones stay, and of a FIFO queue, nothing after them
 * in their message group is handed over in the same round.
 */
export class QueueEventSource {
  private readonly mappings: Mapping[];

  constructor(
    private readonly deployment: Deployment,
    private readonly lambda: LambdaService,
    private readonly queues: Map<string, QueuedMessage[]>,
  ) {
    this.mappings = deployment
      .ofType('AWS::Lambda::EventSourceMapping')
      .map(([, mapping]) => (mapping as { Properties: Record<string, any> }).Properties)
      .filter((properties) => String(deployment.resolve(properties.EventSourceArn)).startsWith('arn:aws:sqs:'))
      .map((properties) => ({
        fn: deployment.functions().find((candidate) => candidate.logicalId === properties.FunctionName.Ref) as DeployedFunction,
        queueArn: deployment.resolve(properties.EventSourceArn) as string,
        batchSize: Number(properties.BatchSize ?? 10),
        reportsFailures: (properties.FunctionResponseTypes ?? []).includes('ReportBatchItemFailures'),
      }));
  }

  /** The messages waiting on the queue a mapping of `fn` reads. */
  waiting(fn: DeployedFunction): QueuedMessage[] {
    const mapping = this.mappings.find((candidate) => candidate.fn.logicalId === fn.logicalId);
    return mapping ? [...(this.queues.get(mapping.queueArn) ?? [])] : [];
  }

  /**
   * One round over every mapping: each message waiting now (that `only` keeps, when given) is
   * handed over once, in order.
   */
  async deliver(
    only: (message: QueuedMessage) => boolean = () => true,
  ): Promise<Array<{ fn: DeployedFunction; invocation: Invocation; records: Array<Record<string, any>> }>> {
    const deliveries: Array<{ fn: DeployedFunction; invocation: Invocation; records: Array<Record<string, any>> }> = [];
    for (const mapping of this.mappings) {
      const queue = this.queues.get(mapping.queueArn) ?? [];
      const blockedGroups = new Set<string>();
      for (const batch of chunks(queue.filter(only), mapping.batchSize)) {
        const handed = batch.filter((message) => !message.groupId || !blockedGroups.has(message.groupId));
        if (handed.length === 0) continue;
        for (const message of handed) message.receiveCount++;
        const records = handed.map((message) => this.record(mapping, message));
        const invocation = await this.lambda.invoke(mapping.fn, { Records: records });
        deliveries.push({ fn: mapping.fn, invocation, records });
        const failed = invocation.error
          ? new Set(handed.map((message) => message.messageId))
          : new Set(
              ((mapping.reportsFailures ? invocation.result?.batchItemFailures : undefined) ?? []).map(
                (failure: { itemIdentifier: string }) => failure.itemIdentifier,
              ),
            );
        for (const message of handed) {
          if (failed.has(message.messageId)) {
            if (message.groupId) blockedGroups.add(message.groupId);
            continue;
          }
          queue.splice(queue.indexOf(message), 1);
        }
      }
    }
    return deliveries;
  }

  private record(mapping: Mapping, message: QueuedMessage): Record<string, any> {
    return {
      messageId: message.messageId,
      receiptHandle: `handle-${message.messageId}-${message.receiveCount}`,
      body: message.body,
      attributes: {
        ApproximateReceiveCount: String(message.receiveCount),
        SentTimestamp: String(message.sentAt),
        SenderId: message.senderId,
        ApproximateFirstReceiveTimestamp: String(message.sentAt),
        ...(message.groupId
          ? { MessageGroupId: message.groupId, MessageDeduplicationId: message.deduplicationId, SequenceNumber: message.sequenceNumber }
          : {}),
      },
      messageAttributes: Object.fromEntries(
        Object.entries(message.attributes).map(([name, value]) => [
          name,
          { stringValue: value.StringValue, stringListValues: [], binaryListValues: [], dataType: value.DataType },
        ]),
      ),
      md5OfBody: message.md5OfBody,
      eventSource: 'aws:sqs',
      eventSourceARN: mapping.queueArn,
      awsRegion: this.deployment.region,
    };
  }
}

function chunks<T>(items: T[], size: number): T[][] {
  const out: T[][] = [];
  for (let offset = 0; offset < items.length; offset += size) out.push(items.slice(offset, offset + size));
  return out;
}
