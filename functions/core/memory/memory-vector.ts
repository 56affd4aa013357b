import { isJsonNumber } from '../json/json.js';
import { AgentStateError } from '../kernel/errors.js';

/**
 * Semantic search over memory items (API.md section 10): an item may carry its caller's own
 * embedding, and a search with `vector` ranks the items under a prefix by cosine similarity,
 * exactly (every embedding of the vector's dimensions is scored; no approximate index). Pure:
 * the store keeps the embeddings and hands them over as `Float32Array`s (memory.ts `VectorCandidate`).
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

/** A search's vector, ready to score embeddings against. */
export class QueryVector {
  private readonly unit: Float32Array;

  constructor(vector: readonly number[]) {
    const norm = Math.hypot(...vector);
    this.unit = Float32Array.from(vector, (entry) => entry / norm);
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
