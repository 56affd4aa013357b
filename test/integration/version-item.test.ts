import { GetItemCommand, UpdateItemCommand } from '@aws-sdk/client-dynamodb';
import { beforeAll, describe, expect, it } from 'vitest';
import { SessionService } from '../../functions/core/session-service.js';
import { dynamoDbClient } from '../../functions/store/client.js';
import { keys } from '../../functions/store/keys.js';
import { createStores } from '../../functions/store/stores.js';
import { createTestTable, dynamoEndpoint } from '../helpers/dynamodb.js';

/** What a version item holds on the table, beyond the state: its lineage window, as runs. */
const client = dynamoDbClient({ AGENTSTATE_DYNAMODB_ENDPOINT: dynamoEndpoint() });
let tableName: string;
let service: SessionService;
const scope = { tenant: 'items', sessionId: 'lineage' };

const versionItem = async (version: number) =>
  (
    await client.send(
      new GetItemCommand({
        TableName: tableName,
        Key: { pk: { S: keys.session(scope) }, sk: { S: keys.slot(version) } },
        ConsistentRead: true,
      }),
    )
  ).Item;

const lineageVersions = async () => {
  const page = await service.listVersions(scope, { node: 'root', limit: 100 });
  return page.items.map((view) => view.version);
};

beforeAll(async () => {
  tableName = await createTestTable('version-item');
  service = new SessionService(createStores(client, tableName).sessions);
  for (let n = 1; n <= 40; n++) await service.patchState(scope, { n });
});

describe('a version item on the table', () => {
  it('stores its lineage window as one string of runs, and none for the first version', async () => {
    expect((await versionItem(40))?.lineage).toEqual({ S: '39-8' });
    expect((await versionItem(2))?.lineage).toEqual({ S: '1' });
    expect((await versionItem(1))?.lineage).toBeUndefined();
  });

  it('serves the whole node history through the windows, past the 32 of one item', async () => {
    expect(await lineageVersions()).toEqual(Array.from({ length: 40 }, (_, index) => 40 - index));
  });

  it('still reads an item that stores its window as a list of numbers', async () => {
    const listed = Array.from({ length: 32 }, (_, index) => ({ N: String(39 - index) }));
    await client.send(
      new UpdateItemCommand({
        TableName: tableName,
        Key: { pk: { S: keys.session(scope) }, sk: { S: keys.slot(40) } },
        UpdateExpression: 'SET lineage = :list',
        ExpressionAttributeValues: { ':list': { L: listed } },
      }),
    );
    expect(await lineageVersions()).toEqual(Array.from({ length: 40 }, (_, index) => 40 - index));
  });
});
