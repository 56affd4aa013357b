import { readFileSync } from 'node:fs';
import { GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { hasSealingKey, useSealingKey } from '../core/sealing.js';
import { dynamoDbClient } from './client.js';
import { defaultTableName } from './table.js';
import { conditions, type Item, isConditionFailure, TableClient } from './table-client.js';

/**
 * Where this deployment's sealing key (core/sealing.ts: secrets at rest, cursors) comes from,
 * found once per process before the first request needs it:
 *
 * - `AGENTSTATE_KEY_FILE` (the local server): 32 bytes, base64, in a file kept under the data
 *   directory with mode 0600 (functions/local/server.ts creates it on first start);
 * - `AGENTSTATE_KMS_KEY_ID` (AWS): envelope encryption. A data key made by KMS
 *   (`GenerateDataKey`, AES-256) is kept in the table only as KMS's ciphertext, in the item
 *   `Z#keyring` / `Z`; each Lambda container asks KMS to decrypt it once (`Decrypt`) and keeps
 *   the plaintext in memory. A table read shows only the wrapped key, which nothing but the
 *   stack's functions may unwrap. The first container that finds no item makes one and puts it
 *   if absent; one that loses that race reads the winner's.
 * - neither, outside Lambda (tests, the benchmark): a random key for this process.
 *
 * Both encryption contexts name the table, so a wrapped key cannot be used for another.
 */

const KEY_RING_KEY = { pk: 'Z#keyring', sk: 'Z' } as const;

let loading: Promise<void> | undefined;

/**
 * Makes sure this process has its sealing key; resolves once it has. With `create: false` (the
 * change hook, which only opens secrets) a deployment without a key yet gets none: then no
 * secret was ever sealed, and the next call looks again.
 */
export function ensureSealingKey(options: { env?: NodeJS.ProcessEnv; create?: boolean } = {}): Promise<void> {
  if (hasSealingKey()) return Promise.resolve();
  const env = options.env ?? process.env;
  loading ??= load(env, options.create ?? true).finally(() => {
    loading = undefined; // loaded (then hasSealingKey), or the next request tries again
  });
  return loading;
}

async function load(env: NodeJS.ProcessEnv, create: boolean): Promise<void> {
  if (env.AGENTSTATE_KEY_FILE) {
    useSealingKey(keyFromText(readFileSync(env.AGENTSTATE_KEY_FILE, 'utf8'), env.AGENTSTATE_KEY_FILE));
    return;
  }
  if (env.AGENTSTATE_KMS_KEY_ID) {
    const table = new TableClient(dynamoDbClient(env), env.AGENTSTATE_TABLE ?? defaultTableName);
    const key = await unwrapDataKey(table, env.AGENTSTATE_KMS_KEY_ID, create);
    if (key) useSealingKey(key);
    return;
  }
  // In a Lambda a made-up key would differ per container: secrets written by one could not be
  // read by another. The stack always sets a KMS key; refuse to run without one.
  if (env.AWS_LAMBDA_FUNCTION_NAME) throw new Error('agentstate: no sealing key: set AGENTSTATE_KMS_KEY_ID (the stack does)');
}

/** 32 bytes from a key file's base64 text. */
export function keyFromText(text: string, where: string): Buffer {
  const key = Buffer.from(text.trim(), 'base64');
  if (key.length !== 32) throw new Error(`agentstate: ${where} does not hold a 32-byte base64 key`);
  return key;
}

type KmsModule = typeof import('@aws-sdk/client-kms');

async function unwrapDataKey(table: TableClient, keyId: string, create: boolean): Promise<Buffer | null> {
  const { KMSClient, DecryptCommand, GenerateDataKeyCommand } = (await import('@aws-sdk/client-kms')) as KmsModule;
  const kms = new KMSClient({});
  const context = { table: table.tableName, purpose: 'agentstate sealing key' };
  const read = async () =>
    (await table.send(new GetCommand({ TableName: table.tableName, Key: KEY_RING_KEY, ConsistentRead: true }))).Item as Item | undefined;

  let item = await read();
  if (!item && !create) return null;
  if (!item) {
    const made = await kms.send(new GenerateDataKeyCommand({ KeyId: keyId, KeySpec: 'AES_256', EncryptionContext: context }));
    try {
      await table.send(
        new PutCommand({
          TableName: table.tableName,
          Item: {
            ...KEY_RING_KEY,
            wrappedKey: Buffer.from(made.CiphertextBlob ?? []).toString('base64'),
            createdAt: new Date().toISOString(),
          },
          ConditionExpression: conditions.itemIsNew,
        }),
      );
      return Buffer.from(made.Plaintext ?? []);
    } catch (error) {
      if (!isConditionFailure(error)) throw error;
      item = await read(); // another container put its key first: that one is the key
    }
  }
  const wrapped = Buffer.from(String(item?.wrappedKey ?? ''), 'base64');
  const { Plaintext } = await kms.send(new DecryptCommand({ CiphertextBlob: wrapped, EncryptionContext: context, KeyId: keyId }));
  return Buffer.from(Plaintext ?? []);
}
