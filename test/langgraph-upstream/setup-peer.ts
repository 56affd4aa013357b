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
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { beforeEach } from 'vitest';
import { createPeerTables, DynamoDBSaver } from '../../bench/peer-saver.js';

const endpoint = process.env.AGENTSTATE_UPSTREAM_DYNAMODB;
if (!endpoint) throw new Error('run the upstream tests through test/langgraph-upstream/run.ts');
const clientConfig = { region: 'us-east-1', endpoint, credentials: { accessKeyId: 'local', secretAccessKey: 'local' } };

const dynamoDb = new DynamoDBClient(clientConfig);

/** Two new tables, their names unique to the test. */
const newTables = () => createPeerTables(dynamoDb, `peer-${randomUUID().slice(0, 8)}`);

// Savers a file makes as it loads, before any test, get the file's own pair.
let tables = await newTables();
beforeEach(async () => {
  tables = await newTables();
});

Object.assign(globalThis, {
  __makeSaver: () => new DynamoDBSaver({ ...tables, clientConfig }),
});
