/**
 * Set up in every LangGraph test file of an upstream run's `peer` pass (run.ts, `--savers`): the
 * factory the rewritten files call in place of `new MemorySaver()` makes
 * `@rwai/langgraphjs-checkpoint-dynamodb`'s saver, which writes DynamoDB directly, on the DynamoDB
 * Local of the run's server (as bench/langgraph-graph.ts does). Its tables have no prefix to keep
 * savers apart, so each test gets two tables of its own, made before the test starts (their time
 * is not the test's): the savers a test makes start empty, as a new `MemorySaver` does (those it
 * makes share them). The stores stay `InMemoryStore`: the peer has none.
 */
import { randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import { CreateTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { BaseCheckpointSaver } from '@langchain/langgraph-checkpoint';
import { beforeEach } from 'vitest';

const endpoint = process.env.AGENTSTATE_UPSTREAM_DYNAMODB;
if (!endpoint) throw new Error('run the upstream tests through test/langgraph-upstream/run.ts');
const clientConfig = { region: 'us-east-1', endpoint, credentials: { accessKeyId: 'local', secretAccessKey: 'local' } };

/** Its ES module build does not load (it imports without file extensions); its CommonJS one does. */
const { DynamoDBSaver } = createRequire(import.meta.url)('@rwai/langgraphjs-checkpoint-dynamodb') as {
  DynamoDBSaver: new (options: { checkpointsTableName: string; writesTableName: string; clientConfig: object }) => BaseCheckpointSaver;
};

const dynamoDb = new DynamoDBClient(clientConfig);

/** Two new tables, created as the peer's README says. */
async function newTables(): Promise<{ checkpointsTableName: string; writesTableName: string }> {
  const id = randomUUID().slice(0, 8);
  const names = { checkpointsTableName: `peer-${id}-checkpoints`, writesTableName: `peer-${id}-writes` };
  const table = (name: string, hash: string, range: string) =>
    dynamoDb.send(
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

// Savers a file makes as it loads, before any test, get the file's own pair.
let tables = await newTables();
beforeEach(async () => {
  tables = await newTables();
});

Object.assign(globalThis, {
  __makeSaver: () => new DynamoDBSaver({ ...tables, clientConfig }),
});
