import { readFileSync } from 'node:fs';
import { hasSealingKey, useSealingKey } from '../../core/kernel/sealing.js';
import { dynamoDbClient } from '../table/client.js';
import { defaultTableName } from '../table/table.js';
import { TableClient } from '../table/table-client.js';

/**
 * Where this deployment's sealing key (core/kernel/sealing.ts: secrets at rest, cursors) comes from,
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
    // The KMS client and what calls it are a chunk of their own: they run once per container.
    const { unwrapDataKey } = await import('./key-ring-kms.js');
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
