import { createHash, randomBytes } from 'node:crypto';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { GetCommand, PutCommand, QueryCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { isValidId, isValidTenantId, TENANT_ID_RULE } from '../../core/kernel/ids.js';
import { tableKeys } from '../table/table.js';
import { TableClient } from '../table/table-client.js';
import { apiKeyItems, keyIsLive } from './key-items.js';

export { apiKeyItems } from './key-items.js';

/** Every key starts with this, so a leaked one is easy to recognise (and to scan for). */
export const API_KEY_PREFIX = 'as_';
/** Longest bearer token worth a lookup: ours are 46 characters. */
const MAX_KEY_LENGTH = 256;

/** An API key as the admin sees it: never the key, never its hash. */
export interface ApiKey {
  /** Short public id, for listing and revoking. */
  keyId: string;
  tenant: string;
  /** The agents the key may act as (`X-Agent-Id`); null when it may act as any. */
  agents: string[] | null;
  createdAt: string;
  revokedAt: string | null;
}

/** What a valid key grants: the caller's tenant and, when limited, its agents. */
export interface KeyGrant {
  tenant: string;
  agents: string[] | null;
}

/** A new key: `as_` + 32 random bytes, base64url (256 bits of entropy). */
function generateApiKey(): string {
  return API_KEY_PREFIX + randomBytes(32).toString('base64url');
}

/** The lookup hash of a key. Keys are random, so a plain (unsalted) SHA-256 is enough. */
export function hashApiKey(apiKey: string): string {
  return createHash('sha256').update(apiKey, 'utf8').digest('hex');
}

export class ApiKeyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ApiKeyError';
  }
}

type Item = Record<string, unknown>;

/**
 * API keys of the deployed service (the local server reads `AGENTSTATE_API_KEYS` instead).
 * Only the SHA-256 of a key is stored; the key itself is shown once, when it is created.
 *
 *   pk                   sk   attributes
 *   K#<sha256 hex>       K    keyId, tenant, agents?, createdAt, revokedAt?
 *   (index) KEYS         <createdAt>#<keyId>     every key, newest first, for `keys list`
 *
 * The authorizer resolves a key with one GetItem on its hash. Listing and revoking (admin
 * CLI only) query the one `KEYS` partition of the sessions index: no Scan, and key items
 * cannot show up in a tenant's session list (those partitions are `T#<tenant>`).
 */
export class ApiKeyStore {
  /**
   * Through the table client like every store, so that a throttled or unreachable DynamoDB is
   * `429 throttled` / `503 unavailable` for a key looked up locally, not a bare 500. (The
   * Lambda authorizer rethrows either way: API Gateway answers 500 and caches nothing.)
   */
  private readonly table: TableClient;

  constructor(
    client: DynamoDBClient,
    private readonly tableName: string,
    private readonly now: () => Date = () => new Date(),
  ) {
    this.table = new TableClient(client, tableName, () => now().getTime());
  }

  /** Issues a key for a tenant; the returned `apiKey` is the only copy there will ever be. */
  async create(input: { tenant: string; agents?: readonly string[] | null }): Promise<{ apiKey: string; key: ApiKey }> {
    if (!isValidTenantId(input.tenant)) {
      throw new ApiKeyError(`tenant "${input.tenant}" is not a valid tenant id (${TENANT_ID_RULE})`);
    }
    // An empty list limits to nothing, and a stored empty list reads as any agent: refused.
    if (input.agents?.length === 0) throw new ApiKeyError('a key limited to agents needs at least one agent');
    const agents = input.agents ? [...new Set(input.agents)] : null;
    for (const agent of agents ?? []) {
      if (!isValidId(agent)) throw new ApiKeyError(`agent "${agent}" is not a valid id`);
    }
    const apiKey = generateApiKey();
    const key: ApiKey = {
      keyId: randomBytes(6).toString('hex'),
      tenant: input.tenant,
      agents,
      createdAt: this.now().toISOString(),
      revokedAt: null,
    };
    const index = tableKeys.keysIndex;
    await this.table.send(
      new PutCommand({
        TableName: this.tableName,
        Item: {
          [tableKeys.partitionKey]: apiKeyItems.key(hashApiKey(apiKey)),
          [tableKeys.sortKey]: apiKeyItems.keySort,
          [index.partitionKey]: apiKeyItems.listing,
          [index.sortKey]: apiKeyItems.listingSort(key.createdAt, key.keyId),
          keyId: key.keyId,
          tenant: key.tenant,
          agents: agents ?? undefined,
          createdAt: key.createdAt,
        },
        // 256 random bits never collide; the condition only makes that an error, not an overwrite.
        ConditionExpression: 'attribute_not_exists(#pk)',
        ExpressionAttributeNames: { '#pk': tableKeys.partitionKey },
      }),
    );
    return { apiKey, key };
  }

  /**
   * The grant of a key, or null when the key was never issued or has been revoked. Read
   * consistently: an eventually consistent read just after `revoke` answered may still see the
   * key live, and the authorizer would then cache that grant for its whole TTL, so the bound on
   * how long a revoked key works would be the TTL plus that lag instead of the TTL (locally, where
   * every request looks its key up, zero). The item is small: one read unit, not a half.
   */
  async resolve(apiKey: string): Promise<KeyGrant | null> {
    if (apiKey.length === 0 || apiKey.length > MAX_KEY_LENGTH) return null;
    const { Item } = await this.table.send(
      new GetCommand({
        TableName: this.tableName,
        Key: { [tableKeys.partitionKey]: apiKeyItems.key(hashApiKey(apiKey)), [tableKeys.sortKey]: apiKeyItems.keySort },
        ConsistentRead: true,
      }),
    );
    if (!Item || typeof Item.revokedAt === 'string' || typeof Item.tenant !== 'string') return null;
    return { tenant: Item.tenant, agents: agentsOf(Item) };
  }

  /** Whether the key of this hash is issued and not revoked (key-items.ts, `keyIsLive`). */
  isLive(keyHash: string): Promise<boolean> {
    return keyIsLive(this.table, keyHash);
  }

  /** Every key, newest first, optionally of one tenant only. */
  async list(options: { tenant?: string } = {}): Promise<ApiKey[]> {
    return (await this.listItems(options.tenant)).map(toApiKey);
  }

  /**
   * Revokes a key by its public id; revoking twice keeps the first time. Returns the key, or
   * null when no key has that id. The authorizer caches answers, so a revoked key may work
   * for up to the authorizer's cache TTL (5 minutes by default) after this returns.
   */
  async revoke(keyId: string): Promise<ApiKey | null> {
    const matches = (await this.listItems()).filter((item) => item.keyId === keyId);
    if (matches.length === 0) return null;
    if (matches.length > 1) throw new ApiKeyError(`${matches.length} keys have the id ${keyId}; refusing to guess`);
    const item = matches[0] as Item;
    const { Attributes } = await this.table.send(
      new UpdateCommand({
        TableName: this.tableName,
        // The index projects every attribute, so the listing entry carries the item's own key.
        Key: { [tableKeys.partitionKey]: item[tableKeys.partitionKey], [tableKeys.sortKey]: item[tableKeys.sortKey] },
        UpdateExpression: 'SET revokedAt = if_not_exists(revokedAt, :now)',
        ConditionExpression: 'attribute_exists(#pk)',
        ExpressionAttributeNames: { '#pk': tableKeys.partitionKey },
        ExpressionAttributeValues: { ':now': this.now().toISOString() },
        ReturnValues: 'ALL_NEW',
      }),
    );
    return toApiKey(Attributes ?? item);
  }

  /** The `KEYS` partition of the index, newest first. Admin-sized: one partition, paged. */
  private async listItems(tenant?: string): Promise<Item[]> {
    const index = tableKeys.keysIndex;
    const items: Item[] = [];
    let cursor: Item | undefined;
    do {
      const page = await this.table.send(
        new QueryCommand({
          TableName: this.tableName,
          IndexName: index.name,
          KeyConditionExpression: '#gpk = :listing',
          ExpressionAttributeNames: { '#gpk': index.partitionKey, ...(tenant ? { '#tenant': 'tenant' } : {}) },
          ExpressionAttributeValues: { ':listing': apiKeyItems.listing, ...(tenant ? { ':tenant': tenant } : {}) },
          ...(tenant ? { FilterExpression: '#tenant = :tenant' } : {}),
          ScanIndexForward: false,
          ExclusiveStartKey: cursor,
        }),
      );
      items.push(...(page.Items ?? []));
      cursor = page.LastEvaluatedKey;
    } while (cursor);
    return items;
  }
}

function agentsOf(item: Item): string[] | null {
  return Array.isArray(item.agents) && item.agents.length > 0 ? item.agents.map(String) : null;
}

function toApiKey(item: Item): ApiKey {
  return {
    keyId: String(item.keyId),
    tenant: String(item.tenant),
    agents: agentsOf(item),
    createdAt: String(item.createdAt),
    revokedAt: typeof item.revokedAt === 'string' ? item.revokedAt : null,
  };
}
