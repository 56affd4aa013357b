import { brotliCompressSync, brotliDecompressSync, constants } from 'node:zlib';

/**
 * Splices: the change between two JSON texts as one byte range replaced, which is what a
 * version of a large state keeps instead of writing its pieces again (state-codec.ts).
 *
 *   prev   [ ─── same ─── | removed | ─── same ─── ]
 *   next   [ ─── same ─── | inserted        | ─── same ─── ]
 *          0              at
 *
 * A 1 KB append, a replaced entry or a set key is one splice of about its own size, found by
 * comparing the two texts from both ends (native compares, 4 KiB at a time). Applying one is
 * cutting and joining byte ranges: nothing is parsed or serialized again.
 */
export interface Splice {
  /** Byte offset in the text before. */
  readonly at: number;
  /** Bytes removed there. */
  readonly remove: number;
  /** Bytes inserted there (UTF-8; may start or end inside a character: texts are joined as bytes). */
  readonly insert: Uint8Array;
}

const STEP = 4096;
const HEADER_BYTES = 9;
/** Flag bit of the header's first byte: the inserted bytes are brotli. */
const COMPRESSED = 1;
/** Inserted bytes shorter than this are kept as they are. */
const COMPRESS_FROM_BYTES = 128;

/** The one splice that turns `prev` into `next` (empty when they are equal). */
export function spliceBetween(prev: Uint8Array, next: Uint8Array): Splice {
  const a = Buffer.from(prev.buffer, prev.byteOffset, prev.length);
  const b = Buffer.from(next.buffer, next.byteOffset, next.length);
  const shorter = Math.min(a.length, b.length);
  let prefix = 0;
  while (prefix + STEP <= shorter && a.compare(b, prefix, prefix + STEP, prefix, prefix + STEP) === 0) prefix += STEP;
  while (prefix < shorter && a[prefix] === b[prefix]) prefix++;
  const room = shorter - prefix;
  let suffix = 0;
  while (
    suffix + STEP <= room &&
    a.compare(b, b.length - suffix - STEP, b.length - suffix, a.length - suffix - STEP, a.length - suffix) === 0
  ) {
    suffix += STEP;
  }
  while (suffix < room && a[a.length - 1 - suffix] === b[b.length - 1 - suffix]) suffix++;
  return { at: prefix, remove: a.length - prefix - suffix, insert: b.subarray(prefix, b.length - suffix) };
}

/** A splice as one binary attribute: flags, `at` and `remove` (uint32), then the inserted bytes. */
export function encodeSplice(splice: Splice): Buffer {
  const compressed =
    splice.insert.length >= COMPRESS_FROM_BYTES
      ? brotliCompressSync(splice.insert, {
          params: { [constants.BROTLI_PARAM_QUALITY]: 5, [constants.BROTLI_PARAM_MODE]: constants.BROTLI_MODE_TEXT },
        })
      : null;
  const useCompressed = compressed !== null && compressed.length < splice.insert.length;
  const header = Buffer.alloc(HEADER_BYTES);
  header.writeUInt8(useCompressed ? COMPRESSED : 0, 0);
  header.writeUInt32BE(splice.at, 1);
  header.writeUInt32BE(splice.remove, 5);
  return Buffer.concat([header, useCompressed ? compressed : splice.insert]);
}

export function decodeSplice(bytes: Uint8Array): Splice {
  const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length);
  if (buffer.length < HEADER_BYTES) throw new Error('a splice is shorter than its header');
  const body = buffer.subarray(HEADER_BYTES);
  return {
    at: buffer.readUInt32BE(1),
    remove: buffer.readUInt32BE(5),
    insert: (buffer.readUInt8(0) & COMPRESSED) !== 0 ? brotliDecompressSync(body) : body,
  };
}

/**
 * `segments` (a text as consecutive byte ranges) with `splice` applied: the ranges before it
 * kept, the one it starts in cut, the inserted bytes, then what follows what it removed. The
 * segments are shared, never copied; throws when the splice reaches past the text.
 */
export function applySplice(segments: readonly Uint8Array[], splice: Splice): Uint8Array[] {
  const out: Uint8Array[] = [];
  let index = 0;
  let offset = 0;
  for (; index < segments.length; index++) {
    const segment = segments[index] as Uint8Array;
    if (offset + segment.length > splice.at) break;
    out.push(segment);
    offset += segment.length;
  }
  if (offset < splice.at && index === segments.length) throw new Error('a splice starts past the end of its text');
  let cut = splice.at - offset;
  if (cut > 0) out.push((segments[index] as Uint8Array).subarray(0, cut));
  if (splice.insert.length > 0) out.push(splice.insert);
  let skip = splice.remove;
  for (; index < segments.length; index++) {
    const segment = segments[index] as Uint8Array;
    const left = segment.length - cut;
    if (skip < left) {
      out.push(segment.subarray(cut + skip));
      skip = 0;
      index++;
      break;
    }
    skip -= left;
    cut = 0;
  }
  if (skip > 0) throw new Error('a splice removes past the end of its text');
  for (; index < segments.length; index++) out.push(segments[index] as Uint8Array);
  return out;
}
