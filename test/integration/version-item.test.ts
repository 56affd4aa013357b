import { GetItemCommand } from '@aws-sdk/client-dynamodb';
import { beforeAll, describe, expect, it } from 'vitest';
import { SessionService } from '../../functions/core/sessions/session-service.js';
import { createStores } from '../../functions/store/index.js';
import { dynamoDbClient } from '../../functions/store/table/client.js';
import * as keys from '../../functions/store/table/keys.js';
import { createTestTable, dynamoEndpoint } from '../helpers/dynamodb.js';

/** What a version item holds on the table, beyond the state: its lineage window, as runs. */
const client = dynamoDbClient({ AGENTSTATE_DYNAMODB_ENDPOINT: dynamoEndpoint() });
let tableName: string;
let service: SessionService;
const scope = { tenant: 'items', sessionId: 'lineage' };

/** A version item of the first life: version k is the `seq`-th change after version k - 1. */
const versionItem = async (version: number, seq = 1, session = scope) =>
  (
    await client.send(
      new GetItemCommand({
        TableName: tableName,
        Key: { pk: { S: keys.session(session) }, sk: { S: keys.logEntry({ incarnation: 0, base: version - 1, seq }) } },
        ConsistentRead: true,
      }),
    )
  ).Item;

const lineageVersions = async (session = scope, node = 'root') => {
  const page = await service.listVersions(session, { node, limit: 100 });
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

  it('says where a version of its window is when other changes came between', async () => {
    // Prepare: versions at the head with an append between the first and the second.
    const session = { tenant: 'items', sessionId: 'lineage-between' };
    await service.patchState(session, { n: 1 });
    await service.appendMessages(session, { messages: [{ id: 'q', role: 'user' }] });
    await service.patchState(session, { n: 2 });
    await service.patchState(session, { n: 3 });

    // Act
    const third = await versionItem(3, 1, session);

    // Assess: version 2 is the second change after version 1 (the append was the first).
    expect((await versionItem(2, 2, session))?.version).toEqual({ N: '2' });
    expect(third?.lineage).toEqual({ S: '2@2,1' });
    expect(await lineageVersions(session, 'q')).toEqual([3, 2, 1]);
  });
});
