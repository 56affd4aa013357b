import { SendMessageBatchCommand, SQSClient } from '@aws-sdk/client-sqs';
import { mockClient } from 'aws-sdk-client-mock';
import { describe, expect, it } from 'vitest';
import { laneOf, type QueuedDelivery } from '../../functions/core/webhooks/records.js';
import { sqsWebhookQueue } from '../../functions/streams/webhook-queue.js';

/**
 * The webhook queue in AWS (functions/streams/webhook-queue.ts) against a mocked SQS, for what
 * a real queue will not do on request: refuse one entry of a batch. A refused delivery blocks
 * its lane (nothing after it is sent), other lanes go on.
 */

function delivery(webhookId: string, sessionId: string, version: number, body = `{"id":"${sessionId}:${version}"}`): QueuedDelivery {
  return {
    tenant: 't1',
    webhook: { id: webhookId, url: 'https://x.example', secret: 'never-queued', sessionId: null, createdAt: '2025-06-01T00:00:00.000Z' },
    lane: laneOf('t1', webhookId, [sessionId]),
    event: { id: `${sessionId}:${version}`, sessionId, version, body },
  };
}

describe('the SQS webhook queue', () => {
  it('sends ten at a time in order, and stops a lane at its first refused entry while the others go on', async () => {
    // Prepare: lane A's second delivery is refused.
    const sqs = mockClient(SQSClient);
    sqs.on(SendMessageBatchCommand).callsFake((input: { Entries: Array<{ Id: string; MessageBody: string }> }) => {
      const refused = input.Entries.filter((entry) => entry.MessageBody.includes('"a:2"'));
      return {
        Successful: input.Entries.filter((entry) => !refused.includes(entry)).map((entry) => ({ Id: entry.Id, MessageId: entry.Id })),
        Failed: refused.map((entry) => ({ Id: entry.Id, SenderFault: false, Code: 'InternalError' })),
      };
    });
    const deliveries = [
      delivery('w', 'a', 1),
      delivery('w', 'a', 2),
      ...Array.from({ length: 9 }, (_, index) => delivery('w', 'b', index + 1)),
      delivery('w', 'a', 3),
    ];

    // Act
    const { failed } = await sqsWebhookQueue(
      new SQSClient({ region: 'eu-west-1' }),
      'https://sqs.eu-west-1.amazonaws.com/1/q.fifo',
    ).enqueue(deliveries);

    // Assess: a:2 and a:3 are reported (a:3 never sent); b went on; one group per lane.
    expect(failed).toEqual([1, 11]);
    const sent = sqs.commandCalls(SendMessageBatchCommand).map((call) => call.args[0].input.Entries ?? []);
    expect(sent.map((entries) => entries.length)).toEqual([10, 1]);
    const bodies = sent.flat().map((entry) => JSON.parse(entry.MessageBody as string).id);
    expect(bodies).not.toContain('a:3');
    const groups = new Set(sent.flat().map((entry) => entry.MessageGroupId));
    expect(groups.size).toBe(2);
    expect(JSON.stringify(sent)).not.toContain('never-queued');
    sqs.restore();
  });

  it('reports a whole batch whose request fails, and everything later of its lanes', async () => {
    // Prepare
    const sqs = mockClient(SQSClient);
    sqs.on(SendMessageBatchCommand).rejects(new Error('network down'));

    // Act
    const { failed } = await sqsWebhookQueue(
      new SQSClient({ region: 'eu-west-1' }),
      'https://sqs.eu-west-1.amazonaws.com/1/q.fifo',
    ).enqueue([delivery('w', 'a', 1), delivery('v', 'a', 1)]);

    // Assess
    expect(failed).toEqual([0, 1]);
    sqs.restore();
  });
});
