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
  /** Per session, the id of the newest checkpoint this saver started to put there. */
  private readonly newestPut = new Map<string, string>();

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

  /** Notes that this saver puts (or has put) the checkpoint at `node` of `sessionId`. */
  notePut(sessionId: string, node: string): void {
    const key = `${sessionId} ${node}`;
    this.puts.delete(key);
    this.puts.add(key);
    if (this.puts.size > REMEMBERED_PUTS) this.puts.delete(this.puts.values().next().value as string);
  }

  /** Notes the checkpoint id of a put this saver starts on `sessionId`. */
  notePutOf(sessionId: string, checkpointId: string): void {
    const newest = this.newestPut.get(sessionId);
    this.newestPut.delete(sessionId);
    this.newestPut.set(sessionId, newest !== undefined && newest > checkpointId ? newest : checkpointId);
    if (this.newestPut.size > REMEMBERED_PUTS) this.newestPut.delete(this.newestPut.keys().next().value as string);
  }

  /**
   * Whether this saver is running a graph on `sessionId` whose later checkpoint `checkpointId`
   * is (LangGraph chains a run's puts but sends each step's writes at once, so these arrive
   * first): it put an older one there. Checkpoint ids are uuid6, so they sort by time.
   */
  expectsPut(sessionId: string, checkpointId: string): boolean {
    const newest = this.newestPut.get(sessionId);
    return newest !== undefined && checkpointId > newest;
  }

  /** Forgets a put that failed: its checkpoint is not there to write to. */
  forgetPut(sessionId: string, node: string): void {
    this.puts.delete(`${sessionId} ${node}`);
  }

  /** Whether this saver puts, or lately put, the checkpoint at `node` (its writes then take their turn after it). */
  wasPut(sessionId: string, node: string): boolean {
    return this.puts.has(`${sessionId} ${node}`);
  }
}
