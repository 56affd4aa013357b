import { createHash } from 'node:crypto';
import { brotliCompressSync, brotliDecompressSync, constants } from 'node:zlib';

/**
 * How a state's JSON text is kept in a version item: the state codec. The version codec
 * (item-codecs.ts) asks it for the attributes that hold a state and for the piece items to put
 * before the version; a reader asks it which pieces to fetch and hands them back to reassemble
 * the text. It knows nothing of slots, tips or the session layout beyond the partition key the
 * pieces share with their session.
 *
 *   small state (compressed ≤ INLINE_LIMIT_BYTES)   version item: `state` (text) or `stateZ`
 *                                                   (brotli), whichever is smaller
 *   large state (up to 4 MiB)                       version item: `stateP` (the piece list: 16-byte
 *                                                   hashes, in order) and `stateN` (text bytes);
 *                                                   items `B#<hash>`: `z` = one piece, brotli
 *
 * Pieces are verbatim byte ranges of the JSON text, cut where the content says (a rolling hash
 * over the last 32 bytes, after a comma outside strings when one comes soon enough), so an
 * edit or an append changes the piece it lands in and leaves every other piece — and its
 * hash — as it was. A piece is named by the hash of its bytes: versions and branches that
 * share text share the item, and putting one twice is harmless. Reading is concatenation;
 * nothing is parsed or serialized again.
 */

/** The largest inline state, compressed or not; larger states go to pieces. */
export const INLINE_LIMIT_BYTES = 4 * 1024;
/** Bytes a piece has at least (but the last), expected on average, and at most. */
export const PIECE_MIN_BYTES = 24 * 1024;
const PIECE_MAX_BYTES = 128 * 1024;
/** After the hash asks for a cut, how far a comma outside strings is waited for. */
const STRUCTURAL_WINDOW_BYTES = 2 * 1024;
/** One cut per 32 KiB on average past the minimum: `hash & CUT_MASK === 0`. */
const CUT_MASK = (1 << 15) - 1;
const HASH_BYTES = 16;
/** Texts shorter than this are not worth compressing. */
const COMPRESS_FROM_BYTES = 64;

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
  /** Every piece the state is made of, in order (empty when inline). */
  readonly pieces: readonly Piece[];
  /** Bytes of the JSON text. */
  readonly bytes: number;
}

/**
 * The attributes that hold `text`, and the pieces it is cut into when it is too large to be
 * inline. The caller puts the pieces it cannot prove exist (see `missingPieces`) before the
 * version.
 */
export function encodeText(name: string, text: string): EncodedState {
  const raw = Buffer.from(text, 'utf8');
  if (raw.length < COMPRESS_FROM_BYTES) return { attributes: { [name]: text }, pieces: [], bytes: raw.length };
  const compressed = compress(raw);
  if (Math.min(compressed.length, raw.length) <= INLINE_LIMIT_BYTES) {
    return {
      attributes: compressed.length < raw.length ? { [`${name}Z`]: compressed } : { [name]: text },
      pieces: [],
      bytes: raw.length,
    };
  }
  const pieces: Piece[] = [];
  const hashes: Buffer[] = [];
  for (const [start, end] of cutPoints(raw)) {
    const bytes = raw.subarray(start, end);
    const hash = pieceHash(bytes);
    hashes.push(hash);
    pieces.push({ sk: pieceKey(hash), z: compress(bytes) });
  }
  return { attributes: { [`${name}P`]: Buffer.concat(hashes), [`${name}N`]: raw.length }, pieces, bytes: raw.length };
}

/** The sort keys of the pieces the text `name` of an item is made of, in order (none when inline). */
export function pieceKeysOf(item: Record<string, unknown>, name: string): string[] {
  const list = item[`${name}P`];
  if (!(list instanceof Uint8Array)) return [];
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
 * The text `name` of an item; `pieces` maps the sort keys `pieceKeysOf` named to the piece
 * items read. Null when the item holds none of its attributes. Throws when a piece is
 * missing: an item is only ever written after its pieces.
 */
export function decodeText(
  item: Record<string, unknown>,
  name: string,
  pieces: ReadonlyMap<string, Record<string, unknown>> = new Map(),
): string | null {
  const text = item[name];
  if (typeof text === 'string') return text;
  const compressed = item[`${name}Z`];
  if (compressed instanceof Uint8Array) return decompress(compressed).toString('utf8');
  const keys = pieceKeysOf(item, name);
  if (keys.length === 0) return null;
  const parts = keys.map((key) => {
    const z = pieces.get(key)?.z;
    if (!(z instanceof Uint8Array)) throw new Error(`piece ${key} of a version is missing`);
    return decompress(z);
  });
  return Buffer.concat(parts).toString('utf8');
}

/**
 * The pieces of `encoded` not among `existing` (the pieces of the version it was computed
 * from, which exist as long as that version does): the ones a write must put first.
 */
export function missingPieces(encoded: EncodedState, existing: ReadonlySet<string>): Piece[] {
  const seen = new Set<string>();
  return encoded.pieces.filter((piece) => {
    if (existing.has(piece.sk) || seen.has(piece.sk)) return false;
    seen.add(piece.sk);
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
    if (wantedAt < 0 && (hash & CUT_MASK) === 0) wantedAt = index;
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
