import { describe, expect, it } from 'vitest';
import {
  baseTextOf,
  CHAIN_LIMIT,
  decodeText,
  decodeTextBytes,
  type EncodedState,
  encodeText,
  INLINE_LIMIT_BYTES,
  missingPieces,
  PIECE_MIN_BYTES,
  pieceKeysOf,
  readKeysOf,
} from '../../functions/store/state/state-codec.js';
import { applySplice, decodeSplice, encodeSplice, spliceBetween } from '../../functions/store/state/state-splice.js';

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

    const afterEdit = missingPieces(encodeText('state', JSON.stringify(edited)), new Set(existing));
    const afterAppend = missingPieces(encodeText('state', JSON.stringify(appended)), new Set(existing));
    // A checkpoint on a base whose text was not read: only the pieces the base does not name.
    const checkpoint = encodeText('state', JSON.stringify(edited), baseTextOf({ sk: 'V#1', ...before.attributes }, 'state', null));

    // The piece it lands in, and at most two after it while the cuts find their places again.
    expect(afterEdit.length).toBeLessThanOrEqual(3);
    expect(afterAppend.length).toBeLessThanOrEqual(2);
    expect(checkpoint.pieces.map((piece) => piece.sk).sort()).toEqual(afterEdit.map((piece) => piece.sk).sort());
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

/** The items of a chain of versions as a reader fetches them: pieces and earlier versions, by sort key. */
class Versions {
  readonly items = new Map<string, Record<string, unknown>>();
  private count = 0;

  /** Encodes `text` on the last version written (its text read), as a write computed from it does. */
  write(text: string): { sk: string; encoded: EncodedState } {
    const last = this.count === 0 ? null : (this.items.get(`V#${this.count}`) as Record<string, unknown>);
    const base = last ? baseTextOf(last, 'state', decodeTextBytes(last, 'state', this.items)) : null;
    const encoded = encodeText('state', text, base);
    for (const piece of encoded.pieces) this.items.set(piece.sk, { sk: piece.sk, z: piece.z });
    const sk = `V#${++this.count}`;
    this.items.set(sk, { sk, ...encoded.attributes });
    return { sk, encoded };
  }

  read(sk: string): string | null {
    const item = this.items.get(sk) as Record<string, unknown>;
    const wanted = new Map(readKeysOf(item, 'state').map((key) => [key, this.items.get(key) as Record<string, unknown>]));
    return decodeText(item, 'state', wanted);
  }
}

describe('splices', () => {
  it('are the one byte range two texts differ in, and apply over segments without copying them', () => {
    const prev = Buffer.from('{"log":[1,2,3],"n":"ünï"}');
    const next = Buffer.from('{"log":[1,2,3,4],"n":"ünö"}');

    const splice = spliceBetween(prev, next);
    const applied = applySplice([prev.subarray(0, 5), prev.subarray(5, 12), prev.subarray(12)], decodeSplice(encodeSplice(splice)));

    expect(splice.at).toBe(13);
    expect(Buffer.concat(applied).toString()).toBe(next.toString());
    expect(spliceBetween(prev, prev)).toMatchObject({ at: prev.length, remove: 0 });
    expect(Buffer.concat(applySplice([prev], spliceBetween(prev, Buffer.from('')))).length).toBe(0);
    expect(() => applySplice([prev], { at: prev.length + 1, remove: 0, insert: Buffer.from('x') })).toThrow('past the end');
    expect(() => applySplice([prev], { at: 2, remove: prev.length, insert: Buffer.from('x') })).toThrow('past the end');
  });

  it('keep a 1 KB change to a 4 MiB state in its version, with no piece to write, and read back exactly', () => {
    // Prepare: a checkpoint.
    const state = largeState(4 * 1024 * 1024);
    const versions = new Versions();
    const first = versions.write(JSON.stringify(state));

    // Act: an append, an edit in the middle, a key set at the top.
    const texts: string[] = [];
    const written: Array<{ sk: string; encoded: EncodedState }> = [];
    state.log.push({ id: -1, role: 'user', text: 'appended ✓ '.repeat(90) });
    texts.push(JSON.stringify(state));
    (state.log[500] as { text: string }).text = 'edited ü '.repeat(110);
    texts.push(JSON.stringify(state));
    texts.push(JSON.stringify({ turns: 3, ...state }));
    for (const text of texts) written.push(versions.write(text));

    // Assess: each is a splice of about its change, on the first version's pieces, named in order.
    expect(first.encoded.pieces.length).toBeGreaterThan(20);
    for (const [index, { sk, encoded }] of written.entries()) {
      expect(encoded.pieces).toEqual([]);
      expect(encoded.attributes.stateP).toEqual(first.encoded.attributes.stateP);
      expect((encoded.attributes.stateS as Uint8Array).length).toBeLessThan(1100);
      expect(encoded.attributes.stateN).toBe(Buffer.byteLength(texts[index] as string));
      expect(versions.read(sk)).toBe(texts[index]);
    }
    expect(written.map(({ encoded }) => encoded.attributes.stateK)).toEqual([undefined, 'V#2', 'V#2 V#3']);
    expect(versions.read(first.sk)).toBe(texts[0]?.replace(/,\{"id":-1.*\]/, ']'));
  });

  it('give way to a checkpoint past the chain limit, or for a large change, which puts only the pieces that changed', () => {
    // Prepare
    const state = largeState(2 * 1024 * 1024);
    const versions = new Versions();
    versions.write(JSON.stringify(state));

    // Act: CHAIN_LIMIT + 2 small appends, then one change of 64 KB.
    const written: Array<{ sk: string; encoded: EncodedState; text: string }> = [];
    for (let n = 0; n < CHAIN_LIMIT + 2; n++) {
      state.log.push({ id: -n, role: 'user', text: `turn ${n}` });
      const text = JSON.stringify(state);
      written.push({ ...versions.write(text), text });
    }
    state.log.push({ id: -100, role: 'user', text: 'z'.repeat(64 * 1024) });
    const bigText = JSON.stringify(state);
    const big = versions.write(bigText);

    // Assess: CHAIN_LIMIT splices, a checkpoint (a few pieces put), a splice on it; the large change a checkpoint.
    const spliced = written.map(({ encoded }) => 'stateS' in encoded.attributes);
    expect(spliced).toEqual([...Array(CHAIN_LIMIT).fill(true), false, true]);
    const checkpoint = written[CHAIN_LIMIT]?.encoded as EncodedState;
    expect(checkpoint.pieces.length).toBeGreaterThan(0);
    expect(checkpoint.pieces.length).toBeLessThanOrEqual(2);
    expect(written[CHAIN_LIMIT + 1]?.encoded.attributes.stateP).toEqual(checkpoint.attributes.stateP);
    expect('stateS' in big.encoded.attributes).toBe(false);
    for (const { sk, text } of written) expect(versions.read(sk)).toBe(text);
    expect(versions.read(big.sk)).toBe(bigText);
  });

  it('name the versions a reader must fetch, and a missing one breaks the read loudly', () => {
    const versions = new Versions();
    const state = largeState(1024 * 1024);
    versions.write(JSON.stringify(state));
    state.log.push({ id: -1, role: 'user', text: 'one' });
    versions.write(JSON.stringify(state));
    state.log.push({ id: -2, role: 'user', text: 'two' });
    const { sk } = versions.write(JSON.stringify(state));
    const item = versions.items.get(sk) as Record<string, unknown>;

    versions.items.delete('V#2');

    expect(readKeysOf(item, 'state')).toContain('V#2');
    expect(() => versions.read(sk)).toThrow('chain of splices');
  });
});
