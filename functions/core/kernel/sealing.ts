import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';
import { AgentStateError } from './errors.js';

/**
 * Sealing with the service's own key (AES-256-GCM: confidential and tamper-evident), for the
 * two things a table read or a client must not see through:
 *
 * - **secrets at rest** (worker and webhook secrets): stored as `enc:v1:<base64>`, bound to
 *   the item they belong to, so a raw read of the table reveals none of them;
 * - **list cursors**: opaque (`<base64url>`, no keys, no tenant inside) and bound to the list
 *   that issued them, so a cursor from another list, tenant or hand is `400 invalid_request`.
 *
 * One master key per deployment, set once per process by `useSealingKey` (store/access/key-ring.ts
 * finds it: a key file locally, a KMS-wrapped data key in AWS); each use gets a key of its
 * own derived with HKDF. A process that was given none (a test, the benchmark) makes a random
 * one, good for its own lifetime only.
 */

const SECRET_PREFIX = 'enc:v1:';
const IV_BYTES = 12;
const TAG_BYTES = 16;

let master: Buffer | undefined;
const derived = new Map<string, Buffer>();

/** Sets this process's master key (32 bytes). */
export function useSealingKey(key: Buffer): void {
  if (key.length !== 32) throw new Error(`the sealing key must be 32 bytes, not ${key.length}`);
  master = Buffer.from(key);
  derived.clear();
}

/** True once `useSealingKey` ran (or a key was made up for this process). */
export function hasSealingKey(): boolean {
  return master !== undefined;
}

function keyFor(purpose: 'secret' | 'cursor'): Buffer {
  master ??= randomBytes(32);
  let key = derived.get(purpose);
  if (!key) {
    key = Buffer.from(hkdfSync('sha256', master, Buffer.alloc(0), `agentstate ${purpose} v1`, 32));
    derived.set(purpose, key);
  }
  return key;
}

function seal(purpose: 'secret' | 'cursor', plaintext: string, context: string): Buffer {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', keyFor(purpose), iv);
  cipher.setAAD(Buffer.from(context, 'utf8'));
  const sealed = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return Buffer.concat([iv, cipher.getAuthTag(), sealed]);
}

/** The plaintext, or null when `box` was not sealed by this key for this context. */
function open(purpose: 'secret' | 'cursor', box: Buffer, context: string): string | null {
  if (box.length < IV_BYTES + TAG_BYTES) return null;
  try {
    const decipher = createDecipheriv('aes-256-gcm', keyFor(purpose), box.subarray(0, IV_BYTES));
    decipher.setAAD(Buffer.from(context, 'utf8'));
    decipher.setAuthTag(box.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
    return Buffer.concat([decipher.update(box.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]).toString('utf8');
  } catch {
    return null;
  }
}

/* ------------------------------------------------------------------ secrets at rest */

/** `enc:v1:<base64>` of `secret`, bound to `owner` (e.g. `agent/<tenant>/<agent>`). */
export function sealSecret(secret: string, owner: string): string {
  return SECRET_PREFIX + seal('secret', secret, owner).toString('base64');
}

/**
 * The secret a stored value holds. A value without the `enc:v1:` prefix is a secret stored in
 * plain text before secrets were sealed: it still works (and is sealed when next written).
 * A sealed value that does not open (another key, another owner) is an error, never a secret.
 */
export function openSecret(stored: string, owner: string): string {
  if (!stored.startsWith(SECRET_PREFIX)) return stored;
  const secret = open('secret', Buffer.from(stored.slice(SECRET_PREFIX.length), 'base64'), owner);
  if (secret === null) throw new Error(`a stored secret of ${owner} does not open with this deployment's key`);
  return secret;
}

/* ------------------------------------------------------------------ cursors */

/** An opaque cursor for `position` (any JSON-able value) of the list `list`. */
export function sealCursor(position: unknown, list: string): string {
  return seal('cursor', JSON.stringify(position), list).toString('base64url');
}

/** The position a cursor of `list` holds; `400 invalid_request` for anything else. */
export function openCursor(cursor: string, list: string): unknown {
  const box = /^[A-Za-z0-9_-]+$/.test(cursor) ? Buffer.from(cursor, 'base64url') : undefined;
  // Base64url ignores the unused low bits of its last character, so several strings decode to
  // the same bytes: only the one sealCursor wrote is the cursor (an edited one is never accepted).
  const text = box !== undefined && box.toString('base64url') === cursor ? open('cursor', box, list) : null;
  if (text !== null) {
    try {
      return JSON.parse(text) as unknown;
    } catch {
      // reported below
    }
  }
  throw new AgentStateError('invalid_request', 'cursor is not valid for this list', { field: 'cursor' });
}
