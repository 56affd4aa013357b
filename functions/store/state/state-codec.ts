import { createHash } from 'node:crypto';
import { brotliCompressSync, brotliDecompressSync, constants } from 'node:zlib';
import { applySplice, decodeSplice, encodeSplice, spliceBetween } from './state-splice.js';

/**
 * How a state's JSON text is kept in a version item: the state codec. The version codec
 * (version-item.ts) asks it for the attributes that hold a state and for the piece items to put
 * before the version; a reader asks it which pieces to fetch and hands them back to reassemble
 * the text. It knows nothing of slots, tips or the session layout beyond the partition key the
 * pieces share with their session.
 *
 *   small state (compressed ≤ INLINE_LIMIT_BYTES)   version item: `state` (text) or `stateZ`
 *                                                   (brotli), whichever is smaller
 *   large state (up to 4 MiB), a checkpoint         version item: `stateP` (the piece list: 16-byte
 *                                                   hashes, in order) and `stateN` (text bytes);
 *                                                   items `B#<hash>`: `z` = one piece, brotli
 *   large state, changed a little since one         version item: the checkpoint's `stateP`, its own
 *                                                   `stateN`, `stateS` (its splice: the byte range
 *                                                   of the text before it that it replaced, and
 *                                                   with what) and `stateK` (the sort keys of the
 *                                                   versions between, whose splices come first)
 *
 * Pieces are verbatim byte ranges of the JSON text, cut where the content says (a rolling hash
 * over the last 32 bytes, after a comma outside strings when one comes soon enough), so an
 * edit or an append changes the piece it lands in and leaves every other piece — and its
 * hash — as it was. A piece is named by the hash of its bytes: versions and branches that
 * share text share the item, and putting one twice is harmless. Reading is concatenation;
 * nothing is parsed or serialized again.
 *
 * A change to a large state writes no piece at all while it is small: its version keeps the
 * splice from the state it was computed from, and names that state's checkpoint and the
 * versions in between, so a reader fetches the checkpoint's pieces and those versions in the
 * one BatchGetItem round it makes anyway, joins the pieces and applies the splices in order
 * (still byte ranges: state-splice.ts). A 1 KB patch to a 4 MiB state is then one version
 * item of a few KB. Every CHAIN_LIMIT versions, or when a splice is large, the version is a
 * checkpoint again: its state is cut into pieces, and only those not already named by the
 * checkpoint before are put.
 */

/** The largest inline state, compressed or not; larger states go to pieces. */
export const INLINE_LIMIT_BYTES = 4 * 1024;
/** Bytes a piece has at least (but the last), expected on average, and at most. */
export const PIECE_MIN_BYTES = 40 * 1024;
const PIECE_MAX_BYTES = 192 * 1024;
/** After the hash asks for a cut, how far a comma outside strings is waited for. */
const STRUCTURAL_WINDOW_BYTES = 2 * 1024;
/**
 * One cut per 32 KiB on average past the minimum: the top 15 bits of the hash all zero. (The
 * top bits depend on all of the last 32 bytes; the low bits only on the last few, which repeat
 * in prose far more often than once in 32 KiB.)
 */
const CUT_SHIFT = 32 - 15;
const HASH_BYTES = 16;
/** Texts shorter than this are not worth compressing. */
const COMPRESS_FROM_BYTES = 64;
/**
 * Versions in a row kept as splices on one checkpoint at most (and never more than the pieces
 * leave room for in one BatchGetItem of READ_KEYS_LIMIT keys); the next one is a checkpoint.
 */
export const CHAIN_LIMIT = 24;
const READ_KEYS_LIMIT = 100;
/** The largest splice a version keeps; a larger change is a checkpoint. */
const SPLICE_LIMIT_BYTES = 16 * 1024;
/** A text at least this long after a large one is kept as a splice without trying it inline. */
const SPLICE_FROM_BYTES = 16 * INLINE_LIMIT_BYTES;

export const PIECE_PREFIX = 'B#';

/**
 * The attributes that hold one JSON text of a version item, named after it (`state`: `state`,
 * `stateZ`, `stateP`, `stateN`; a commit's `commands` alike): exactly one of the text itself,
 * its brotli bytes, or its piece list with its length.
 */
export type TextAttributes = Record<string, string | Uint8Array | number>;

/** A piece to put before the version that names it: its sort key and compressed bytes. */
export interface Piece {
  readonly sk: string;
  readonly z: Uint8Array;
}

export interface EncodedState {
  readonly attributes: TextAttributes;
  /**
   * The pieces to put before the item: every piece of the text, or with a `base`, those its
   * checkpoint does not name (empty when inline, and for a splice).
   */
  readonly pieces: readonly Piece[];
  /** Bytes of the JSON text. */
  readonly bytes: number;
  /** Kept in pieces (a checkpoint or a splice on one), not inline. */
  readonly large: boolean;
}

/**
 * A text as an item keeps it, as a write computed from it needs it (`baseTextOf`): where it
 * is, its bytes when they were read, and its checkpoint and chain.
 */
export interface BaseText {
  /** The sort key of the item that holds it. */
  readonly sk: string;
  /** The text, when it was read. */
  readonly bytes: Uint8Array | null;
  /** The piece list of its checkpoint (its own, when it is one). */
  readonly pieceList: Uint8Array;
  /** The versions whose splices apply before its own (none for a checkpoint). */
  readonly chain: readonly string[];
  /** True when it is a splice on its checkpoint rather than the checkpoint itself. */
  readonly spliced: boolean;
}

/**
 * The attributes that hold `text`, and the pieces it is cut into when it is too large to be
 * inline. With `base` (the large text it was computed from, read), a small change is kept as
 * a splice on it and puts no piece; otherwise only the pieces `base`'s checkpoint does not
 * name are returned. The caller puts the pieces before the item.
 */
export function encodeText(name: string, text: string, base: BaseText | null = null): EncodedState {
  const raw = Buffer.from(text, 'utf8');
  if (base?.bytes && raw.length >= SPLICE_FROM_BYTES) {
    const spliced = encodeSpliced(name, raw, base, base.bytes);
    if (spliced) return spliced;
  }
  if (raw.length < COMPRESS_FROM_BYTES) return { attributes: { [name]: text }, pieces: [], bytes: raw.length, large: false };
  // A text this long never compresses into an item: do not spend a brotli pass of 4 MiB to learn it.
  const compressed = raw.length > 64 * INLINE_LIMIT_BYTES ? null : compress(raw);
  if (compressed && Math.min(compressed.length, raw.length) <= INLINE_LIMIT_BYTES) {
    return {
      attributes: compressed.length < raw.length ? { [`${name}Z`]: compressed } : { [name]: text },
      pieces: [],
      bytes: raw.length,
      large: false,
    };
  }
  const existing = new Set(base ? keysOfList(base.pieceList) : []);
  const pieces: Piece[] = [];
  const hashes: Buffer[] = [];
  for (const [start, end] of cutPoints(raw)) {
    const bytes = raw.subarray(start, end);
    const hash = pieceHash(bytes);
    hashes.push(hash);
    const sk = pieceKey(hash);
    // Only the pieces to put are compressed: after a checkpoint, the few an edit touched.
    if (!existing.has(sk)) pieces.push({ sk, z: compress(bytes) });
  }
  return { attributes: { [`${name}P`]: Buffer.concat(hashes), [`${name}N`]: raw.length }, pieces, bytes: raw.length, large: true };
}

/** `raw` as a splice on `base`, when the chain has room and the change is small; else null. */
function encodeSpliced(name: string, raw: Buffer, base: BaseText, before: Uint8Array): EncodedState | null {
  const chain = base.spliced ? [...base.chain, base.sk] : [];
  const room = Math.min(CHAIN_LIMIT, READ_KEYS_LIMIT - base.pieceList.length / HASH_BYTES);
  if (chain.length >= room) return null;
  const splice = spliceBetween(before, raw);
  if (splice.insert.length > SPLICE_LIMIT_BYTES) return null;
  return {
    attributes: {
      [`${name}P`]: base.pieceList,
      [`${name}N`]: raw.length,
      [`${name}S`]: encodeSplice(splice),
      ...(chain.length > 0 ? { [`${name}K`]: chain.join(' ') } : {}),
    },
    pieces: [],
    bytes: raw.length,
    large: true,
  };
}

/**
 * What a write computed from the text `name` of `item` needs to know of it (`bytes`: the text,
 * when it was read); null when it is inline.
 */
export function baseTextOf(item: Record<string, unknown>, name: string, bytes: Uint8Array | null): BaseText | null {
  const pieceList = item[`${name}P`];
  if (!(pieceList instanceof Uint8Array)) return null;
  return { sk: String(item.sk), bytes, pieceList, chain: chainOf(item, name), spliced: item[`${name}S`] instanceof Uint8Array };
}

/** The sort keys of the versions whose splices come before the item's own. */
function chainOf(item: Record<string, unknown>, name: string): string[] {
  const chain = item[`${name}K`];
  return typeof chain === 'string' && chain !== '' ? chain.split(' ') : [];
}

/**
 * The sort keys a reader of the text `name` of an item fetches: its checkpoint's pieces and
 * the versions of its chain (none when inline).
 */
export function readKeysOf(item: Record<string, unknown>, name: string): string[] {
  return [...pieceKeysOf(item, name), ...chainOf(item, name)];
}

/** The sort keys of the pieces the text `name` of an item is made of, in order (none when inline). */
export function pieceKeysOf(item: Record<string, unknown>, name: string): string[] {
  const list = item[`${name}P`];
  return list instanceof Uint8Array ? keysOfList(list) : [];
}

function keysOfList(list: Uint8Array): string[] {
  const keys: string[] = [];
  for (let offset = 0; offset + HASH_BYTES <= list.length; offset += HASH_BYTES) {
    keys.push(pieceKey(list.subarray(offset, offset + HASH_BYTES)));
  }
  return keys;
}

/** Bytes of the text `name` of an item, without reading its pieces; 4 (`null`) when absent. */
export function textBytesOf(item: Record<string, unknown>, name: string): number {
  const length = item[`${name}N`];
  if (typeof length === 'number') return length;
  const text = item[name];
  if (typeof text === 'string') return Buffer.byteLength(text, 'utf8');
  const compressed = item[`${name}Z`];
  if (compressed instanceof Uint8Array) return decompress(compressed).length;
  return 4;
}

/**
 * The text `name` of an item; `fetched` maps the sort keys `readKeysOf` named to the items
 * read. Null when the item holds none of its attributes. Throws when a piece or a version of
 * its chain is missing: an item is only ever written after its pieces, and versions stay.
 */
export function decodeText(
  item: Record<string, unknown>,
  name: string,
  fetched: ReadonlyMap<string, Record<string, unknown>> = new Map(),
): string | null {
  const text = item[name];
  if (typeof text === 'string') return text;
  return decodeTextBytes(item, name, fetched)?.toString('utf8') ?? null;
}

/** `decodeText` as UTF-8 bytes, for a large text (what a write computed from it splices). */
export function decodeTextBytes(
  item: Record<string, unknown>,
  name: string,
  fetched: ReadonlyMap<string, Record<string, unknown>> = new Map(),
): Buffer | null {
  const text = item[name];
  if (typeof text === 'string') return Buffer.from(text, 'utf8');
  const compressed = item[`${name}Z`];
  if (compressed instanceof Uint8Array) return decompress(compressed);
  const keys = pieceKeysOf(item, name);
  if (keys.length === 0) return null;
  let segments: Uint8Array[] = keys.map((key) => {
    const z = fetched.get(key)?.z;
    if (!(z instanceof Uint8Array)) throw new Error(`piece ${key} of a version is missing`);
    return decompress(z);
  });
  for (const link of [...chainOf(item, name).map((sk) => fetched.get(sk)), item]) {
    const splice = link?.[`${name}S`];
    if (link === item && splice === undefined) break;
    if (!(splice instanceof Uint8Array)) throw new Error('a version of a chain of splices is missing');
    segments = applySplice(segments, decodeSplice(splice));
  }
  return Buffer.concat(segments);
}

/**
 * The pieces of `encoded` not among `existing`, each once; `existing` gains them (so that one
 * set can collect the pieces of several texts of an item).
 */
export function missingPieces(encoded: EncodedState, existing: Set<string>): Piece[] {
  return encoded.pieces.filter((piece) => {
    if (existing.has(piece.sk)) return false;
    existing.add(piece.sk);
    return true;
  });
}

function pieceHash(bytes: Uint8Array): Buffer {
  return createHash('sha256').update(bytes).digest().subarray(0, HASH_BYTES);
}

function pieceKey(hash: Uint8Array): string {
  return `${PIECE_PREFIX}${Buffer.from(hash).toString('base64url')}`;
}

function compress(bytes: Uint8Array): Buffer {
  return brotliCompressSync(bytes, {
    params: {
      [constants.BROTLI_PARAM_QUALITY]: 5,
      [constants.BROTLI_PARAM_MODE]: constants.BROTLI_MODE_TEXT,
      [constants.BROTLI_PARAM_SIZE_HINT]: bytes.length,
    },
  });
}

function decompress(bytes: Uint8Array): Buffer {
  return brotliDecompressSync(bytes);
}

/** 256 random 32-bit words (a fixed table: the same text always cuts the same way). */
const GEAR = (() => {
  const table = new Uint32Array(256);
  let seed = 0x9e3779b9;
  for (let index = 0; index < 256; index++) {
    // xorshift32: any fixed, well-mixed table will do.
    seed ^= seed << 13;
    seed ^= seed >>> 17;
    seed ^= seed << 5;
    table[index] = seed >>> 0;
  }
  return table;
})();

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;

/**
 * Where the text is cut: `[start, end)` ranges covering it. A gear hash (a rolling hash of the
 * last 32 bytes) asks for a cut past PIECE_MIN_BYTES; the cut is made after the next comma
 * outside a string within STRUCTURAL_WINDOW_BYTES, or right there when none comes, and in any
 * case at PIECE_MAX_BYTES. UTF-8 bytes of multi-byte characters are never quotes, backslashes
 * or commas, so scanning bytes is exact; a cut inside a character is harmless, since pieces
 * are joined as bytes before the text is decoded.
 */
function cutPoints(raw: Uint8Array): Array<[number, number]> {
  const ranges: Array<[number, number]> = [];
  let start = 0;
  let hash = 0;
  let inString = false;
  let escaped = false;
  let wantedAt = -1;
  for (let index = 0; index < raw.length; index++) {
    const byte = raw[index] as number;
    if (inString) {
      if (escaped) escaped = false;
      else if (byte === BACKSLASH) escaped = true;
      else if (byte === QUOTE) inString = false;
    } else if (byte === QUOTE) {
      inString = true;
    }
    hash = ((hash << 1) + (GEAR[byte] as number)) >>> 0;
    const length = index + 1 - start;
    if (length < PIECE_MIN_BYTES) continue;
    if (wantedAt < 0 && hash >>> CUT_SHIFT === 0) wantedAt = index;
    const structural = wantedAt >= 0 && byte === COMMA && !inString;
    const late = wantedAt >= 0 && index - wantedAt >= STRUCTURAL_WINDOW_BYTES;
    if (structural || late || length >= PIECE_MAX_BYTES) {
      ranges.push([start, index + 1]);
      start = index + 1;
      wantedAt = -1;
    }
  }
  if (start < raw.length) ranges.push([start, raw.length]);
  return ranges;
}
