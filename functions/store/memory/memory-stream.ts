import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import type { DynamoDBRecord } from 'aws-lambda';
import type { MemoryItem } from '../../core/memory/memory.js';
import type { RecordedMemoryChange } from '../../core/memory/memory-changes.js';
import { MEMORY_ITEM_KIND } from '../table/item-kinds.js';
import * as keys from '../table/keys.js';
import type { Item } from '../table/table-client.js';
import { floatsOf, memoryItem, namespaceOfPartition } from './memory-codecs.js';

/**
 * The stream records of memory items (memory-codecs.ts), as changes:
 *
 *   INSERT or MODIFY, new image kind mem           a put (the old image: what it replaced)
 *   MODIFY, new image kind mem:deleted             a delete (the old image: the item deleted)
 *   REMOVE, old image kind mem or mem:deleted      DynamoDB's TTL (DynamoDB Local names the
 *                                                  event UNKNOWN_TO_SDK_VERSION); a delete
 *                                                  never removes, it leaves a tombstone
 */

const kinds = Object.values(MEMORY_ITEM_KIND);

/** Lambda event filter patterns (OR'ed with the others of stream-images.ts) for memory records. */
export const memoryRecordFilters: ReadonlyArray<Record<string, unknown>> = [
  { eventName: ['INSERT', 'MODIFY'], dynamodb: { NewImage: { kind: { S: kinds } } } },
  { eventName: ['REMOVE', 'UNKNOWN_TO_SDK_VERSION'], dynamodb: { OldImage: { kind: { S: kinds } } } },
];

type LambdaImage = NonNullable<NonNullable<DynamoDBRecord['dynamodb']>['NewImage']>;

function imageOf(image: LambdaImage | undefined): Item | null {
  return image ? unmarshall(image as Record<string, AttributeValue>) : null;
}

/**
 * The embedding (`ve`) of an image as its floats. Lambda's JSON images carry a binary attribute
 * as base64 text, which `unmarshall` leaves as it is; a record read with the SDK carries bytes.
 */
function embeddingOf(image: Item | null): Float32Array | null {
  const stored = image?.ve;
  // Copied out of Buffer's shared pool: `floatsOf` reads the whole buffer it is given.
  if (typeof stored === 'string') return floatsOf(new Uint8Array(Buffer.from(stored, 'base64')));
  return stored instanceof Uint8Array ? floatsOf(stored) : null;
}

function itemOf(image: Item | null): MemoryItem | null {
  return image?.kind === MEMORY_ITEM_KIND.item ? memoryItem.decode(image) : null;
}

/** The memory change a stream record carries, or null when it is not one. */
export function recordedMemoryChangeOf(record: DynamoDBRecord): RecordedMemoryChange | null {
  const newImage = imageOf(record.dynamodb?.NewImage);
  const oldImage = imageOf(record.dynamodb?.OldImage);
  const image = newImage ?? oldImage;
  if (!image || !kinds.includes(String(image.kind) as (typeof kinds)[number])) return null;
  const place = namespaceOfPartition(image.pk);
  if (!place) return null;
  const key = String(image.sk).slice(keys.memoryKeyPrefix.length);
  const old = itemOf(oldImage);
  const author = typeof newImage?.author === 'string' ? newImage.author : null;
  const embeddings = {
    next: newImage?.kind === MEMORY_ITEM_KIND.item ? embeddingOf(newImage) : null,
    old: old ? embeddingOf(oldImage) : null,
  };
  const base = { tenant: place.tenant, namespace: place.namespace, key, old, author, embeddings };
  const isRemove = record.eventName !== 'INSERT' && record.eventName !== 'MODIFY';
  if (isRemove || !newImage) return { ...base, kind: 'removed', next: null, author: null, occurredAt: new Date().toISOString() };
  if (newImage.kind === MEMORY_ITEM_KIND.deleted) {
    return { ...base, kind: 'delete', next: null, occurredAt: String(newImage.deletedAt ?? '') };
  }
  const next = memoryItem.decode(newImage);
  return { ...base, kind: 'put', next, occurredAt: next.updatedAt };
}
