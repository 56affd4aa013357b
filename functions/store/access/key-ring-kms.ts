import { DecryptCommand, GenerateDataKeyCommand, KMSClient } from '@aws-sdk/client-kms';
import { GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { conditions, type Item, isConditionFailure, type TableClient } from '../table/table-client.js';

/**
 * The KMS half of the key ring (key-ring.ts): envelope encryption of the sealing key. Imported
 * on first use, once per container in AWS, so that no cold start reads the KMS client or this.
 */

const KEY_RING_KEY = { pk: 'Z#keyring', sk: 'Z' } as const;

/**
 * The deployment's data key, unwrapped by KMS: the one in the key ring item, or (with `create`)
 * one made now and put if absent; null when there is none and `create` is false.
 */
export async function unwrapDataKey(table: TableClient, keyId: string, create: boolean): Promise<Buffer | null> {
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
