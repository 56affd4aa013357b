import { randomUUID } from 'node:crypto';
import { DeleteCommand, PutCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import type { QueueTarget, QueueTicket, WriteQueue } from '../../core/model/ports.js';
import * as documentItem from '../documents/document-item.js';
import * as keys from '../table/keys.js';
import { tableKeys } from '../table/table.js';
import type { TableClient } from '../table/table-client.js';

/**
 * The queue of the blind writers waiting for one target (core/model/ports.ts `WriteQueue`):
 * a ticket is a small item in the target's own partition, beside what it orders,
 *
 *   S#<tenant>#<session>   Q#<taken at, ms>#<id>   a writer waiting for the session's log
 *   P#<tenant>#<user>      Q#…                     … for that user's profile
 *   A#<tenant>             Q#…                     … for the shared document (after G, so the
 *                                                  agents' and shared document's Query passes none)
 *
 * so a queue costs a writer one put, one delete and a few small Queries of its partition, and
 * spreads with the targets (API.md section 14). Tickets carry no `kind`: no stream filter lets
 * them through to the change hook. A ticket whose writer stopped (a function past its timeout)
 * is passed over once it is older than any request may run, and TTL removes it.
 */

/** Longer than any request may run (the handlers' Lambda timeout is 20 s): an older ticket's writer is gone. */
const TICKET_LIFE_MS = 30_000;

export class DynamoDbWriteQueue implements WriteQueue {
  constructor(private readonly table: TableClient) {}

  async join(target: QueueTarget): Promise<QueueTicket> {
    const { table } = this;
    const pk = partitionOf(target);
    const sk = keys.queueTicket(table.now(), randomUUID());
    await table.send(
      new PutCommand({
        TableName: table.tableName,
        Item: { pk, sk, [tableKeys.timeToLive]: table.nowSeconds() + TICKET_LIFE_MS / 1000 },
      }),
    );
    return {
      ahead: async () => {
        const ids: string[] = [];
        let start: Record<string, unknown> | undefined;
        do {
          const page = await table.send(
            new QueryCommand({
              TableName: table.tableName,
              KeyConditionExpression: 'pk = :pk AND sk BETWEEN :first AND :own',
              ExpressionAttributeValues: { ':pk': pk, ':first': keys.queuePrefix, ':own': sk },
              ProjectionExpression: 'sk',
              ConsistentRead: true,
              ExclusiveStartKey: start,
            }),
          );
          for (const item of page.Items ?? []) ids.push(String(item.sk));
          start = page.LastEvaluatedKey;
        } while (start);
        const oldest = table.now() - TICKET_LIFE_MS;
        return ids.filter((id) => id !== sk && keys.ticketTakenAt(id) >= oldest);
      },
      leave: async () => {
        await table.send(new DeleteCommand({ TableName: table.tableName, Key: { pk, sk } }));
      },
    };
  }
}

function partitionOf(target: QueueTarget): string {
  return 'session' in target ? keys.session(target.session) : String(documentItem.key(target.document).pk);
}
