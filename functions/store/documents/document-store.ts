import { GetCommand } from '@aws-sdk/lib-dynamodb';
import type { DocumentRecord, DocumentRef, SessionScope, Tip } from '../../core/model/model.js';
import type { DocumentStore, DocumentWrite } from '../../core/model/ports.js';
import { nextSlot, sessionUpsert } from '../log/session-writes.js';
import * as keys from '../table/keys.js';
import { tableKeys } from '../table/table.js';
import { conditions, type TableClient, type TaggedItem, transact } from '../table/table-client.js';
import * as documentItem from './document-item.js';

/**
 * The run, profile and shared documents of commits (API.md section 8, keys.ts):
 *
 *   S#<tenant>#<session>   R#<run>   a run document (TTL after its last write)
 *   P#<tenant>#<user>      P         a user's profile document, shared by their sessions
 *   A#<tenant>             G         the tenant's shared document (beside the agents: agent-store.ts)
 *
 * Each is written whole, conditional on the version it was read at, and only when its state
 * changed; a commit that changes the thread too writes them in the session's commit
 * (session-store.ts) with `documentPut`.
 */
export class DynamoDbDocumentReader implements Pick<DocumentStore, 'getDocument'> {
  constructor(protected readonly table: TableClient) {}

  async getDocument(ref: DocumentRef): Promise<DocumentRecord | null> {
    const { Item } = await this.table.send(
      new GetCommand({ TableName: this.table.tableName, Key: documentItem.key(ref), ConsistentRead: true }),
    );
    if (!Item) return null;
    // TTL deletes lazily: an expired run reads as gone, as it soon will be.
    const expiresAt = Item[tableKeys.timeToLive];
    if (typeof expiresAt === 'number' && expiresAt * 1000 < this.table.now()) return null;
    return documentItem.decode(ref, Item);
  }
}

/** The documents' reads and commits' writes. The reads alone are a class of their own: decide only reads them. */
export class DynamoDbDocumentStore extends DynamoDbDocumentReader implements DocumentStore {
  async commitDocuments(
    scope: SessionScope,
    documents: ReadonlyArray<DocumentWrite>,
    guard: Tip | null,
    touchSessionAt?: string,
    profileOf?: string,
  ): Promise<void> {
    const items = documents.map((write) => documentPut(this.table, scope, write));
    if (touchSessionAt) {
      const upsert = sessionUpsert(this.table.tableName, scope, touchSessionAt, profileOf === undefined ? {} : { userIs: profileOf });
      items.push({ role: 'session', item: { Update: upsert } });
    }
    if (guard) {
      // The log's next place after the tip the guard read must still be free.
      const { key, claim } = nextSlot(guard);
      items.unshift({
        role: 'tip',
        item: { ConditionCheck: { TableName: this.table.tableName, Key: { pk: keys.session(scope), sk: key }, ...claim } },
      });
    }
    if (items.length === 0) return;
    await transact(this.table, items);
  }
}

/**
 * The write of one document a commit of `scope` made: a new document may take the place of
 * one that expired (TTL deletes lazily), any other only of the very version it was read at.
 */
export function documentPut(table: TableClient, scope: SessionScope, write: DocumentWrite): TaggedItem {
  const { record } = write;
  const nowSeconds = table.nowSeconds();
  const item = documentItem.encode(
    documentRefOf(scope, record),
    record,
    { sessionId: scope.sessionId, author: write.author },
    write.ttlSeconds ? nowSeconds + write.ttlSeconds : undefined,
  );
  return {
    role: 'document',
    item: {
      Put: {
        TableName: table.tableName,
        Item: item,
        ...(write.basedOnVersion === 0
          ? {
              ConditionExpression: `${conditions.itemIsNew} OR #ttl < :now`,
              ExpressionAttributeNames: { '#ttl': tableKeys.timeToLive },
              ExpressionAttributeValues: { ':now': nowSeconds },
            }
          : { ConditionExpression: 'version = :basedOn', ExpressionAttributeValues: { ':basedOn': write.basedOnVersion } }),
      },
    },
  };
}

/** The document a commit of `scope` writes: a run is the session's own. */
function documentRefOf(scope: SessionScope, record: DocumentRecord): DocumentRef {
  switch (record.kind) {
    case 'run':
      return { kind: 'run', scope, id: record.id };
    case 'profile':
      return { kind: 'profile', tenant: scope.tenant, id: record.id };
    case 'shared':
      return { kind: 'shared', tenant: scope.tenant };
  }
}
