import {
  type AttributeDefinition,
  CreateTableCommand,
  type CreateTableCommandInput,
  DescribeTableCommand,
  type DynamoDBClient,
  type GlobalSecondaryIndex,
  type LocalSecondaryIndex,
  ResourceInUseException,
  ResourceNotFoundException,
  UpdateTableCommand,
  UpdateTimeToLiveCommand,
} from '@aws-sdk/client-dynamodb';

/**
 * The one table definition. The CDK construct (lib/) and the local server both build their
 * table from these names, so a local table is the deployed table, key for key.
 */
export const tableKeys = {
  partitionKey: 'pk',
  sortKey: 'sk',
  /**
   * The sessions lists (store/sessions/session-list.ts): every list a session is in (the
   * tenant's, its user's, its agent's, one per string of its metadata), newest activity first.
   * It projects the session id alone (for `prefix`): a list entry is a few hundred bytes
   * whatever the session's metadata holds, so moving it costs one write unit; a page reads
   * the sessions it shows by key (a bounded BatchGet). In the table too, what moves is small:
   * the tenant's list is the session items, which keep their metadata in an item beside them
   * (store/sessions/session-item.ts), and the other lists are entry items of a few hundred bytes.
   */
  sessionsIndex: { name: 'bySessionList', partitionKey: 'lpk', sortKey: 'lsk', projected: ['sessionId'] },
  /**
   * Every API key, for the admin CLI (store/access/api-keys.ts). It once held the sessions
   * list too, with every attribute of a session (metadata included): sessions written before
   * `bySessionList` may still be in it; nothing reads them there.
   */
  keysIndex: { name: 'bySessionActivity', partitionKey: 'gsi1pk', sortKey: 'gsi1sk' },
  /**
   * Memory items of one namespace, most recently updated first (store/memory/memory-store.ts). A
   * local index (the namespace's own partition key, sorted by `mu`), so a search reads it
   * consistently and finds every put that has answered, as DynamoDB Local's indexes always
   * do; a global index may answer from before the put (docs/architecture.md, "Memory items").
   * Only items with a `mu` attribute are in it, and it projects only what a search needs to
   * decide on an item: the short top-level fields, the expiry and the value's size. The values
   * themselves are fetched for the matches only.
   */
  memoryIndex: { name: 'byMemoryRecency', partitionKey: 'pk', sortKey: 'mu', projected: ['mf', 'mp', 'expiresAt', 'vs'] },
  /**
   * Sessions whose history is due for a retention run (store/log/prune-due.ts): only the
   * retention marker `U~prune` of a session with something due carries `dpk`/`dsk`, so the
   * index holds one entry per such session, in PRUNE_DUE_SHARDS partitions, by when it is due.
   * Keys only: the marker's other attributes change with every run, and would rewrite the entry.
   */
  pruneDueIndex: { name: 'byPruneDue', partitionKey: 'dpk', sortKey: 'dsk' },
  timeToLive: 'expiresAt',
} as const;

export const defaultTableName = 'agentstate';

const { partitionKey, sortKey, sessionsIndex, keysIndex, memoryIndex, pruneDueIndex } = tableKeys;

/**
 * The key attributes, as CreateTable and UpdateTable take them. A function, like the two
 * below: a Lambda bundles this module for `tableKeys` and never creates a table.
 */
function attributeDefinitions(): AttributeDefinition[] {
  return [
    { AttributeName: partitionKey, AttributeType: 'S' },
    { AttributeName: sortKey, AttributeType: 'S' },
    { AttributeName: sessionsIndex.partitionKey, AttributeType: 'S' },
    { AttributeName: sessionsIndex.sortKey, AttributeType: 'S' },
    { AttributeName: keysIndex.partitionKey, AttributeType: 'S' },
    { AttributeName: keysIndex.sortKey, AttributeType: 'S' },
    { AttributeName: memoryIndex.sortKey, AttributeType: 'S' },
    { AttributeName: pruneDueIndex.partitionKey, AttributeType: 'S' },
    { AttributeName: pruneDueIndex.sortKey, AttributeType: 'S' },
  ];
}

/** The table's global indexes, as CreateTable and UpdateTable take them. */
function globalIndexes(): GlobalSecondaryIndex[] {
  return [
    {
      IndexName: keysIndex.name,
      KeySchema: [
        { AttributeName: keysIndex.partitionKey, KeyType: 'HASH' },
        { AttributeName: keysIndex.sortKey, KeyType: 'RANGE' },
      ],
      Projection: { ProjectionType: 'ALL' },
    },
    {
      IndexName: sessionsIndex.name,
      KeySchema: [
        { AttributeName: sessionsIndex.partitionKey, KeyType: 'HASH' },
        { AttributeName: sessionsIndex.sortKey, KeyType: 'RANGE' },
      ],
      Projection: { ProjectionType: 'INCLUDE', NonKeyAttributes: [...sessionsIndex.projected] },
    },
    {
      IndexName: pruneDueIndex.name,
      KeySchema: [
        { AttributeName: pruneDueIndex.partitionKey, KeyType: 'HASH' },
        { AttributeName: pruneDueIndex.sortKey, KeyType: 'RANGE' },
      ],
      Projection: { ProjectionType: 'KEYS_ONLY' },
    },
  ];
}

/**
 * The table's local indexes. DynamoDB makes them with the table only: a table made without
 * them must be made again (`ensureTable` says so).
 */
function localIndexes(): LocalSecondaryIndex[] {
  return [
    {
      IndexName: memoryIndex.name,
      KeySchema: [
        { AttributeName: memoryIndex.partitionKey, KeyType: 'HASH' },
        { AttributeName: memoryIndex.sortKey, KeyType: 'RANGE' },
      ],
      Projection: { ProjectionType: 'INCLUDE', NonKeyAttributes: [...memoryIndex.projected] },
    },
  ];
}

/** CreateTable input for DynamoDB Local and tests (on-demand, streams with both images). */
function createTableInput(tableName: string): CreateTableCommandInput {
  return {
    TableName: tableName,
    BillingMode: 'PAY_PER_REQUEST',
    AttributeDefinitions: attributeDefinitions(),
    KeySchema: [
      { AttributeName: partitionKey, KeyType: 'HASH' },
      { AttributeName: sortKey, KeyType: 'RANGE' },
    ],
    GlobalSecondaryIndexes: globalIndexes(),
    LocalSecondaryIndexes: localIndexes(),
    StreamSpecification: { StreamEnabled: true, StreamViewType: 'NEW_AND_OLD_IMAGES' },
  };
}

/**
 * Adds the indexes a table made by an older version lacks (a persistent local data folder):
 * one at a time, as DynamoDB allows, each waited for until it is active.
 */
async function addMissingIndexes(
  client: DynamoDBClient,
  tableName: string,
  existing: ReadonlyArray<{ IndexName?: string }>,
): Promise<void> {
  const have = new Set(existing.map((index) => index.IndexName));
  for (const index of globalIndexes()) {
    if (have.has(index.IndexName)) continue;
    await client.send(
      new UpdateTableCommand({
        TableName: tableName,
        AttributeDefinitions: attributeDefinitions(),
        GlobalSecondaryIndexUpdates: [{ Create: index }],
      }),
    );
    for (let attempt = 0; attempt < 600; attempt++) {
      const { Table } = await client.send(new DescribeTableCommand({ TableName: tableName }));
      const status = Table?.GlobalSecondaryIndexes?.find((candidate) => candidate.IndexName === index.IndexName)?.IndexStatus;
      if (status === 'ACTIVE') break;
      await new Promise((wake) => setTimeout(wake, 100));
    }
  }
}

/**
 * A table made by an earlier build (a persistent local data folder) has the memory index as a
 * global one, which cannot be read consistently, and DynamoDB adds no local index to a table
 * that exists: it must be made again.
 */
function checkLocalIndexes(tableName: string, existing: ReadonlyArray<{ IndexName?: string }>): void {
  const have = new Set(existing.map((index) => index.IndexName));
  const missing = localIndexes().filter((index) => !have.has(index.IndexName));
  if (missing.length === 0) return;
  throw new Error(
    `table ${tableName} was made by an earlier build: it lacks the local index ${missing.map((index) => index.IndexName).join(', ')}, ` +
      'which DynamoDB adds only when it creates a table; start with a new data folder or table name (docs/architecture.md, "Memory items")',
  );
}

/** Creates the table (and its TTL setting) unless it exists; returns whether it created it. */
export async function ensureTable(client: DynamoDBClient, tableName: string): Promise<boolean> {
  try {
    const { Table } = await client.send(new DescribeTableCommand({ TableName: tableName }));
    checkLocalIndexes(tableName, Table?.LocalSecondaryIndexes ?? []);
    await addMissingIndexes(client, tableName, Table?.GlobalSecondaryIndexes ?? []);
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
