import { brotliCompressSync, brotliDecompressSync, deflateRawSync, inflateRawSync, constants as zlib } from 'node:zlib';

// Text attributes of log items (messages, kept answers, what a change carries): brotli, or
// deflate with a dictionary, when that is smaller.

/** Compressed text pays from this size on (smaller texts stay readable text). */
const COMPRESS_FROM_BYTES = 200;

/** JSON text, brotli-compressed (quality 5: about 40 µs for 25 messages) when that is smaller. */
export function packText(text: string): string | Uint8Array {
  if (Buffer.byteLength(text) < COMPRESS_FROM_BYTES) return text;
  const packed = brotliCompressSync(text, {
    params: { [zlib.BROTLI_PARAM_QUALITY]: 5, [zlib.BROTLI_PARAM_SIZE_HINT]: Buffer.byteLength(text) },
  });
  return packed.byteLength < Buffer.byteLength(text) ? new Uint8Array(packed) : text;
}

export function unpackText(value: unknown): string | null {
  if (typeof value === 'string') return value;
  if (value instanceof Uint8Array) return brotliDecompressSync(value).toString('utf8');
  return null;
}

/** The most of a dictionary deflate uses (its window): only a dictionary's last 32 KiB count. */
const WINDOW_BYTES = 32 * 1024;

/**
 * A short text that mostly repeats `dictionary` (what the same item holds, the names every such
 * text has): deflate with that dictionary (a 200-byte answer that repeats its item's state and
 * ids takes some 40), or the text itself when that is not smaller. The reader must hand
 * `unpackTextWith` the same dictionary, so it may only be made of what the item keeps as long
 * as the text.
 */
export function packTextWith(text: string, dictionary: string): string | Uint8Array {
  const packed = deflateRawSync(text, { dictionary: windowOf(dictionary), level: 9 });
  return packed.byteLength < Buffer.byteLength(text) ? new Uint8Array(packed) : text;
}

export function unpackTextWith(value: unknown, dictionary: string): string | null {
  if (typeof value === 'string') return value;
  if (value instanceof Uint8Array) return inflateRawSync(value, { dictionary: windowOf(dictionary) }).toString('utf8');
  return null;
}

function windowOf(dictionary: string): Buffer {
  const bytes = Buffer.from(dictionary);
  return bytes.byteLength > WINDOW_BYTES ? bytes.subarray(bytes.byteLength - WINDOW_BYTES) : bytes;
}
