import { isJsonNumber } from '../json/json.js';
import { AgentStateError } from '../kernel/errors.js';

/**
 * Semantic search over memory items (API.md section 10): an item may carry its caller's own
 * embedding, and a search with `vector` ranks the items under a prefix by cosine similarity,
 * exactly. Pure: the store keeps the embeddings and hands them over as `Float32Array`s
 * (memory.ts `VectorCandidate`), and beside each a short code of it (`embeddingCode`), one byte
 * a number, which a search reads instead of the embeddings. A code gives a cosine to within a
 * bound it also gives (`QueryVector.estimate`), so a search fetches the embeddings of just the
 * items whose bound reaches the best ones', and ranks those exactly: the same answer as scoring
 * every embedding, for about a quarter of the bytes read.
 */

/** The most numbers an embedding (or a search's vector) may have. */
const MAX_EMBEDDING_DIMS = 4096;

/**
 * `embedding` of a put or `vector` of a search as numbers: an array of 1–4,096 finite numbers,
 * not all zero (a zero vector has no direction, so no cosine), else `400 invalid_request`. A
 * number sent as text that no double writes back as (`1.0`, `-0`) counts by its value.
 */
export function requireEmbedding(value: unknown, field: 'embedding' | 'vector'): number[] {
  const refuse = (why: string) =>
    new AgentStateError('invalid_request', `${field} must be an array of 1 to ${MAX_EMBEDDING_DIMS} finite numbers${why}`, {
      field,
      maxDimensions: MAX_EMBEDDING_DIMS,
    });
  if (!Array.isArray(value) || value.length === 0 || value.length > MAX_EMBEDDING_DIMS) throw refuse('');
  const numbers = value.map((entry) => (typeof entry === 'number' ? entry : isJsonNumber(entry) ? Number(entry.valueOf()) : Number.NaN));
  if (!numbers.every(Number.isFinite)) throw refuse('');
  if (numbers.every((entry) => entry === 0)) throw refuse(', not all zero');
  return numbers;
}

/** Bytes of the code of an embedding of `dimensions` numbers: its scale and norm, then a byte a number. */
export function codeBytes(dimensions: number): number {
  return CODE_HEADER_BYTES + dimensions;
}

const CODE_HEADER_BYTES = 8;

/**
 * The code of an embedding (as its 32-bit floats): a scale `s` and the embedding's norm as
 * 32-bit floats (little-endian), then each number as the signed byte `round(x / s)`, where
 * `s = max |x| / 127`. Every number is then within `s / 2` of `s` times its byte.
 */
export function embeddingCode(embedding: Float32Array): Uint8Array {
  let largest = 0;
  let squares = 0;
  for (const entry of embedding) {
    largest = Math.max(largest, Math.abs(entry));
    squares += entry * entry;
  }
  const code = new Uint8Array(codeBytes(embedding.length));
  const header = new DataView(code.buffer);
  // The scale as stored is the one the bytes are rounded with, so the bound holds for it exactly.
  const scale = Math.fround(largest / 127);
  header.setFloat32(0, scale, true);
  header.setFloat32(4, Math.sqrt(squares), true);
  const bytes = new Int8Array(code.buffer, CODE_HEADER_BYTES);
  embedding.forEach((entry, index) => {
    bytes[index] = scale === 0 ? 0 : Math.max(-127, Math.min(127, Math.round(entry / scale)));
  });
  return code;
}

/** A search's vector, ready to score embeddings against. */
export class QueryVector {
  private readonly unit: Float32Array;
  /** The sum of the unit vector's absolute numbers: how far rounding a code can move a dot product, per unit of scale. */
  private readonly spread: number;

  constructor(vector: readonly number[]) {
    const norm = Math.hypot(...vector);
    this.unit = Float32Array.from(vector, (entry) => entry / norm);
    this.spread = this.unit.reduce((sum, entry) => sum + Math.abs(entry), 0);
  }

  /**
   * The cosine with the embedding `code` stands for, estimated from the code, and a bound the
   * exact cosine is within: `|cos - score| <= bound`. Each number of the embedding is within
   * `s / 2` of its rounded value, so the dot product is within `s / 2` times the sum of the
   * vector's absolute numbers; the last term covers the 32-bit norm and the sums' rounding.
   * Null for a code of other dimensions.
   */
  estimate(code: Uint8Array): { score: number; bound: number } | null {
    if (code.length !== codeBytes(this.unit.length)) return null;
    const header = new DataView(code.buffer, code.byteOffset, CODE_HEADER_BYTES);
    const scale = header.getFloat32(0, true);
    const norm = header.getFloat32(4, true);
    if (!(norm > 0)) return null;
    const bytes = new Int8Array(code.buffer, code.byteOffset + CODE_HEADER_BYTES, this.unit.length);
    let dot = 0;
    for (let index = 0; index < bytes.length; index++) dot += (this.unit[index] as number) * (bytes[index] as number);
    return { score: (scale * dot) / norm, bound: (scale * this.spread) / (2 * norm) + 1e-5 };
  }

  get dimensions(): number {
    return this.unit.length;
  }

  /** The cosine of the angle between this vector and `other` (of the same dimensions): 1 = same direction. */
  cosine(other: Float32Array): number {
    let dot = 0;
    let norm = 0;
    for (let index = 0; index < other.length; index++) {
      const entry = other[index] as number;
      dot += (this.unit[index] as number) * entry;
      norm += entry * entry;
    }
    // A stored embedding is never all zero; a cosine stays within [-1, 1] despite rounding.
    return norm === 0 ? 0 : Math.max(-1, Math.min(1, dot / Math.sqrt(norm)));
  }
}

/**
 * The best `limit` entries by score, highest first; equal scores keep the order they were
 * offered in. Holds at most twice `limit` entries between trims, so a search over 100,000 items
 * keeps a few hundred.
 */
export class TopScores<T> {
  private entries: Array<{ score: number; order: number; value: T }> = [];
  private offered = 0;
  private floor = Number.NEGATIVE_INFINITY;

  constructor(private readonly limit: number) {}

  offer(score: number, value: T): void {
    const order = this.offered++;
    if (this.entries.length >= this.limit && score <= this.floor) return;
    this.entries.push({ score, order, value });
    if (this.entries.length >= 2 * this.limit) this.trim();
  }

  /** The lowest score among the best `limit`, once there are that many; else minus infinity. */
  threshold(): number {
    this.trim();
    return this.entries.length >= this.limit ? (this.entries[this.limit - 1] as { score: number }).score : Number.NEGATIVE_INFINITY;
  }

  /** The kept entries, highest score first. */
  best(): Array<{ score: number; value: T }> {
    this.trim();
    return this.entries.map(({ score, value }) => ({ score, value }));
  }

  private trim(): void {
    this.entries.sort((a, b) => b.score - a.score || a.order - b.order);
    this.entries.length = Math.min(this.entries.length, this.limit);
    if (this.entries.length >= this.limit) this.floor = (this.entries[this.entries.length - 1] as { score: number }).score;
  }
}
