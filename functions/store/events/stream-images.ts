import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import type { DynamoDBRecord } from 'aws-lambda';
import type { RecordedChange, RecordedDocument, RecordedErasure, RecordedExpiry, RecordedVersion } from '../../core/events/events.js';
import { lifetimeOf } from '../../core/model/lifetime.js';
import * as documentItem from '../documents/document-item.js';
import { type LogEntry, OPENS_COPY, OPENS_COPY_ATTRIBUTE, readLogItem, versionOf } from '../log/log-items.js';
import { memoryRecordFilters } from '../memory/memory-stream.js';
import * as sessionItem from '../sessions/session-item.js';
import {
  DOCUMENT_ITEM_KIND,
  documentKindOf,
  ERASURE_ITEM_KIND,
  FENCE_CAUSE_EXPIRED,
  FENCE_HANDED_OFF,
  FENCE_HANDED_OFF_ATTRIBUTE,
  KIND_ATTRIBUTE,
  LOG_ITEM_KIND,
} from '../table/item-kinds.js';
import { lifePrefix, logPositionOf, session, sessionSort } from '../table/keys.js';
import { queryAll } from '../table/paging.js';
import type { TableClient } from '../table/table-client.js';

/**
 * The table's change stream, read as recorded versions, through the same codecs the stores
 * write with (item-codecs.ts):
 *
 *   pk S#<tenant>#<session>   sk V#<life>#<base>#<seq>   kind v   version, node, prevVersion,
 *   cause, author, decisionId, createdAt, state (state-codec.ts), agent (JSON text), and `t`
 *   (log-items.ts), which carries the session's agent and `ta`, equal to createdAt when the
 *   write found the session's activity due to move (the change hook moves it)
 *
 * A version arrives as an INSERT, always: a change of the log is never overwritten, but by a
 * delete, which makes it a tombstone (a MODIFY to kind x); and REMOVE (TTL) never is one.
 *
 * And what a commit's document item looks like (its kind one of DOCUMENT_ITEM_KIND):
 *
 *   pk S#<tenant>#<session>  sk R#<run>     (run)
 *   pk P#<tenant>#<user>     sk P           (profile)
 *   pk A#<tenant>            sk G           (shared, beside the agents)
 *   version, state (JSON text), updatedAt, sessionId (whose commit wrote it), author, ttl (runs)
 *
 * A document is written whole, and only when its state changed, so every INSERT or MODIFY of
 * one is a new version; the old image holds the version before it.
 */

/** Who a DynamoDB TTL deletion is made by, in its stream record. */
const TTL_PRINCIPAL = 'dynamodb.amazonaws.com';

/**
 * Lambda event filter patterns (OR'ed) that let through exactly the records that record a
 * version (of a thread or of a document), so no other write to the table invokes the change
 * hook; memory items have patterns of their own (memory-stream.ts). lib/ puts them on the event source mapping; the local stream poller applies the same
 * patterns with `matchesStreamFilter`.
 */
export const changeRecordFilters: ReadonlyArray<Record<string, unknown>> = [
  { eventName: ['INSERT'], dynamodb: { NewImage: { kind: { S: [LOG_ITEM_KIND.version] } } } },
  // The fence of a delete that carried out an expiry: the `session.expired` event.
  { eventName: ['INSERT'], dynamodb: { NewImage: { kind: { S: [LOG_ITEM_KIND.tombstone] }, cause: { S: [FENCE_CAUSE_EXPIRED] } } } },
  // A delete's erase that did not fit its request: the change hook goes on with it (session-delete.ts).
  {
    eventName: ['MODIFY'],
    dynamodb: {
      NewImage: {
        kind: { S: [LOG_ITEM_KIND.tombstone] },
        fence: { S: ['closing'] },
        [FENCE_HANDED_OFF_ATTRIBUTE]: { S: [FENCE_HANDED_OFF] },
      },
    },
  },
  // The change that opens a copy's session (one of its own, or the copy's last append): it releases the copy's versions' events.
  {
    eventName: ['INSERT'],
    dynamodb: { NewImage: { kind: { S: [LOG_ITEM_KIND.settings, LOG_ITEM_KIND.nodes] }, [OPENS_COPY_ATTRIBUTE]: { S: [OPENS_COPY] } } },
  },
  // TTL removed a session's item: the change hook sweeps what is left of it (API.md section 12).
  {
    eventName: ['REMOVE'],
    userIdentity: { type: ['Service'], principalId: [TTL_PRINCIPAL] },
    dynamodb: { Keys: { sk: { S: [sessionSort] } } },
  },
  { eventName: ['INSERT', 'MODIFY'], dynamodb: { NewImage: { kind: { S: Object.values(DOCUMENT_ITEM_KIND) } } } },
  // A user's erasure under way (each step's write brings the change hook's next) or done (the `user.erased` event).
  {
    eventName: ['INSERT', 'MODIFY'],
    dynamodb: { NewImage: { kind: { S: [ERASURE_ITEM_KIND] }, status: { S: ['closing', 'running', 'done'] } } },
  },
  ...memoryRecordFilters,
];

/**
 * Whether a record matches an event filter pattern of the kind above: every leaf is a list of
 * allowed strings, and every key of the pattern must be present in the record. (The subset of
 * Lambda's filter syntax that `changeRecordFilters` uses.)
 */
export function matchesStreamFilter(pattern: unknown, value: unknown): boolean {
  if (Array.isArray(pattern)) return pattern.some((allowed) => allowed === value);
  if (pattern === null || typeof pattern !== 'object') return false;
  if (value === null || typeof value !== 'object') return false;
  return Object.entries(pattern).every(([key, inner]) => matchesStreamFilter(inner, (value as Record<string, unknown>)[key]));
}

type LambdaImage = NonNullable<NonNullable<DynamoDBRecord['dynamodb']>['NewImage']>;

/** The thread or document version, the session expiry or the erasure done a stream record carries, or null when it carries none. */
export function recordedChangeOf(record: DynamoDBRecord): RecordedChange | null {
  return recordedVersionOf(record) ?? recordedDocumentOf(record) ?? recordedExpiryOf(record) ?? recordedErasureOf(record);
}

/** The erasure an item's change set `running` or `done` (erasure-store.ts), or null. */
function erasureChangeOf(
  record: DynamoDBRecord,
  status: string,
): { tenant: string; erasureId: string; item: Record<string, unknown> } | null {
  const newImage = record.dynamodb?.NewImage;
  if (record.eventName !== 'MODIFY' || newImage?.kind?.S !== ERASURE_ITEM_KIND || newImage.status?.S !== status) return null;
  // Once: the change that set it so (a later change of a running erasure is not its start).
  if (record.dynamodb?.OldImage?.status?.S === status) return null;
  const item = unmarshall(toSdkImage(newImage));
  const partition = /^E#([^#]+)#([^#]+)$/.exec(String(item.pk ?? ''));
  return partition ? { tenant: partition[1] as string, erasureId: partition[2] as string, item } : null;
}

/** An erasure under way (`closing` or `running`): the change hook goes on with it (erasure-finish.ts). */
export function erasureToFinishOf(record: DynamoDBRecord): { tenant: string; erasureId: string } | null {
  const newImage = record.dynamodb?.NewImage;
  if (record.eventName === 'REMOVE' || newImage?.kind?.S !== ERASURE_ITEM_KIND) return null;
  if (newImage.status?.S !== 'closing' && newImage.status?.S !== 'running') return null;
  const partition = /^E#([^#]+)#([^#]+)$/.exec(newImage.pk?.S ?? '');
  return partition ? { tenant: partition[1] as string, erasureId: partition[2] as string } : null;
}

/** An erasure done: the `user.erased` event (its user from the old image: a done erasure keeps no user id). */
function recordedErasureOf(record: DynamoDBRecord): RecordedErasure | null {
  const change = erasureChangeOf(record, 'done');
  const oldImage = record.dynamodb?.OldImage;
  // A tenant's erasure (the admin CLI) is of no user, and sends no event.
  const userId = oldImage && unmarshall(toSdkImage(oldImage)).userId;
  if (!change || typeof userId !== 'string') return null;
  const { item } = change;
  return {
    tenant: change.tenant,
    erasure: {
      erasureId: change.erasureId,
      userId,
      sessions: Number(item.sessions ?? 0),
      memoryItems: Number(item.memoryItems ?? 0),
      documents: Number(item.documents ?? 0),
      occurredAt: String(item.finishedAt ?? ''),
    },
  };
}

/** The session whose delete handed the rest of its erase to the change hook (a fence's change that sets `eh`), or null. */
export function deleteToFinishOf(record: DynamoDBRecord): { tenant: string; sessionId: string } | null {
  const newImage = record.dynamodb?.NewImage;
  if (record.eventName !== 'MODIFY' || newImage?.kind?.S !== LOG_ITEM_KIND.tombstone || newImage.fence?.S !== 'closing') return null;
  if (newImage[FENCE_HANDED_OFF_ATTRIBUTE]?.S !== FENCE_HANDED_OFF) return null;
  const partition = /^S#([^#]+)#([^#]+)$/.exec(newImage.pk?.S ?? '');
  return partition ? { tenant: partition[1] as string, sessionId: partition[2] as string } : null;
}

/** The expiry a delete's fence records (an INSERT of kind x with cause `expired`), or null. */
function recordedExpiryOf(record: DynamoDBRecord): RecordedExpiry | null {
  const newImage = record.dynamodb?.NewImage;
  if (record.eventName !== 'INSERT' || newImage?.kind?.S !== LOG_ITEM_KIND.tombstone || newImage.cause?.S !== FENCE_CAUSE_EXPIRED)
    return null;
  const item = unmarshall(toSdkImage(newImage));
  const partition = /^S#([^#]+)#([^#]+)$/.exec(String(item.pk ?? ''));
  const position = logPositionOf(String(item.sk ?? ''));
  if (!partition || !position) return null;
  return {
    tenant: partition[1] as string,
    sessionId: partition[2] as string,
    expiry: {
      incarnation: position.incarnation,
      version: Number(item.lastVersion ?? 0),
      agentId: typeof item.agentId === 'string' ? item.agentId : null,
      userId: typeof item.userId === 'string' ? item.userId : null,
      expiredAt: String(item.expiredAt),
      occurredAt: String(item.createdAt),
    },
  };
}

/**
 * A session item that DynamoDB's TTL removed (a REMOVE by its service principal): the session
 * it belonged to and when its item said it expired; null for any other record.
 */
export function expiredSessionOf(record: DynamoDBRecord): { tenant: string; sessionId: string; expiredAt: string; unopened?: true } | null {
  if (record.eventName !== 'REMOVE' || record.userIdentity?.principalId !== TTL_PRINCIPAL) return null;
  const keysOf = record.dynamodb?.Keys;
  if (keysOf?.sk?.S !== sessionSort) return null;
  const partition = /^S#([^#]+)#([^#]+)$/.exec(keysOf.pk?.S ?? '');
  if (!partition) return null;
  const expires = Number(record.dynamodb?.OldImage?.[sessionItem.EXPIRES_ATTRIBUTE]?.N);
  return {
    tenant: partition[1] as string,
    sessionId: partition[2] as string,
    expiredAt: new Date(Number.isFinite(expires) ? expires : Date.now()).toISOString(),
    // The item of a copy that never opened its session (session-item.ts `COPY_ATTRIBUTE`): no session expired.
    ...(record.dynamodb?.OldImage?.[sessionItem.COPY_ATTRIBUTE]?.S === undefined ? {} : { unopened: true as const }),
  };
}

/** The document version a stream record carries, or null when it carries none. */
export function recordedDocumentOf(record: DynamoDBRecord): RecordedDocument | null {
  const newImage = record.dynamodb?.NewImage;
  if (record.eventName !== 'INSERT' && record.eventName !== 'MODIFY') return null;
  const kind = documentKindOf(newImage?.kind?.S);
  if (!newImage || !kind) return null;

  const item = unmarshall(toSdkImage(newImage));
  const ref = documentItem.refOf(kind, item);
  if (!ref) return null;
  const document = documentItem.decode(ref, item);
  const origin = documentItem.originOf(item);
  const oldImage = record.dynamodb?.OldImage;
  const old = oldImage ? documentItem.decode(ref, unmarshall(toSdkImage(oldImage))) : null;
  // A `PATCH` that moved the profile's fence alone (document-item.ts) made no version.
  if (old && old.version === document.version && old.updatedAt === document.updatedAt) return null;
  return {
    tenant: ref.kind === 'run' ? ref.scope.tenant : ref.tenant,
    document: {
      kind,
      id: document.id,
      // Documents written before they recorded their session carry none; a run's is in its key.
      sessionId: origin.sessionId ?? (ref.kind === 'run' ? ref.scope.sessionId : ''),
      version: document.version,
      state: document.state,
      // An expired run overwritten by a new one starts again at 1: its old image is not its past.
      prevState: old && old.version === document.version - 1 ? old.state : null,
      author: origin.author,
      createdAt: String(document.updatedAt),
    },
    ...(item[documentItem.ACTIVITY_DUE] !== undefined && item[documentItem.ACTIVITY_DUE] === document.updatedAt
      ? { activityDue: true }
      : {}),
  };
}

/** The recorded version a stream record carries, or null when it carries none. */
export function recordedVersionOf(record: DynamoDBRecord): RecordedVersion | null {
  const newImage = record.dynamodb?.NewImage;
  if (!newImage || newImage.kind?.S !== LOG_ITEM_KIND.version || record.eventName !== 'INSERT') return null;
  return recordedVersionOfItem(unmarshall(toSdkImage(newImage)), { released: false });
}

/**
 * The recorded version of a version's item. A copy's version before it opened its session
 * (session-copy.ts, `Carried.cp`) is none as its INSERT arrives (nobody could read it, and a
 * copy that fails never opens): the change that opens the session releases the copy's
 * versions, in order (`released`: `openedCopyOf`, `releasedVersions`).
 */
function recordedVersionOfItem(item: Record<string, unknown>, options: { released: boolean }): RecordedVersion | null {
  const pk = String(item.pk ?? '');
  const partition = /^S#([^#]+)#([^#]+)$/.exec(pk);
  const position = logPositionOf(String(item.sk ?? ''));
  if (!partition || !position) return null;
  const entry = readLogItem(item) as LogEntry;
  if (entry.carried.cp !== undefined && !options.released) return null;
  // A large state stays in its pieces: an event needs its size and its change, and reads the
  // state itself only when it is small enough to travel (core/fanout/change-fanout.ts).
  const version = versionOf(entry, null);
  return {
    tenant: partition[1] as string,
    sessionId: partition[2] as string,
    incarnation: position.incarnation,
    // An event needs neither the lineage window nor a commit's commands.
    version: {
      version: version.version,
      node: version.node,
      prevVersion: version.prevVersion,
      cause: version.cause,
      author: version.author,
      decisionId: version.decisionId,
      createdAt: version.createdAt,
      state: version.state,
      // A state left in its pieces says how large it is, for the event's size (core/events/events.ts).
      ...(version.stateUnread ? { stateUnread: true, stateBytes: version.stateBytes } : {}),
      // Kept when this state or the one before it is large: the event carries it instead.
      ...(version.change ? { change: version.change } : {}),
      agent: version.agent,
      // Whose typed fields the state holds: agent-filtered events are cut by them.
      ...(version.sessionAgentId == null ? {} : { sessionAgentId: version.sessionAgentId }),
    },
    // A version whose write found the activity due stamped its change with its own time.
    activityDue: entry.carried.ta !== null && entry.carried.ta === version.createdAt,
    ...(entry.carried.lt ? { lifetime: lifetimeOf(entry.carried.lt) } : {}),
    // A follow's mark that still held when the version was made: someone may follow the session.
    ...(entry.carried.f !== undefined && entry.carried.f * 1000 > Date.parse(version.createdAt) ? { followed: true } : {}),
  };
}

/** The change that opened a copy's session (log-writer.ts, `opensCopy`): whose, which life, and its versions' count. */
export interface OpenedCopy {
  readonly tenant: string;
  readonly sessionId: string;
  readonly incarnation: number;
  /** The copy's last version: its versions are 1 to this. */
  readonly version: number;
  /**
   * The opening carries a follow's mark (a subscription made while the copy wrote, live.ts):
   * every version it releases may have a follower, whether or not its own change carried it.
   */
  readonly followed?: true;
}

/**
 * The opening of a copy's session a stream record carries (an INSERT of its opening change: one
 * of nothing else, or the copy's last append, session-copy.ts), or null. A copy's last append
 * opens it only when it records no version, so an opening is never also a version's event.
 */
export function openedCopyOf(record: DynamoDBRecord): OpenedCopy | null {
  const newImage = record.dynamodb?.NewImage;
  const kind = newImage?.kind?.S;
  if (record.eventName !== 'INSERT' || (kind !== LOG_ITEM_KIND.settings && kind !== LOG_ITEM_KIND.nodes)) return null;
  if (newImage?.[OPENS_COPY_ATTRIBUTE]?.S === undefined) return null;
  const item = unmarshall(toSdkImage(newImage));
  const partition = /^S#([^#]+)#([^#]+)$/.exec(String(item.pk ?? ''));
  const position = logPositionOf(String(item.sk ?? ''));
  const entry = readLogItem(item);
  if (!partition || !position || !entry || 'closing' in entry) return null;
  const followed = entry.carried.f !== undefined && entry.carried.f * 1000 > Date.parse(entry.createdAt);
  return {
    tenant: partition[1] as string,
    sessionId: partition[2] as string,
    incarnation: position.incarnation,
    version: entry.carried.v,
    ...(followed ? { followed } : {}),
  };
}

/**
 * The copy's versions an opening releases, as the events they are held back from (in version
 * order): read from the copy's life of the log, which only the copy wrote before the opening.
 */
export async function releasedVersions(table: TableClient, opened: OpenedCopy): Promise<RecordedVersion[]> {
  if (opened.version === 0) return [];
  const released: RecordedVersion[] = [];
  await queryAll(
    (start) =>
      table.send(
        new QueryCommand({
          TableName: table.tableName,
          KeyConditionExpression: 'pk = :pk AND begins_with(sk, :life)',
          FilterExpression: '#kind = :version',
          ExpressionAttributeNames: { '#kind': KIND_ATTRIBUTE },
          ExpressionAttributeValues: {
            ':pk': session(opened),
            ':life': lifePrefix(opened.incarnation),
            ':version': LOG_ITEM_KIND.version,
          },
          ExclusiveStartKey: start,
          ConsistentRead: true,
        }),
      ),
    (item) => {
      const recorded = recordedVersionOfItem(item, { released: true });
      if (recorded && recorded.version.version <= opened.version)
        released.push(opened.followed ? { ...recorded, followed: true } : recorded);
    },
  );
  return released.sort((a, b) => a.version.version - b.version.version);
}

/**
 * Lambda hands images over as JSON, with binary values in base64; the SDK's `unmarshall`
 * wants bytes (a version of a large state names its pieces in binary: `stateP`).
 */
function toSdkImage(image: LambdaImage): Record<string, AttributeValue> {
  return Object.fromEntries(Object.entries(image).map(([name, value]) => [name, toSdkValue(value)]));
}

function toSdkValue(value: LambdaImage[string]): AttributeValue {
  if (value.B !== undefined) return { B: Buffer.from(value.B, 'base64') };
  if (value.BS !== undefined) return { BS: value.BS.map((item) => Buffer.from(item, 'base64')) };
  if (value.M !== undefined) return { M: toSdkImage(value.M) };
  if (value.L !== undefined) return { L: value.L.map(toSdkValue) };
  return value as AttributeValue;
}
