import { brotliCompressSync, brotliDecompressSync, constants as zlib } from 'node:zlib';

// Text attributes of log items (messages, kept answers): brotli when that is smaller.

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
