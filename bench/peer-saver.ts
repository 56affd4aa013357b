/**
 * The peer saver the LangGraph runs are measured against (@rwai/langgraphjs-checkpoint-dynamodb,
 * which writes DynamoDB directly): how it is loaded and the two tables it needs. Used by the
 * graph bench (langgraph-graph.ts) and by the run of LangGraph's own tests on it
 * (test/langgraph-upstream/setup-peer.ts).
 */
import { createRequire } from 'node:module';
import { CreateTableCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { BaseCheckpointSaver } from '@langchain/langgraph-checkpoint';

export interface PeerTables {
  checkpointsTableName: string;
  writesTableName: string;
}

/** The peer's constructor, as far as these runs use it. */
export type PeerSaver = new (
  options: PeerTables & { clientConfig: object },
) => BaseCheckpointSaver & { client: { middlewareStack: { add: (middleware: unknown, options: object) => void } } };

/** Its ES module build does not load (it imports without file extensions); its CommonJS one does. */
const require = createRequire(import.meta.url);
export const { DynamoDBSaver } = require('@rwai/langgraphjs-checkpoint-dynamodb') as { DynamoDBSaver: PeerSaver };

/** The two tables the peer saver needs, named `<prefix>-checkpoints` and `<prefix>-writes`, created as its README says. */
export async function createPeerTables(client: DynamoDBClient, prefix: string): Promise<PeerTables> {
  const names = { checkpointsTableName: `${prefix}-checkpoints`, writesTableName: `${prefix}-writes` };
  const table = (name: string, hash: string, range: string) =>
    client.send(
      new CreateTableCommand({
        TableName: name,
        BillingMode: 'PAY_PER_REQUEST',
        KeySchema: [
          { AttributeName: hash, KeyType: 'HASH' },
          { AttributeName: range, KeyType: 'RANGE' },
        ],
        AttributeDefinitions: [
          { AttributeName: hash, AttributeType: 'S' },
          { AttributeName: range, AttributeType: 'S' },
        ],
      }),
    );
  await Promise.all([
    table(names.checkpointsTableName, 'thread_id', 'checkpoint_id'),
    table(names.writesTableName, 'thread_id_checkpoint_id_checkpoint_ns', 'task_id_idx'),
  ]);
  return names;
}
