import { GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { beforeAll, describe, expect, it } from 'vitest';
import { CommitService } from '../../functions/core/commits/commit-service.js';
import { createStores, type Stores } from '../../functions/store/index.js';
import { dynamoDbClient } from '../../functions/store/table/client.js';
import { createTestTable, dynamoEndpoint } from '../helpers/dynamodb.js';

/**
 * How a run, profile or shared document is kept (store/documents/document-item.ts): each
 * top-level key an attribute `d:<key>`, an object of usable member names a map of their JSON
 * texts, and `bytes` bounding the document's JSON from above. A document written before this
 * layout (its whole JSON in `state`) still reads, and the next commit rewrites it whole in the
 * layout, keeping every key: there is no migration to run.
 */
let stores: Stores;
let commits: CommitService;
const tenant = 'layout';

beforeAll(async () => {
  const tableName = await createTestTable('document-layout');
  stores = createStores(dynamoDbClient({ AGENTSTATE_DYNAMODB_ENDPOINT: dynamoEndpoint() }), tableName);
  commits = new CommitService({ sessions: stores.sessions, documents: stores.documents });
  const now = new Date().toISOString();
  await stores.sessions.createSession(
    { tenant, sessionId: 's' },
    { sessionId: 's', agentId: null, userId: 'ada', metadata: null, createdAt: now, updatedAt: now },
  );
});

const sharedKey = { pk: `A#${tenant}`, sk: 'G' };
const raw = async () =>
  (await stores.table.send(new GetCommand({ TableName: stores.table.tableName, Key: sharedKey, ConsistentRead: true }))).Item ?? {};
const commit = (commands: unknown[]) => commits.commit({ tenant, sessionId: 's' }, { commands: commands as never });

describe('the per-key layout of a document', () => {
  it('reads a document in the earlier layout, and rewrites it whole in the per-key layout on its next commit', async () => {
    // Prepare: a shared document as an earlier build wrote it.
    await stores.table.send(
      new PutCommand({
        TableName: stores.table.tableName,
        Item: {
          ...sharedKey,
          kind: 'doc:shared',
          version: 4,
          state: '{"tone":"warm","seen":{"a":1}}',
          updatedAt: '2026-01-01T00:00:00.000Z',
          sessionId: 's',
          author: null,
        },
      }),
    );

    // Act
    const read = await commits.readDocument({ kind: 'shared', tenant });
    const written = await commit([{ key: 'seen', scope: 'shared', merge: 'commutative', set: { b: 2 } }]);

    // Assess
    expect(read).toEqual({ version: 4, state: { tone: 'warm', seen: { a: 1 } }, updatedAt: '2026-01-01T00:00:00.000Z' });
    expect(written.shared).toMatchObject({ version: 5, state: { tone: 'warm', seen: { a: 1, b: 2 } } });
    const item = await raw();
    expect(item).not.toHaveProperty('state');
    expect(item).toMatchObject({ version: 5, 'd:tone': '"warm"', 'd:seen': { a: '1', b: '2' } });
    expect(item.bytes).toBe(Buffer.byteLength(JSON.stringify({ tone: 'warm', seen: { a: 1, b: 2 } })) - 1);
  });

  it('writes a merge into an object member by member, and keeps `bytes` at or above the document’s size', async () => {
    // Act
    await commit([{ key: 'seen', scope: 'shared', merge: 'commutative', set: { c: [3] } }]);
    await commit([{ key: 'tone', scope: 'shared', merge: 'disjoint', set: 'cool' }]);
    const shrunk = await commit([{ key: 'seen', scope: 'shared', merge: 'disjoint', set: 1 }]);

    // Assess
    expect(shrunk.shared).toMatchObject({ version: 8, state: { tone: 'cool', seen: 1 } });
    const item = await raw();
    expect(item).toMatchObject({ version: 8, 'd:tone': '"cool"', 'd:seen': '1' });
    // A bound: what shrank is not taken back by a blind write, so it may stand above the size.
    expect(item.bytes).toBeGreaterThanOrEqual(Buffer.byteLength(JSON.stringify(shrunk.shared?.state)) - 1);
  });

  it('takes what fits again after a document shrank, though its bound had not come down', async () => {
    // Prepare: 200 KiB in, then out again: the bound stays near 200 KiB.
    await commit([{ key: 'fill', scope: 'shared', merge: 'disjoint', set: 'x'.repeat(200 * 1024) }]);
    await commit([{ key: 'fill', scope: 'shared', merge: 'disjoint', set: 'small' }]);
    expect(Number((await raw()).bytes)).toBeGreaterThan(200 * 1024);

    // Act: 100 KiB more fits the document, not the bound.
    const grown = await commit([{ key: 'more', scope: 'shared', merge: 'disjoint', set: 'y'.repeat(100 * 1024) }]);

    // Assess: put whole, conditional on its version, with the bound made exact again.
    expect(grown.shared?.version).toBe(11);
    const item = await raw();
    expect(item.bytes).toBe(Buffer.byteLength(JSON.stringify(grown.shared?.state)) - 1);
  });
});
