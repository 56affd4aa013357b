/** Vectors for the tests of semantic search (memory items with embeddings). */

/** The cosine, in doubles, of two vectors as the server stores them (32-bit floats). */
export function storedCosine(a: readonly number[], b: readonly number[]): number {
  const fa = Float32Array.from(a);
  const fb = Float32Array.from(b);
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < fa.length; i++) {
    dot += (fa[i] as number) * (fb[i] as number);
    na += (fa[i] as number) ** 2;
    nb += (fb[i] as number) ** 2;
  }
  return dot / Math.sqrt(na * nb);
}

/**
 * A deterministic pseudo-random vector of numbers in [-0.5, 0.5) (mulberry32: 32-bit integer
 * steps, so no two seeds make the same vector, which would tie their scores).
 */
export function vectorOf(seed: number, dimensions: number): number[] {
  let state = seed >>> 0;
  return Array.from({ length: dimensions }, () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let mixed = Math.imul(state ^ (state >>> 15), 1 | state);
    mixed = (mixed + Math.imul(mixed ^ (mixed >>> 7), 61 | mixed)) ^ mixed;
    return ((mixed ^ (mixed >>> 14)) >>> 0) / 4294967296 - 0.5;
  });
}
