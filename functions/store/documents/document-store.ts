import { randomUUID } from 'node:crypto';
import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { GetCommand, PutCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import { isJsonObject, type Json } from '../../core/json/json.js';
import { AgentStateError } from '../../core/kernel/errors.js';
import { DOCUMENT_LIMIT_BYTES, type DocumentRecord, type DocumentRef, type SessionScope, type Tip } from '../../core/model/model.js';
import { type DocumentStore, type DocumentWrite, type KeyedDocumentWrite, StaleTipError } from '../../core/model/ports.js';
import { ACTIVITY_EVERY_MS, nextSlot, sessionUpsert } from '../log/session-writes.js';
import { DOCUMENT_ITEM_KIND } from '../table/item-kinds.js';
import * as keys from '../table/keys.js';
import { tableKeys } from '../table/table.js';
import { type Item, isConditionFailure, isOwnWrite, type TableClient, type TaggedItem, transact } from '../table/table-client.js';
import * as documentItem from './document-item.js';

/**
 * The item each record `getDocument` returned was read from: a keyed write conditions each key
 * it reshapes on what it saw there, and learns from it whether the item is in the per-key layout.
 */
const readFrom = new WeakMap<DocumentRecord, Item>();

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
export class DynamoDbDocumentReader implements Pick<DocumentStore, 'getDocument' | 'readProfile'> {
  constructor(protected readonly table: TableClient) {}

  async getDocument(ref: DocumentRef): Promise<DocumentRecord | null> {
    return this.documentOf(ref, await this.readItem(ref));
  }

  async readProfile(ref: DocumentRef & { kind: 'profile' }): Promise<{ document: DocumentRecord | null; fence: string | null }> {
    const item = await this.readItem(ref);
    const fence = item?.[documentItem.FENCE_ATTRIBUTE];
    return { document: this.documentOf(ref, item), fence: typeof fence === 'string' ? fence : null };
  }

  private async readItem(ref: DocumentRef): Promise<Item | null> {
    const { Item } = await this.table.send(
      new GetCommand({ TableName: this.table.tableName, Key: documentItem.key(ref), ConsistentRead: true }),
    );
    return Item ?? null;
  }

  private documentOf(ref: DocumentRef, item: Item | null): DocumentRecord | null {
    // A profile's fence alone (a PATCH's, an erasure's tombstone) is no document.
    if (!item || !documentItem.holdsDocument(item)) return null;
    // TTL deletes lazily: an expired run reads as gone, as it soon will be.
    const expiresAt = item[tableKeys.timeToLive];
    if (typeof expiresAt === 'number' && expiresAt * 1000 < this.table.now()) return null;
    const record = documentItem.decode(ref, item);
    readFrom.set(record, item);
    return record;
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

  /**
   * One `UpdateItem` that sets, merges or removes each key of the change (a merge sets the
   * members of its object one by one), adds 1 to the version and numbers its own version by it
   * (`ReturnValues: ALL_NEW`): writers of other keys, or of other members of one object, never
   * make each other fail. What it conditions on:
   *   - the shape of each key it merges into, as read: still an object (members are set in
   *     it), still absent, or still the very value read (replaced by the merged one);
   *   - the size: `bytes` bounds the document's JSON from above and grows by at most what
   *     this write adds, so the write lands only while the bound stays under the limit;
   *   - its own id: a resend of a write that landed (its answer lost) adds no second version;
   *   - a profile's fence, as read (`readProfile`): no `PATCH` gave one of the user's sessions
   *     to another user, no erasure of the user and no whole put came since (document-item.ts).
   * A document read in the earlier layout, too near the limit for the bound, or whose change
   * would not fit one expression, is put whole instead, conditional on its version.
   */
  async writeDocument(ref: DocumentRef & { kind: 'profile' | 'shared' }, write: KeyedDocumentWrite): Promise<DocumentRecord> {
    const stored = write.before ? readFrom.get(write.before) : undefined;
    const writeId = randomUUID();
    const keyed = write.before === null || stored ? keyedUpdate(stored ?? null, write, writeId, DOCUMENT_ITEM_KIND[ref.kind]) : null;
    if (!keyed) return this.putWhole(ref, write, writeId);
    try {
      const { Attributes } = await this.table.send(
        new UpdateCommand({
          TableName: this.table.tableName,
          Key: documentItem.key(ref),
          ...keyed,
          ReturnValues: 'ALL_NEW',
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      );
      return documentItem.decode(ref, Attributes as Item);
    } catch (error) {
      const failed = failedWrite(error, ref, writeId);
      if (failed instanceof OwnWrite) return documentItem.decode(ref, unmarshallIfWire(failed.item));
      throw failed;
    }
  }

  /** The document put whole, as the version after the one read: where a keyed update cannot go. */
  private async putWhole(ref: DocumentRef, write: KeyedDocumentWrite, writeId: string): Promise<DocumentRecord> {
    const { before } = write;
    const record: DocumentRecord = {
      kind: ref.kind,
      id: before?.id ?? (ref.kind === 'shared' ? 'shared' : ref.id),
      version: (before?.version ?? 0) + 1,
      state: write.next,
      updatedAt: write.at,
    };
    try {
      await this.table.send(
        new PutCommand({
          TableName: this.table.tableName,
          Item: {
            ...documentItem.encode(ref, record, { sessionId: write.sessionId, author: write.author }),
            ...freshFence(ref),
            writeId,
            ...(activityDue(write) ? { [documentItem.ACTIVITY_DUE]: write.at } : {}),
          },
          ...wholePutCondition(before?.version ?? 0, write.fence),
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      );
      return record;
    } catch (error) {
      const failed = failedWrite(error, ref, writeId);
      if (failed instanceof OwnWrite) return record;
      throw failed;
    }
  }
}

/**
 * A whole put of a profile sets a new fence: a keyed write that read the one before, and whose
 * write comes after this put, reads again (a whole put may come from a session ordered after a
 * `PATCH` only by its own log, and must not bring back a fence the `PATCH` replaced).
 */
function freshFence(ref: DocumentRef): Item {
  return ref.kind === 'profile' ? { [documentItem.FENCE_ATTRIBUTE]: randomUUID() } : {};
}

/**
 * The condition of a document put whole: the version it was computed from (0: no document,
 * though a profile's fence may be there), and for a keyed write's put, its fence as read.
 */
function wholePutCondition(
  basedOn: number,
  fence: string | null | undefined,
): { ConditionExpression: string; ExpressionAttributeNames: Record<string, string>; ExpressionAttributeValues?: Record<string, unknown> } {
  const names: Record<string, string> = { '#version': 'version' };
  const values: Record<string, unknown> = {};
  const parts = [basedOn === 0 ? 'attribute_not_exists(#version)' : '#version = :basedOn'];
  if (basedOn !== 0) values[':basedOn'] = basedOn;
  if (fence !== undefined) parts.push(fenceCondition(fence, names, values));
  return {
    ConditionExpression: parts.join(' AND '),
    ExpressionAttributeNames: names,
    ...(Object.keys(values).length > 0 ? { ExpressionAttributeValues: values } : {}),
  };
}

/** The fence is still the one read (null: none yet). */
function fenceCondition(fence: string | null, names: Record<string, string>, values: Record<string, unknown>): string {
  names['#fence'] = documentItem.FENCE_ATTRIBUTE;
  if (fence === null) return 'attribute_not_exists(#fence)';
  values[':fence'] = fence;
  return '#fence = :fence';
}

/** A write's failed condition that was its own earlier attempt, which had landed (the SDK resent it). */
class OwnWrite extends Error {
  constructor(readonly item: Item) {
    super('the write had landed');
  }
}

/** An item a failed condition returned: in wire format ({S: …}) from the service, whatever the client. */
function unmarshallIfWire(item: Item): Item {
  const version = item.version as { N?: string } | number | undefined;
  return typeof version === 'object' && version !== null ? unmarshall(item as Record<string, AttributeValue>) : item;
}

/** What a keyed write's failure means: a race to retry, its own resent write, or a document too large for its item. */
function failedWrite(error: unknown, ref: DocumentRef, writeId: string): unknown {
  if (isConditionFailure(error)) {
    return error.Item && isOwnWrite(error.Item, writeId)
      ? new OwnWrite(error.Item)
      : new StaleTipError('the document changed since it was read');
  }
  if (error instanceof Error && error.name === 'TransactionConflictException') return new StaleTipError('the document is being written');
  // The size bound keeps a document's JSON under its limit, and the item under DynamoDB's; this
  // answers the same 413 should an item still not fit, never a 500.
  if (error instanceof Error && error.name === 'ValidationException' && /item size/i.test(error.message)) {
    return new AgentStateError('state_too_large', `the ${ref.kind} state would not fit its item; the limit is ${DOCUMENT_LIMIT_BYTES}`, {
      limitBytes: DOCUMENT_LIMIT_BYTES,
      scope: ref.kind,
    });
  }
  return error;
}

/**
 * Whether the session's activity is due to move with this write: at most once an interval, as
 * for any write (log-writer.ts). The write touches no session item; the change hook moves it.
 */
function activityDue(write: KeyedDocumentWrite): boolean {
  return write.sessionTouchedAt === null || Date.parse(write.at) - Date.parse(write.sessionTouchedAt) >= ACTIVITY_EVERY_MS;
}

/** Past this an expression may not fit DynamoDB's 4 KB: the document is put whole instead. */
const MAX_EXPRESSION_CHARS = 3_500;

/**
 * The `UpdateItem` of a keyed write over `stored` (null: no document was there), or null when
 * the write must put the document whole: an item in the earlier layout, a bound too near the
 * limit, an object merged into one kept as a map whose new members cannot be map keys, or a
 * change too large for one expression.
 */
function keyedUpdate(
  stored: Item | null,
  write: KeyedDocumentWrite,
  writeId: string,
  kind: string,
): {
  UpdateExpression: string;
  ConditionExpression: string;
  ExpressionAttributeNames: Record<string, string>;
  ExpressionAttributeValues: Record<string, unknown>;
} | null {
  if (stored && (documentItem.LEGACY_STATE in stored || typeof stored[documentItem.BYTES_ATTRIBUTE] !== 'number')) return null;
  const before = isJsonObject(write.before?.state) ? write.before.state : {};
  const names: Record<string, string> = {
    '#kind': 'kind',
    '#version': 'version',
    '#bytes': documentItem.BYTES_ATTRIBUTE,
    '#updatedAt': 'updatedAt',
    '#sessionId': 'sessionId',
    '#author': 'author',
    '#writeId': 'writeId',
  };
  const values: Record<string, unknown> = {
    ':kind': kind,
    ':one': 1,
    ':at': write.at,
    ':sessionId': write.sessionId,
    ':author': write.author,
    ':writeId': writeId,
  };
  const set = ['#kind = :kind', '#updatedAt = :at', '#sessionId = :sessionId', '#author = :author', '#writeId = :writeId'];
  const remove: string[] = [];
  names['#activityDue'] = documentItem.ACTIVITY_DUE;
  if (activityDue(write)) set.push('#activityDue = :at');
  else remove.push('#activityDue');
  const checks: string[] = [];
  let growth = 0;
  let count = 0;
  const name = (attribute: string) => {
    const token = `#n${count++}`;
    names[token] = attribute;
    return token;
  };
  const value = (stored: unknown) => {
    const token = `:v${count++}`;
    values[token] = stored;
    return token;
  };
  for (const [key, change] of write.changes) {
    const had = Object.hasOwn(before, key);
    const old = had ? (before[key] as Json) : undefined;
    const slot = name(documentItem.slotAttribute(key));
    if (change.kind === 'remove') {
      // Whatever is there by now: a remove after another's write of the key removes it.
      remove.push(slot);
      continue;
    }
    if (change.kind === 'merge' && documentItem.isMapped(old) && documentItem.isMapped(change.patch)) {
      // Into an object kept as a map: member by member, so merges of other members never collide.
      if (!values[':map']) values[':map'] = 'M';
      checks.push(`attribute_type(${slot}, :map)`);
      for (const [member, memberValue] of Object.entries(change.patch)) {
        set.push(`${slot}.${name(member)} = ${value(documentItem.encodeMember(memberValue))}`);
        const was = Object.hasOwn(old, member) ? documentItem.memberBytes(member, old[member] as Json) : 0;
        growth += Math.max(0, documentItem.memberBytes(member, memberValue) - was);
      }
      continue;
    }
    // Replaced whole: by a set's value, or by the merge of what was read, which must still be there.
    const next = change.kind === 'set' ? change.value : (write.next[key] as Json);
    if (change.kind === 'merge') {
      const storedSlot = stored?.[documentItem.slotAttribute(key)];
      if (!had) checks.push(`attribute_not_exists(${slot})`);
      else if (typeof storedSlot === 'string') checks.push(`${slot} = ${value(storedSlot)}`);
      else return null;
    }
    set.push(`${slot} = ${value(documentItem.encodeSlot(next))}`);
    growth += Math.max(0, documentItem.slotBytes(key, next) - (had ? documentItem.slotBytes(key, old as Json) : 0));
  }
  // The bound after this write must leave the document's JSON (the sum plus its braces) within the limit.
  const room = DOCUMENT_LIMIT_BYTES - 2 - growth;
  if (room < 0 || (stored && Number(stored[documentItem.BYTES_ATTRIBUTE]) > room)) return null;
  values[':room'] = room;
  values[':growth'] = growth;
  const update = `SET ${set.join(', ')}${remove.length > 0 ? ` REMOVE ${remove.join(', ')}` : ''} ADD #version :one, #bytes :growth`;
  // No bound yet: no document, or a profile's fence alone (document-item.ts).
  const condition = [
    '(attribute_not_exists(#bytes) OR #bytes <= :room)',
    '(attribute_not_exists(#writeId) OR #writeId <> :writeId)',
    ...checks,
  ];
  if (write.fence !== undefined) condition.push(fenceCondition(write.fence, names, values));
  const conditionText = condition.join(' AND ');
  if (update.length > MAX_EXPRESSION_CHARS || conditionText.length > MAX_EXPRESSION_CHARS) return null;
  return {
    UpdateExpression: update,
    ConditionExpression: conditionText,
    ExpressionAttributeNames: names,
    ExpressionAttributeValues: values,
  };
}

/**
 * The write of one document a commit of `scope` made: a new document may take the place of
 * one that expired (TTL deletes lazily), any other only of the very version it was read at.
 */
export function documentPut(table: TableClient, scope: SessionScope, write: DocumentWrite): TaggedItem {
  const { record } = write;
  const nowSeconds = table.nowSeconds();
  const ref = documentRefOf(scope, record);
  const item = {
    ...documentItem.encode(
      ref,
      record,
      { sessionId: scope.sessionId, author: write.author },
      write.ttlSeconds ? nowSeconds + write.ttlSeconds : undefined,
    ),
    ...freshFence(ref),
  };
  return {
    role: 'document',
    item: {
      Put: {
        TableName: table.tableName,
        Item: item,
        // New: no document there (a profile's fence alone may be), or an expired run.
        ...(write.basedOnVersion === 0
          ? {
              ConditionExpression: 'attribute_not_exists(#version) OR #ttl < :now',
              ExpressionAttributeNames: { '#version': 'version', '#ttl': tableKeys.timeToLive },
              ExpressionAttributeValues: { ':now': nowSeconds },
            }
          : { ConditionExpression: 'version = :basedOn', ExpressionAttributeValues: { ':basedOn': write.basedOnVersion } }),
      },
    },
  };
}

/**
 * The move of `userId`'s profile fence that a `PATCH` giving one of their sessions to another
 * user carries in its transaction: a keyed profile commit that read the fence before it then
 * reads again, and finds the session's new user (commit-service.ts). Makes an item of the fence
 * alone when the user has no profile (document-item.ts: no document).
 */
export function profileFenceMove(table: TableClient, tenant: string, userId: string): TaggedItem {
  return {
    role: 'document',
    item: {
      Update: {
        TableName: table.tableName,
        Key: documentItem.key({ kind: 'profile', tenant, id: userId }),
        UpdateExpression: 'SET #fence = :fence',
        ExpressionAttributeNames: { '#fence': documentItem.FENCE_ATTRIBUTE },
        ExpressionAttributeValues: { ':fence': randomUUID() },
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
