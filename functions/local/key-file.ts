import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { keyFromText } from '../store/access/key-ring.js';

/** The local server's sealing key (core/kernel/sealing.ts) and the file it is kept in. */
export interface LocalKeyFile {
  path: string;
  key: Buffer;
  /** Removes the file when it belongs to in-memory data only (gone with the data). */
  removeIfEphemeral(): void;
}

/** The key file's name under the data directory. */
const KEY_FILE = 'agentstate.key';

/**
 * The key that seals this data directory's secrets: `<dataDir>/agentstate.key`, 32 random
 * bytes in base64, created on first start with mode 0600 (readable by its owner only), and read
 * on every start after. Data in memory gets a key in a fresh private temporary folder, removed
 * when the server stops. Losing the file makes the stored worker and webhook secrets unreadable
 * (register them again); it is kept beside the data, never in the table.
 */
export function localKeyFile(dataDir: string | 'memory'): LocalKeyFile {
  if (dataDir === 'memory') {
    const dir = mkdtempSync(join(tmpdir(), 'agentstate-key-'));
    const path = join(dir, KEY_FILE);
    const key = randomBytes(32);
    writeFileSync(path, `${key.toString('base64')}\n`, { mode: 0o600 });
    return { path, key, removeIfEphemeral: () => rmSync(dir, { recursive: true, force: true }) };
  }
  mkdirSync(dataDir, { recursive: true });
  const path = join(dataDir, KEY_FILE);
  try {
    // `wx`: only if it does not exist yet, so two starts can never write two different keys.
    writeFileSync(path, `${randomBytes(32).toString('base64')}\n`, { mode: 0o600, flag: 'wx' });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  }
  if ((statSync(path).mode & 0o077) !== 0) chmodSync(path, 0o600);
  return { path, key: keyFromText(readFileSync(path, 'utf8'), path), removeIfEphemeral: () => {} };
}
