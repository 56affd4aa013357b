import type { AttributeValue, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import { DynamoDBDocumentClient, GetCommand } from '@aws-sdk/lib-dynamodb';
import type { DynamoDBRecord } from 'aws-lambda';
import type { VersionStateReader } from '../core/change-fanout.js';
import type { RecordedChange, RecordedDocument, RecordedVersion } from '../core/events.js';
import type { Json } from '../core/json.js';
import { VERSION_CAUSES, type DocumentKind, type VersionCause } from '../core/model.js';
import { keys } from './keys.js';

/**
 * The table's change stream, read as recorded versions. Only this file (with keys.ts and the
 * store) knows what a version item looks like:
 *
 *   pk S#<tenant>#<session>   sk V#<000000000042>   kind 'v'   version, node, prevVersion,
 *   cause, author, decisionId, createdAt, state (JSON text), agent (JSON text),
 *   agentId (the session's agent, when it has one), touchedAt (equal to createdAt when the
 *   write moved the session's activity itself), …
 *
 * A version arrives as an INSERT, or as a MODIFY of its slot when a head marker (kind 'm')
 * held the slot before. Nothing ever modifies a recorded version, so a MODIFY whose old image
 * is a version is not a new version; and REMOVE (session deletes, TTL) never is.
 *
 * And what a commit's document item looks like (kind 'doc:run' | 'doc:profile' | 'doc:shared'):
 *
 *   pk S#<tenant>#<session>  sk R#<run>     (run)
 *   pk P#<tenant>#<user>     sk P           (profile)
 *   pk G#<tenant>            sk G           (shared)
 *   version, state (JSON text), updatedAt, sessionId (whose commit wrote it), author, ttl (runs)
 *
 * A document is written whole, and only when its state changed, so every INSERT or MODIFY of
 * one is a new version; the old image holds the version before it.
 */

const DOCUMENT_ITEM_KINDS: Record<string, DocumentKind> = { 'doc:run': 'run', 'doc:profile': 'profile', 'doc:shared': 'shared' };

/**
 * Lambda event filter patterns (OR'ed) that let through exactly the records that record a
 * version (of a thread or of a document), so no other write to the table invokes the change
 * hook. lib/ puts them on the event source mapping; the local stream poller applies the same
 * patterns with `matchesFilter`.
 */
export const changeRecordFilters: ReadonlyArray<Record<string, unknown>> = [
  { eventName: ['INSERT'], dynamodb: { NewImage: { kind: { S: ['v'] } } } },
  { eventName: ['MODIFY'], dynamodb: { NewImage: { kind: { S: ['v'] } }, OldImage: { kind: { S: ['m'] } } } },
  { eventName: ['INSERT', 'MODIFY'], dynamodb: { NewImage: { kind: { S: Object.keys(DOCUMENT_ITEM_KINDS) } } } },
];

/**
 * Whether a record matches an event filter pattern of the kind above: every leaf is a list of
 * allowed strings, and every key of the pattern must be present in the record. (The subset of
 * Lambda's filter syntax that `changeRecordFilters` uses.)
 */
export function matchesFilter(pattern: unknown, value: unknown): boolean {
  if (Array.isArray(pattern)) return pattern.some((allowed) => allowed === value);
  if (pattern === null || typeof pattern !== 'object') return false;
  if (value === null || typeof value !== 'object') return false;
  return Object.entries(pattern).every(([key, inner]) => matchesFilter(inner, (value as Record<string, unknown>)[key]));
}

type LambdaImage = NonNullable<NonNullable<DynamoDBRecord['dynamodb']>['NewImage']>;

/** The thread or document version a stream record carries, or null when it carries none. */
export function recordedChangeOf(record: DynamoDBRecord): RecordedChange | null {
  return recordedVersionOf(record) ?? recordedDocumentOf(record);
}

/** The document version a stream record carries, or null when it carries none. */
export function recordedDocumentOf(record: DynamoDBRecord): RecordedDocument | null {
  const newImage = record.dynamodb?.NewImage;
  if (record.eventName !== 'INSERT' && record.eventName !== 'MODIFY') return null;
  const kind = newImage?.kind?.S === undefined ? undefined : DOCUMENT_ITEM_KINDS[newImage.kind.S];
  if (!newImage || !kind) return null;

  const item = unmarshall(toSdkImage(newImage));
  const old = record.dynamodb?.OldImage ? unmarshall(toSdkImage(record.dynamodb.OldImage)) : null;
  const pk = String(item.pk ?? '');
  const sk = String(item.sk ?? '');
  const owner = documentOwner(kind, pk, sk);
  if (!owner) return null;
  const version = Number(item.version);
  // Documents written before they recorded their session carry none; a run's is in its key.
  const sessionId = typeof item.sessionId === 'string' ? item.sessionId : (owner.sessionId ?? '');
  return {
    tenant: owner.tenant,
    document: {
      kind,
      id: owner.id,
      sessionId,
      version,
      state: parseJsonText(item.state),
      // An expired run overwritten by a new one starts again at 1: its old image is not its past.
      prevState: old && Number(old.version) === version - 1 ? parseJsonText(old.state) : null,
      author: typeof item.author === 'string' ? item.author : null,
      createdAt: String(item.updatedAt),
    },
  };
}

function documentOwner(kind: DocumentKind, pk: string, sk: string): { tenant: string; id: string; sessionId?: string } | null {
  switch (kind) {
    case 'run': {
      const partition = /^S#([^#]+)#([^#]+)$/.exec(pk);
      const id = sk.startsWith(keys.run('')) ? sk.slice(keys.run('').length) : '';
      return partition && id ? { tenant: partition[1] as string, sessionId: partition[2] as string, id } : null;
    }
    case 'profile': {
      const partition = /^P#([^#]+)#([^#]+)$/.exec(pk);
      return partition && sk === keys.profileSort ? { tenant: partition[1] as string, id: partition[2] as string } : null;
    }
    case 'shared': {
      const partition = /^G#([^#]+)$/.exec(pk);
      return partition && sk === keys.sharedSort ? { tenant: partition[1] as string, id: 'shared' } : null;
    }
  }
}

/** The recorded version a stream record carries, or null when it carries none. */
export function recordedVersionOf(record: DynamoDBRecord): RecordedVersion | null {
  const newImage = record.dynamodb?.NewImage;
  const oldImage = record.dynamodb?.OldImage;
  if (!newImage || newImage.kind?.S !== 'v') return null;
  if (record.eventName === 'MODIFY' ? oldImage?.kind?.S !== 'm' : record.eventName !== 'INSERT') return null;

  const item = unmarshall(toSdkImage(newImage));
  const pk = String(item.pk ?? '');
  const sk = String(item.sk ?? '');
  const partition = /^S#([^#]+)#([^#]+)$/.exec(pk);
  if (!partition || !sk.startsWith(keys.slotPrefix)) return null;
  const cause = String(item.cause);
  return {
    tenant: partition[1] as string,
    sessionId: partition[2] as string,
    version: {
      version: Number(item.version),
      node: String(item.node),
      prevVersion: Number(item.prevVersion ?? 0),
      cause: (VERSION_CAUSES as readonly string[]).includes(cause) ? (cause as VersionCause) : 'patch',
      author: typeof item.author === 'string' ? item.author : null,
      decisionId: typeof item.decisionId === 'string' ? item.decisionId : null,
      createdAt: String(item.createdAt),
      state: parseJsonText(item.state),
      agent: parseJsonText(item.agent),
      // Whose typed fields the state holds: agent-filtered events are cut by them.
      ...(typeof item.agentId === 'string' ? { sessionAgentId: item.agentId } : {}),
    },
    // A write that moved the session's activity itself stamped its tip with the same time.
    activityMoved: typeof item.touchedAt === 'string' && item.touchedAt === item.createdAt,
  };
}

/** The state of one version: one strongly consistent GetItem of its slot. */
export function versionStateReader(client: DynamoDBClient, tableName: string): VersionStateReader {
  const doc = DynamoDBDocumentClient.from(client);
  return async (scope, version) => {
    const { Item } = await doc.send(
      new GetCommand({
        TableName: tableName,
        Key: { pk: keys.session(scope), sk: keys.slot(version) },
        ProjectionExpression: '#kind, #state',
        ExpressionAttributeNames: { '#kind': 'kind', '#state': 'state' },
        // The previous version may have been written milliseconds before this one.
        ConsistentRead: true,
      }),
    );
    return Item && Item.kind === 'v' ? { state: parseJsonText(Item.state) } : null;
  };
}

function parseJsonText(value: unknown): Json {
  return typeof value === 'string' ? (JSON.parse(value) as Json) : null;
}

/**
 * Lambda hands images over as JSON, with binary values in base64; the SDK's `unmarshall`
 * wants bytes. (Version items hold no binary values today; this keeps the parse total.)
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
