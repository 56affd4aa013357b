import { ScanCommand } from '@aws-sdk/lib-dynamodb';
import type { ErasureRecord } from '../../core/erasure/erasure.js';
import * as keys from '../table/keys.js';
import { batchDelete, type Item } from '../table/table-client.js';
import { ErasureFinisher } from './erasure-finish.js';

/**
 * The erasure of a whole tenant (the admin CLI's `agentstate tenants erase`, with the
 * operator's own credentials, never a Lambda's): the same two steps as a user's erasure over
 * the tenant's list of sessions and every memory namespace of the tenant (erasure-store.ts,
 * erasure-finish.ts), so that nothing is readable once the first is done and nothing is stored
 * once the second is; then what no list names: the registry and the shared document, webhooks
 * and their dead letters, profiles of users who have no session left, `Idempotency-Key`
 * answers, live followers, other erasures' records. Those are found by the project's one Scan,
 * which reads the whole table: an operator's once-off, not a request path.
 *
 * What stays: the fences and tombstones of erased sessions (no content; a fence keeps a
 * straggler write from reusing a life) and the tenant's API keys (`agentstate keys revoke`).
 */

/** Partitions of a tenant that no list names (keys.ts), erased whole. */
const UNLISTED = (tenant: string): string[] => [
  keys.profile(tenant, ''),
  keys.agents(tenant),
  keys.webhooks(tenant),
  keys.deadLetters(tenant, ''),
  keys.idempotency(tenant, ''),
  keys.subscribers({ tenant, sessionId: '' }),
  keys.namespaceFollowers(tenant, []),
  keys.memoryNamespace(tenant, []),
  keys.memoryHistory(tenant, [], '').slice(0, -1),
  keys.memoryNamespaces(tenant),
  keys.erasure(tenant, ''),
];

export class TenantEraser extends ErasureFinisher {
  /** Erases the tenant's data; the erasure's record and how many unlisted items went. */
  async eraseTenant(tenant: string): Promise<{ erasure: ErasureRecord; unlisted: number }> {
    const erasureId = crypto.randomUUID();
    await this.open(tenant, erasureId, null, new Date(this.table.now()).toISOString());
    // Both steps here, to the end (a change hook reading the same table may run steps beside these: each counts once).
    await this.finish(tenant, erasureId, Number.POSITIVE_INFINITY, 'done', 'cli');
    const { profiles, unlisted } = await this.eraseUnlisted(tenant, keys.erasure(tenant, erasureId));
    const erasure = await this.get(tenant, erasureId);
    if (!erasure) throw new Error(`the erasure ${erasureId} of tenant ${tenant} is missing`);
    // Every profile of the tenant, found by the Scan (no list names them all).
    return { erasure: { ...erasure, documents: erasure.documents + profiles }, unlisted };
  }

  /** Erases what no list names; how many profiles, and how many other items. */
  private async eraseUnlisted(tenant: string, keep: string): Promise<{ profiles: number; unlisted: number }> {
    const prefixes = UNLISTED(tenant);
    const doomed: Item[] = [];
    let start: Item | undefined;
    do {
      const page = await this.table.send(
        new ScanCommand({
          TableName: this.table.tableName,
          FilterExpression: prefixes.map((_, index) => `begins_with(pk, :p${index})`).join(' OR '),
          ExpressionAttributeValues: Object.fromEntries(prefixes.map((prefix, index) => [`:p${index}`, prefix])),
          // A profile item without a version is a fence alone (document-item.ts): erased, not counted.
          ProjectionExpression: 'pk, sk, version',
          ExclusiveStartKey: start,
        }),
      );
      for (const item of page.Items ?? []) {
        const pk = String(item.pk);
        // Of this tenant alone (`A#acme` begins `A#acme2`'s key too), and not this erasure's record.
        const ours =
          pk === keys.agents(tenant) ||
          pk === keys.webhooks(tenant) ||
          pk === keys.memoryNamespaces(tenant) ||
          pk.startsWith(`${pk.split('#')[0]}#${tenant}#`);
        if (ours && pk !== keep)
          doomed.push({ pk: item.pk, sk: item.sk, ...(item.version === undefined ? {} : { version: item.version }) });
      }
      start = page.LastEvaluatedKey;
    } while (start);
    await batchDelete(
      this.table,
      doomed.map((item) => ({ pk: item.pk, sk: item.sk })),
    );
    const profiles = doomed.filter((item) => String(item.pk).startsWith(keys.profile(tenant, ''))).length;
    const documents = doomed.filter((item) => String(item.pk).startsWith(keys.profile(tenant, '')) && item.version !== undefined).length;
    return { profiles: documents, unlisted: doomed.length - profiles };
  }
}
