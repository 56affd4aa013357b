/**
 * Whether the API key a WebSocket connection was made with is still live, as this instance
 * knows it (docs/architecture.md, "A revoked key's connections"). A connection keeps the
 * hash of its key; the change hook checks it before it sends a follower anything, and the
 * WebSocket function before it answers a message. Each instance reads a key at most once per
 * `KEY_RECHECK_MS` (API.md section 14: no read per event), so what it knows is never older
 * than that: a check that starts more than `KEY_RECHECK_MS` after a revoke answered reads a
 * value read after the revoke. A revoked key stays revoked (a revoke is never undone), so it
 * is not read again.
 */

/** How stale what an instance knows of a key may be, at most. */
export const KEY_RECHECK_MS = 1_000;
/** Keys one instance remembers; past it, it forgets them all (and reads each again once). */
const MAX_KEYS = 10_000;

interface Known {
  /** When the read began (on `now`): what it answers is at least as new as that. */
  at: number;
  live: Promise<boolean>;
  revoked: boolean;
}

export class KeyLiveness {
  private readonly known = new Map<string, Known>();

  /**
   * `read`: the key's liveness, read from the table (consistently: a read that begins after
   * the revoke answered sees it); `now`: a monotonic clock in ms.
   */
  constructor(
    private readonly read: (keyHash: string) => Promise<boolean>,
    private readonly now: () => number = () => performance.now(),
    private readonly maxAgeMs = KEY_RECHECK_MS,
  ) {}

  /** Whether the key is live; reads it when what is known is older than the bound. A failed read is not kept. */
  isLive(keyHash: string): Promise<boolean> {
    const now = this.now();
    const known = this.known.get(keyHash);
    if (known && (known.revoked || now - known.at < this.maxAgeMs)) return known.live;
    if (this.known.size >= MAX_KEYS) this.known.clear();
    const entry: Known = { at: now, live: this.read(keyHash), revoked: false };
    this.known.set(keyHash, entry);
    entry.live.then(
      (live) => {
        entry.revoked = !live;
      },
      () => {
        if (this.known.get(keyHash) === entry) this.known.delete(keyHash);
      },
    );
    return entry.live;
  }
}
