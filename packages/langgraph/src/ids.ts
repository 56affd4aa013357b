/**
 * LangGraph names (thread ids, checkpoint namespaces, checkpoint ids) are any strings; agentstate
 * ids are 1–128 characters of `A-Z a-z 0-9 . _ : ~ @ -`. This module maps the one onto the
 * other, reversibly where it can:
 *
 * - `escape` keeps `A-Z a-z 0-9 . _ : -` and writes every other UTF-8 byte as `~XX` (two upper-case
 *   hex digits), so `~` only ever starts an escape and `@` never appears in an escaped name;
 * - a session id is `<prefix>@<thread>` (no `@` without a prefix), and a child namespace's session
 *   `<prefix>@<thread>~~<namespace>`: `~~` cannot occur inside an escaped name, and `@` only after
 *   a prefix, so two savers with different prefixes can never name the same session;
 * - a session id that would pass 128 characters is `<prefix>@~h<40 hex digits of SHA-256>` instead
 *   (`~h` is no escape), and the names themselves are kept in the checkpoint's state.
 */

/** The longest id agentstate takes. */
const MAX_ID_LENGTH = 128;
/** Room left for a saver's own names after its prefix. */
const MAX_PREFIX_LENGTH = 64;
const PLAIN = /^[A-Za-z0-9._:-]$/;
const PREFIX = /^[A-Za-z0-9._:-]+$/;
const NAMESPACE_SEPARATOR = '~~';
const HASHED = '~h';

/** `text` in the id alphabet: plain characters as they are, every other byte as `~XX`. */
export function escapeName(text: string): string {
  let out = '';
  for (const char of text) {
    if (PLAIN.test(char)) {
      out += char;
      continue;
    }
    for (const byte of new TextEncoder().encode(char)) out += `~${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

/** The inverse of `escapeName`. */
export function unescapeName(escaped: string): string {
  const bytes: number[] = [];
  for (let index = 0; index < escaped.length; index++) {
    const char = escaped[index] as string;
    if (char === '~') {
      bytes.push(Number.parseInt(escaped.slice(index + 1, index + 3), 16));
      index += 2;
    } else {
      bytes.push(char.charCodeAt(0));
    }
  }
  return new TextDecoder().decode(new Uint8Array(bytes));
}

/** A saver's prefix, checked once: plain id characters only, so it cannot fake a separator. */
export function checkedPrefix(prefix: string | undefined): string {
  if (prefix === undefined || prefix === '') return '';
  if (!PREFIX.test(prefix) || prefix.length > MAX_PREFIX_LENGTH) {
    throw new TypeError(
      `prefix must be 1–${MAX_PREFIX_LENGTH} characters of A-Z a-z 0-9 . _ : - (got ${JSON.stringify(prefix)}); it is the start of every session id the saver uses`,
    );
  }
  return prefix;
}

/** What a session id says about itself: its thread and namespace, unless it was hashed. */
export type DecodedSession = { kind: 'named'; threadId: string; checkpointNs: string } | { kind: 'hashed' } | { kind: 'foreign' };

/** Session ids of one saver: one session per thread and checkpoint namespace. */
export class SessionIds {
  /** What every session id of this saver starts with ('' without a prefix). */
  readonly start: string;

  constructor(prefix: string) {
    this.start = prefix === '' ? '' : `${prefix}@`;
  }

  /** The session that holds the checkpoints of `threadId` in `checkpointNs`. */
  async of(threadId: string, checkpointNs: string): Promise<string> {
    const named = `${this.start}${escapeName(threadId)}${checkpointNs === '' ? '' : `${NAMESPACE_SEPARATOR}${escapeName(checkpointNs)}`}`;
    if (named.length <= MAX_ID_LENGTH) return named;
    const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(JSON.stringify([threadId, checkpointNs])));
    const hex = [...new Uint8Array(digest)].map((byte) => byte.toString(16).padStart(2, '0')).join('');
    return `${this.start}${HASHED}${hex.slice(0, 40)}`;
  }

  /** The thread and namespace a session id of this saver names (`foreign`: not one of its ids). */
  decode(sessionId: string): DecodedSession {
    if (!sessionId.startsWith(this.start)) return { kind: 'foreign' };
    const rest = sessionId.slice(this.start.length);
    // Without a prefix, an `@` means another saver's session.
    if (rest.includes('@')) return { kind: 'foreign' };
    if (rest.startsWith(HASHED)) return { kind: 'hashed' };
    const separator = rest.indexOf(NAMESPACE_SEPARATOR);
    const thread = separator === -1 ? rest : rest.slice(0, separator);
    const namespace = separator === -1 ? '' : rest.slice(separator + NAMESPACE_SEPARATOR.length);
    if (thread === '') return { kind: 'foreign' };
    return { kind: 'named', threadId: unescapeName(thread), checkpointNs: unescapeName(namespace) };
  }
}

/**
 * The node of a checkpoint: its id, escaped (uuid6 ids, LangGraph's, are already plain and so
 * keep their order). `root` is agentstate's reserved root, so that one id is escaped.
 */
export function nodeIdOf(checkpointId: string): string {
  const escaped = escapeName(checkpointId);
  if (escaped === 'root') return '~72oot';
  if (escaped.length === 0 || escaped.length > MAX_ID_LENGTH) {
    throw new TypeError(`checkpoint ids must be 1–128 characters once escaped (got ${JSON.stringify(checkpointId)})`);
  }
  return escaped;
}

/**
 * The key of the note that holds the writes of one `putWrites` call (docs/api.md, "a note beside a node"):
 * its task and the indices of its writes, escaped, or `~h<40 hex digits of SHA-256>` when that
 * passes 128 characters. A call sent again names the same note; calls of one task with other
 * writes (an interrupt, then its resume) name notes of their own, as the writes' own keys differ.
 */
export async function noteKeyOf(taskId: string, writeKeys: readonly string[]): Promise<string> {
  const named = escapeName(`${taskId}|${writeKeys.map((key) => key.slice(key.lastIndexOf(',') + 1)).join(',')}`);
  if (named.length <= MAX_ID_LENGTH) return named;
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(JSON.stringify([taskId, writeKeys])));
  return `${HASHED}${[...new Uint8Array(digest)]
    .map((byte) => byte.toString(16).padStart(2, '0'))
    .join('')
    .slice(0, 40)}`;
}

/** The checkpoint id a node id names. */
export function checkpointIdOf(nodeId: string): string {
  return unescapeName(nodeId);
}
