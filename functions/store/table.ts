import {
  CreateTableCommand,
  type CreateTableCommandInput,
  DescribeTableCommand,
  type DynamoDBClient,
  ResourceInUseException,
  ResourceNotFoundException,
  UpdateTimeToLiveCommand,
} from '@aws-sdk/client-dynamodb';

/**
 * The one table definition. The CDK construct (lib/) and the local server both build their
 * table from these names, so a local table is the deployed table, key for key.
 */
export const tableKeys = {
  partitionKey: 'pk',
  sortKey: 'sk',
  /** Sessions of a tenant ordered by recent activity. */
  sessionsIndex: { name: 'bySessionActivity', partitionKey: 'gsi1pk', sortKey: 'gsi1sk' },
  timeToLive: 'expiresAt',
} as const;

export const defaultTableName = 'agentstate';

/** CreateTable input for DynamoDB Local and tests (on-demand, streams with both images). */
function createTableInput(tableName: string): CreateTableCommandInput {
  const { partitionKey, sortKey, sessionsIndex } = tableKeys;
  return {
    TableName: tableName,
    BillingMode: 'PAY_PER_REQUEST',
    AttributeDefinitions: [
      { AttributeName: partitionKey, AttributeType: 'S' },
      { AttributeName: sortKey, AttributeType: 'S' },
      { AttributeName: sessionsIndex.partitionKey, AttributeType: 'S' },
      { AttributeName: sessionsIndex.sortKey, AttributeType: 'S' },
    ],
    KeySchema: [
      { AttributeName: partitionKey, KeyType: 'HASH' },
      { AttributeName: sortKey, KeyType: 'RANGE' },
    ],
    GlobalSecondaryIndexes: [
      {
        IndexName: sessionsIndex.name,
        KeySchema: [
          { AttributeName: sessionsIndex.partitionKey, KeyType: 'HASH' },
          { AttributeName: sessionsIndex.sortKey, KeyType: 'RANGE' },
        ],
        Projection: { ProjectionType: 'ALL' },
      },
    ],
    StreamSpecification: { StreamEnabled: true, StreamViewType: 'NEW_AND_OLD_IMAGES' },
  };
}

/** Creates the table (and its TTL setting) unless it exists; returns whether it created it. */
export async function ensureTable(client: DynamoDBClient, tableName: string): Promise<boolean> {
  try {
    await client.send(new DescribeTableCommand({ TableName: tableName }));
    return false;
  } catch (error) {
    if (!(error instanceof ResourceNotFoundException)) throw error;
  }
  try {
    await client.send(new CreateTableCommand(createTableInput(tableName)));
  } catch (error) {
    // Another process created it between our describe and create: that is the goal anyway.
    if (error instanceof ResourceInUseException) return false;
    throw error;
  }
  await client.send(
    new UpdateTimeToLiveCommand({
      TableName: tableName,
      TimeToLiveSpecification: { AttributeName: tableKeys.timeToLive, Enabled: true },
    }),
  );
  return true;
}
