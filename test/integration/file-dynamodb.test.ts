import { existsSync, readFileSync } from 'node:fs';
import { ListTablesCommand } from '@aws-sdk/client-dynamodb';
import { DynamoDBStreamsClient, ListStreamsCommand } from '@aws-sdk/client-dynamodb-streams';
import { afterAll, describe, expect, it } from 'vitest';
import { createTestTable, dynamoEndpoint, dynamoPid, testDynamoDbClient } from '../helpers/dynamodb.js';

/**
 * The suite's own footing (test/helpers/dynamodb.ts): a test file's DynamoDB Local is its own,
 * so what the other files write, and in what order they run, cannot slow its requests (DynamoDB
 * Local scans every stream record an instance holds that was written before a table's first).
 */
const client = testDynamoDbClient();
const streams = new DynamoDBStreamsClient({
  endpoint: dynamoEndpoint(),
  region: 'us-east-1',
  credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
});
afterAll(() => {
  client.destroy();
  streams.destroy();
});

describe("a test file's DynamoDB Local", () => {
  it('holds only the tables and streams the file made', async () => {
    // Prepare
    const made = [await createTestTable('own-a'), await createTestTable('own-b')];

    // Act
    const tables = (await client.send(new ListTablesCommand({}))).TableNames;
    const tablesWithStreams = (await streams.send(new ListStreamsCommand({}))).Streams?.map((stream) => stream.TableName);

    // Assess
    expect(tables?.sort()).toEqual([...made].sort());
    expect(tablesWithStreams?.sort()).toEqual([...made].sort());
  });

  it.runIf(existsSync('/proc/self/cmdline'))('runs on java’s quick-start tier, which halves its CPU over a file', () => {
    // Act
    const javaArguments = readFileSync(`/proc/${dynamoPid()}/cmdline`, 'utf8').split('\0');

    // Assess
    expect(javaArguments).toContain('-XX:TieredStopAtLevel=1');
    expect(javaArguments).toContain('-inMemory');
  });
});
