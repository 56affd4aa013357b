import { type Log, warnToConsole } from '../kernel/log.js';
import type { MemoryAddress, MemoryItem, Namespace } from './memory.js';
import { embeddingCode } from './memory-vector.js';

/**
 * What the table's stream reports of memory items (store/memory/memory-stream.ts reads it), and the
 * upkeep the change hook does with it, off the request path: the list of namespaces that
 * hold items (`GET /v1/memory`, and what a search spans) and the versions an item replaced
 * (`GET /v1/memory/versions`). A put stays one UpdateItem; these follow a moment later. It
 * also makes sure each embedding's code is in its namespace's pages (store/memory/memory-codes.ts):
 * the put and the delete write them before they answer, and the stream, which orders an item's
 * records, mends what a put or delete that died in between left.
 */

export interface RecordedMemoryChange {
  tenant: string;
  namespace: string[];
  key: string;
  /**
   * `put`: a version was written (`next`); `delete`: a delete removed the item (`old`);
   * `removed`: DynamoDB's TTL removed an expired item or a delete's tombstone (no event).
   */
  kind: 'put' | 'delete' | 'removed';
  next: MemoryItem | null;
  /** The stream's old image, when it was an item (live or expired, never a tombstone). */
  old: MemoryItem | null;
  /** The acting agent of the put or delete. */
  author: string | null;
  /** When the put or delete happened. */
  occurredAt: string;
  /** The embeddings of `next` and of `old`, as their 32-bit floats, when they had one. */
  embeddings?: { next: Float32Array | null; old: Float32Array | null };
}

/** The version before `next` of the same item: the old image when it is that item's previous version. */
function previousOf(change: RecordedMemoryChange): MemoryItem | null {
  const { next, old } = change;
  if (change.kind === 'delete') return old;
  return next && old && old.createdAt === next.createdAt && old.version === next.version - 1 ? old : null;
}

export interface MemoryUpkeepPorts {
  /** Keeps a replaced version until `expiresAt` (epoch seconds). Idempotent. */
  recordHistory(tenant: string, item: MemoryItem, expiresAt: number): Promise<void>;
  /** Erases the replaced versions of an item's lives up to the one created at `createdAt`. */
  eraseHistory(tenant: string, namespace: Namespace, key: string, createdAt: string): Promise<void>;
  /** Lists the namespace (idempotent). */
  registerNamespace(tenant: string, namespace: Namespace): Promise<void>;
  /** How many items were created in the namespace so far, as its list entry counts them (0: none counted). */
  namespaceCreations(tenant: string, namespace: Namespace): Promise<number>;
  /** Whether the namespace holds a live item (read consistently). */
  namespaceHasItems(tenant: string, namespace: Namespace): Promise<boolean>;
  /** Takes the namespace off the list, unless items were created in it since it counted `creations`. */
  forgetNamespace(tenant: string, namespace: Namespace, creations: number): Promise<void>;
  /** Keeps `code` as the code of `item`'s embedding unless its page holds it or a newer one. */
  keepEmbeddingCode(item: MemoryAddress, life: Pick<MemoryItem, 'createdAt' | 'version'>, code: Uint8Array): Promise<void>;
  /** Removes the code of `life`'s embedding (of `dimensions` numbers), or an older one, from its page. */
  dropEmbeddingCode(item: MemoryAddress, life: Pick<MemoryItem, 'createdAt' | 'version'>, dimensions: number): Promise<void>;
}

export interface MemoryUpkeepInput {
  /** The stream record's sequence number, reported back when its upkeep failed. */
  key: string;
  change: RecordedMemoryChange;
}

/** How long a replaced version is kept by default: 30 days. */
export const DEFAULT_HISTORY_DAYS = 30;

export class MemoryUpkeep {
  constructor(
    private readonly ports: MemoryUpkeepPorts,
    private readonly options: { historySeconds: number; now?: () => number; log?: Log },
  ) {}

  /**
   * One batch, in stream order. An item's records are handled one after the other (a delete
   * erases its history before a later put of the same key adds to it); items and namespaces
   * in parallel. Resolves with the record keys to retry: the first failed record of each item
   * and namespace.
   */
  async process(inputs: readonly MemoryUpkeepInput[]): Promise<{ failed: string[] }> {
    const failed = new Set<string>();
    const byItem = groupBy(inputs, ({ change }) => JSON.stringify([change.tenant, change.namespace, change.key]));
    const byNamespace = groupBy(inputs, ({ change }) => JSON.stringify([change.tenant, change.namespace]));
    await Promise.all([
      ...[...byItem.values()].map(async (records) => {
        for (const record of records) {
          try {
            await this.keepHistory(record.change);
            await this.keepCode(record.change);
          } catch (error) {
            this.log('could not keep a memory item history; the stream will retry', record, error);
            failed.add(record.key);
            return;
          }
        }
      }),
      ...[...byNamespace.values()].map(async (records) => {
        try {
          await this.keepNamespace(records.map((record) => record.change));
        } catch (error) {
          this.log('could not update the namespace list; the stream will retry', records[0] as MemoryUpkeepInput, error);
          failed.add((records[0] as MemoryUpkeepInput).key);
        }
      }),
    ]);
    return { failed: [...failed] };
  }

  private async keepHistory(change: RecordedMemoryChange): Promise<void> {
    const { historySeconds } = this.options;
    if (change.kind === 'delete' && change.old) {
      // A deleted item's past goes with it.
      await this.ports.eraseHistory(change.tenant, change.namespace, change.key, change.old.createdAt);
      return;
    }
    if (change.kind !== 'put' || historySeconds <= 0) return;
    const replaced = previousOf(change);
    if (!replaced) return;
    // Never kept past the expiry the item was written with.
    const nowSeconds = Math.floor((this.options.now ?? Date.now)() / 1000);
    const itemExpiry = replaced.expiresAt === undefined ? Number.POSITIVE_INFINITY : Math.floor(Date.parse(replaced.expiresAt) / 1000);
    const expiresAt = Math.min(nowSeconds + historySeconds, itemExpiry);
    if (expiresAt <= nowSeconds) return;
    await this.ports.recordHistory(change.tenant, replaced, expiresAt);
  }

  /** The code of a put's embedding kept; the code of an embedding a put, a delete or TTL took away removed. */
  private async keepCode(change: RecordedMemoryChange): Promise<void> {
    const item = { tenant: change.tenant, namespace: change.namespace, key: change.key };
    const written = change.kind === 'put' ? change.embeddings?.next : null;
    if (change.next && written) {
      await this.ports.keepEmbeddingCode(item, change.next, embeddingCode(written));
      return;
    }
    const gone = change.embeddings?.old;
    if (change.old && gone) await this.ports.dropEmbeddingCode(item, change.old, gone.length);
  }

  /**
   * A namespace is listed once an item is created in it, and leaves the list once a delete
   * or TTL leaves it without a live item (`forgetIfEmpty`). The check reads the table as it is
   * now, so it covers every record of the batch before it.
   */
  private async keepNamespace(changes: readonly RecordedMemoryChange[]): Promise<void> {
    const { tenant, namespace } = changes[0] as RecordedMemoryChange;
    const removes = changes.some((change) => change.kind !== 'put');
    const creates = changes.some((change) => change.kind === 'put' && change.next?.version === 1);
    if (!removes && !creates) return;
    if (removes && (await forgetIfEmpty(this.ports, tenant, namespace))) return;
    await this.ports.registerNamespace(tenant, namespace);
  }

  private log(message: string, record: MemoryUpkeepInput, error: unknown): void {
    const detail = { tenant: record.change.tenant, namespace: record.change.namespace, key: record.change.key, error: String(error) };
    (this.options.log ?? warnToConsole)(message, detail);
  }
}

/** What forgetting an emptied namespace needs (`forgetIfEmpty`). */
export type NamespaceForgetting = Pick<MemoryUpkeepPorts, 'namespaceCreations' | 'namespaceHasItems' | 'forgetNamespace'>;

/**
 * Takes the namespace off the list when it holds no live item: the one rule for it, whoever
 * emptied it (the change hook after a delete or TTL, a user's erasure). The look reads the table
 * as it is now; a put that creates an item while it reads, behind where it has read, was
 * answered and must stay found: it counts its creation after writing its item, so the count read
 * before the look either moved, and the namespace is not forgotten, or the put lists it again.
 * Resolves with whether the look found it empty.
 */
export async function forgetIfEmpty(ports: NamespaceForgetting, tenant: string, namespace: Namespace): Promise<boolean> {
  const creations = await ports.namespaceCreations(tenant, namespace);
  if (await ports.namespaceHasItems(tenant, namespace)) return false;
  await ports.forgetNamespace(tenant, namespace, creations);
  return true;
}

function groupBy<T>(list: readonly T[], keyOf: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of list) {
    const key = keyOf(item);
    const group = groups.get(key);
    if (group) group.push(item);
    else groups.set(key, [item]);
  }
  return groups;
}
