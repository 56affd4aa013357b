/** How many checkpoints `WriteTurns` remembers having put: enough for the steps a run has in flight. */
const REMEMBERED_PUTS = 1_000;

/**
 * The writes one saver sends to one session, one at a time, in the order they were made.
 *
 * agentstate orders a session's writes through its log: two writes that arrive together race for
 * the next place, and the loser reads again and retries after a backoff. LangGraph's loop sends
 * the next checkpoint's `put` while the writes of the last one are still on their way, so
 * without turns nearly every step raced itself: a 20-step graph took 3.4 s, most of it in
 * backoffs (docs/langgraph.md, "Speed"). Taking turns within the saver costs no request and
 * leaves the server's ordering for writers in other processes.
 */
export class WriteTurns {
  private readonly tails = new Map<string, Promise<unknown>>();
  private readonly puts = new Set<string>();

  /** Runs `write` after every write already queued for `sessionId` has finished (or failed). */
  inTurn<T>(sessionId: string, write: () => Promise<T>): Promise<T> {
    const previous = this.tails.get(sessionId) ?? Promise.resolve();
    const run = previous.then(write, write);
    const tail = run.then(
      () => undefined,
      () => undefined,
    );
    this.tails.set(sessionId, tail);
    void tail.then(() => {
      if (this.tails.get(sessionId) === tail) this.tails.delete(sessionId);
    });
    return run;
  }

  /** Notes that this saver has put the checkpoint at `node` of `sessionId`. */
  notePut(sessionId: string, node: string): void {
    const key = `${sessionId} ${node}`;
    this.puts.delete(key);
    this.puts.add(key);
    if (this.puts.size > REMEMBERED_PUTS) this.puts.delete(this.puts.values().next().value as string);
  }

  /** Whether this saver put the checkpoint at `node` lately (its writes then race the next put). */
  wasPut(sessionId: string, node: string): boolean {
    return this.puts.has(`${sessionId} ${node}`);
  }
}
