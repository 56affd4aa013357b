import type { SessionScope, Tip } from '../../core/model/model.js';
import * as keys from '../table/keys.js';
import { batchDelete, type Item, type TableClient } from '../table/table-client.js';

/** Sessions whose unclaimed writes a process keeps (the oldest are dropped). */
const SESSIONS = 1_000;

/**
 * What a writer put under a life of a session ahead of its claim of the log's next place — the
 * index the change it moves past owes, the pointers it moves, an index written ahead
 * (log-writer.ts) — until a claim of its own in that life lands after it, or it sees that life
 * closed and takes it back.
 *
 * A delete puts its fence, then reads the session and erases what it read. A writer that read
 * the tip before the fence may put those items after that read: they are under the closed
 * life's keys, where nobody reads, but they hold the session's text (a preview of each
 * message), and API.md section 12 says that once a session is deleted, or its user's erasure is
 * done, none of it is stored. Such a writer's claim fails (the fence, or a tombstone, is in its
 * place) and it reads the tip again: either tells it that its life is closed, and it deletes
 * what it put there. Only then: in a live life another writer may have claimed relying on an
 * item this one put (it owed the same), and a claim of this writer that lands after its puts
 * vouches for them (a delete that closes the life later reads them), so the common write pays
 * nothing for this. What is left: a writer stopped between its puts and its claim's answer (a
 * process killed, a Lambda past its timeout), and one whose claim lost to a change a delete had
 * not reached yet and that never reads the session again (docs/architecture.md, "Deleting a session").
 */
export class UnclaimedWrites {
  private readonly bySession = new Map<string, Unclaimed[]>();

  constructor(private readonly table: TableClient) {}

  /** Keeps what is being put under `life` ahead of a claim (`itemKeys`: the items or their keys); `sent` settles once it has landed or failed. */
  sent(scope: SessionScope, life: number, itemKeys: readonly Item[], sent: Promise<unknown>): void {
    if (itemKeys.length === 0) return;
    const key = keys.session(scope);
    const write: Unclaimed = {
      life,
      keys: itemKeys.map((item) => ({ pk: item.pk, sk: item.sk })),
      settled: false,
      sent: sent.then(
        () => {
          write.settled = true;
        },
        () => {
          write.settled = true;
        },
      ),
    };
    const writes = this.bySession.get(key) ?? [];
    this.bySession.delete(key);
    this.bySession.set(key, [...writes, write]);
    if (this.bySession.size > SESSIONS) this.bySession.delete(this.bySession.keys().next().value as string);
  }

  /**
   * A claim of this process landed in `life`: what it had put under that life and had landed
   * before is vouched for; what it had put under an earlier life, closed now, it takes back.
   */
  async claimed(scope: SessionScope, life: number): Promise<void> {
    const key = keys.session(scope);
    const writes = this.bySession.get(key);
    if (!writes) return;
    const left = writes.filter((write) => write.life !== life || !write.settled);
    if (left.length === 0) this.bySession.delete(key);
    else this.bySession.set(key, left);
    if (left.some((write) => write.life < life)) await this.takeBack(scope, life);
  }

  /**
   * A tip of the session read consistently: what was put under a life it shows closed (a
   * delete's fence, not another's copy; a later life) is taken back. Nothing to do, and no
   * request, when this process put nothing there that a claim has not vouched for.
   */
  async lifeSeen(scope: SessionScope, tip: Tip): Promise<void> {
    if (!this.bySession.has(keys.session(scope))) return;
    await this.takeBack(scope, tip.kind === 'closing' && tip.unopened !== true ? tip.incarnation + 1 : tip.incarnation);
  }

  /** Deletes what was put under a life below `open` (closed), once it has landed or failed. */
  async takeBack(scope: SessionScope, open: number): Promise<void> {
    const key = keys.session(scope);
    const taken = (this.bySession.get(key) ?? []).filter((write) => write.life < open);
    if (taken.length === 0) return;
    await Promise.all(taken.map((write) => write.sent));
    // Each key once: a write ahead and the claim's own puts may name the same items (BatchWriteItem refuses duplicates).
    const unique = new Map(taken.flatMap((write) => write.keys).map((item) => [String(item.sk), item]));
    await batchDelete(this.table, [...unique.values()]);
    const left = (this.bySession.get(key) ?? []).filter((write) => !taken.includes(write));
    if (left.length === 0) this.bySession.delete(key);
    else this.bySession.set(key, left);
  }
}

/** The key of a node's pointer item (node-index.ts, `movePointer`). */
export function nodePointerKey(scope: SessionScope, nodeId: string, life: number): Item {
  return { pk: keys.session(scope), sk: keys.nodePointer(nodeId, life) };
}

/** What a writer put under a life ahead of a claim. */
interface Unclaimed {
  readonly life: number;
  /** The keys of the items put (or moved: a pointer). */
  readonly keys: readonly Item[];
  /** Settles once the puts have landed or failed. */
  readonly sent: Promise<void>;
  settled: boolean;
}
