import { describe, expect, it } from 'vitest';
import {
  decodeText,
  encodeText,
  INLINE_LIMIT_BYTES,
  missingPieces,
  PIECE_MIN_BYTES,
  pieceKeysOf,
} from '../../functions/store/state-codec.js';

/** A JSON text of about `bytes`, in the shape agent states take: a log of messages. */
function largeState(bytes: number, seed = 1): { log: Array<{ id: number; role: string; text: string }> } {
  const log: Array<{ id: number; role: string; text: string }> = [];
  let size = 10;
  let n = seed;
  for (let id = 0; size < bytes; id++) {
    n = (n * 1103515245 + 12345) % 2 ** 31;
    const text = `message ${id}: ${n.toString(36).repeat(8)} ünïcødé ✓ ${'lorem ipsum '.repeat(n % 20)}`;
    log.push({ id, role: id % 2 ? 'assistant' : 'user', text });
    size += text.length + 40;
  }
  return { log };
}

/** What a reader fetches: every piece of the item, by sort key. */
function fetched(encoded: ReturnType<typeof encodeText>): Map<string, Record<string, unknown>> {
  return new Map(encoded.pieces.map((piece) => [piece.sk, { sk: piece.sk, z: piece.z }]));
}

describe('the state codec', () => {
  it('keeps a short state as its text', () => {
    const encoded = encodeText('state', '{"n":1}');

    expect(encoded.attributes).toEqual({ state: '{"n":1}' });
    expect(encoded.pieces).toEqual([]);
  });

  it('compresses a ~1 KB state inline, well under 1 KB', () => {
    const text = JSON.stringify(largeState(1000));

    const encoded = encodeText('state', text);

    expect(Object.keys(encoded.attributes)).toEqual(['stateZ']);
    expect((encoded.attributes.stateZ as Uint8Array).length).toBeLessThan(600);
    expect(decodeText(encoded.attributes, 'state')).toBe(text);
  });

  it('cuts a 4 MiB state into pieces that join back to the very same text', () => {
    const text = JSON.stringify(largeState(4 * 1024 * 1024));

    const encoded = encodeText('state', text);

    expect(Object.keys(encoded.attributes).sort()).toEqual(['stateN', 'stateP']);
    expect(encoded.attributes.stateN).toBe(Buffer.byteLength(text));
    expect(encoded.pieces.length).toBeGreaterThan(20);
    // One BatchGetItem (100 keys) reads them all.
    expect(encoded.pieces.length).toBeLessThanOrEqual(100);
    expect(pieceKeysOf(encoded.attributes, 'state')).toEqual(encoded.pieces.map((piece) => piece.sk));
    expect(decodeText(encoded.attributes, 'state', fetched(encoded))).toBe(text);
  });

  it('changes only the pieces an edit or an append touches', () => {
    const state = largeState(4 * 1024 * 1024);
    const before = encodeText('state', JSON.stringify(state));
    const existing = new Set(before.pieces.map((piece) => piece.sk));

    const edited = structuredClone(state);
    (edited.log[Math.floor(edited.log.length / 2)] as { text: string }).text = 'x'.repeat(1024);
    const appended = structuredClone(state);
    appended.log.push({ id: -1, role: 'user', text: 'y'.repeat(1024) });

    const afterEdit = missingPieces(encodeText('state', JSON.stringify(edited)), existing);
    const afterAppend = missingPieces(encodeText('state', JSON.stringify(appended)), existing);

    // The piece it lands in, and at most two after it while the cuts find their places again.
    expect(afterEdit.length).toBeLessThanOrEqual(3);
    expect(afterAppend.length).toBeLessThanOrEqual(2);
  });

  it('keeps a state inline up to the inline limit, and names the piece a missing piece breaks', () => {
    const text = JSON.stringify(largeState(3 * PIECE_MIN_BYTES));
    const encoded = encodeText('state', text);
    const somePiece = encoded.pieces[0]?.sk;

    expect(encoded.pieces.length).toBeGreaterThan(0);
    expect(() => decodeText(encoded.attributes, 'state', new Map())).toThrow(somePiece);
    expect(INLINE_LIMIT_BYTES).toBeLessThan(PIECE_MIN_BYTES);
  });

  it('joins pieces cut inside a multi-byte character', () => {
    const text = JSON.stringify({ s: '✓'.repeat(200_000) });

    const encoded = encodeText('state', text);

    expect(decodeText(encoded.attributes, 'state', fetched(encoded))).toBe(text);
  });
});
