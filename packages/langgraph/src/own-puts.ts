/**
 * The `put`s one saver has under way, per thread and namespace, so that its reads see them as
 * `MemorySaver`'s do (its `put` has stored the checkpoint before any timer or request could
 * come between).
 *
 * LangGraph's loop does not wait for its puts: it chains them, each sent when the one before
 * has answered, and goes on running nodes. An `invoke` that is aborted (its `signal`, or a
 * `timeout`) rejects at once, because LangChain races the run with the signal, while that chain
 * is still sending the checkpoints the run made before the abort. Without this, a `getState`
 * right after, or the next `invoke` of the thread, read the head before those puts landed: the
 * state from before the aborted run, and a resume from there (LangGraph's cancellation tests,
 * "should resume from last successful invocation"; docs/langgraph.md).
 */
export class OwnPuts {
  /** Per thread and namespace, each put under way (settled when it ends) with its checkpoint's id. */
  private readonly underWay = new Map<string, Map<Promise<void>, string>>();

  /**
   * Notes a put of `checkpointId` in `thread`'s namespace `checkpointNs` as under way until the
   * function it returns is called. Called before the put's first `await`.
   */
  begin(thread: string, checkpointNs: string, checkpointId: string): () => void {
    const key = keyOf(thread, checkpointNs);
    let done = () => {};
    const settled = new Promise<void>((resolve) => {
      done = resolve;
    });
    const puts = this.underWay.get(key) ?? new Map<Promise<void>, string>();
    puts.set(settled, checkpointId);
    this.underWay.set(key, puts);
    return () => {
      done();
      puts.delete(settled);
      if (puts.size === 0 && this.underWay.get(key) === puts) this.underWay.delete(key);
    };
  }

  /**
   * Waits until this saver has no put under way for `thread` (every namespace when
   * `checkpointNs` is undefined; every thread when `thread` is too). Again after each wait: the
   * chain sends its next put as the one before answers, and a read means the newest checkpoint
   * the run has made. A read never waits for a put that waits for it, so this always ends.
   */
  async settled(thread: string | undefined, checkpointNs: string | undefined): Promise<void> {
    for (;;) {
      const waiting = [...this.underWay]
        .filter(([key]) => {
          const [keyThread, keyNs] = JSON.parse(key) as [string, string];
          return (thread === undefined || keyThread === thread) && (checkpointNs === undefined || keyNs === checkpointNs);
        })
        .flatMap(([, puts]) => [...puts.keys()]);
      if (waiting.length === 0) return;
      await Promise.all(waiting);
      // LangGraph's chain sends its next put a few microtasks after this one answered: it must be
      // under way when the loop looks again.
      await chainTicks();
    }
  }

  /** The checkpoints of `thread`'s namespace `checkpointNs` whose puts are under way. */
  checkpointsUnderWay(thread: string, checkpointNs: string): string[] {
    return [...(this.underWay.get(keyOf(thread, checkpointNs))?.values() ?? [])];
  }
}

/**
 * Lets LangGraph's chain of puts send its next put: the microtasks it takes after the one before
 * answered. Microtasks, not a timer nor `setImmediate`: tests with fake timers (LangGraph's own
 * `node_error_handler.test.ts` among them) never fire those, and a saver waiting on one hangs.
 */
export async function chainTicks(): Promise<void> {
  for (let tick = 0; tick < CHAIN_TICKS; tick++) await Promise.resolve();
}

/** Microtasks a read lets pass after the puts it waited for: LangGraph's chain takes about four to send the next. */
const CHAIN_TICKS = 20;

const keyOf = (thread: string, checkpointNs: string) => JSON.stringify([thread, checkpointNs]);
