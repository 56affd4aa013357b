/**
 * How many checkpoints `NewCheckpoints` remembers. Forgetting one only makes a read that could
 * have been skipped: enough for the steps of the runs one process has under way.
 */
const REMEMBERED = 10_000;

/** What the saver knows of one checkpoint of a thread. */
interface Known {
  /** Made in this process: its `put` began here (or, see `holdsNothing`, is to) before any read returned it or asked for it. */
  made: boolean;
  /** The subgraph namespaces of its tasks that this saver began to put a checkpoint in. */
  children: Set<string>;
}

/**
 * The checkpoints LangGraph made in this process, so that a subgraph's first read, in a
 * namespace named after one of them, is answered without a request.
 *
 * A subgraph's namespace is named after its task (`graph:<task id>`), and the task's id after
 * the checkpoint the task belongs to (LangGraph's `uuid5` of the task's name and step, in the
 * checkpoint id's namespace); the subgraph's read carries that checkpoint's id (its config's
 * `checkpoint_map`, under the parent's namespace). When that checkpoint is one LangGraph made in
 * this run, no other process knew its id before this saver put it, so the namespace holds only
 * what this saver put there since (docs/langgraph.md, "A subgraph's first read").
 *
 * A checkpoint is made here when this saver begins its `put` before any read returned it or
 * asked for it. LangGraph starts a step's tasks before that `put` (it chains its puts, each sent
 * when the one before has answered), so the subgraph's read often names a checkpoint not heard
 * of yet: it is taken as made here when this saver is putting a checkpoint made here in the
 * same namespace at that moment. The checkpoint a run starts from is one its `getTuple`
 * returned (known, and not made here), and while the run works on that one's tasks it puts
 * nothing there: each `put` of a run is of a checkpoint it made, which its tasks then belong to.
 *
 * Whenever it is not known, the read is made:
 * - a checkpoint read back (`getTuple` or `list` returned it, or `getTuple` was asked for it): a
 *   run resuming it, in this process or after another one, finds in its namespaces what any
 *   process put there. A read revokes it, so a thread that went on in another process and comes
 *   back here is read.
 * - a checkpoint not heard of while no `put` of one made here is under way in its namespace, one
 *   whose `put` began after a read of it or a put in its subgraph, or one forgotten (more than
 *   `REMEMBERED` since);
 * - a namespace this saver put a checkpoint in;
 * - a namespace not named after a task (a subgraph compiled with `checkpointer: true` keeps one
 *   namespace, and its state, from run to run);
 * - a thread deleted, copied into or pruned here: everything of it.
 *
 * Two processes running one thread at once (which LangGraph does not order either) may write a
 * namespace of a checkpoint made here once it has landed; a run here does not see those.
 */
export class NewCheckpoints {
  private readonly known = new Map<string, Known>();

  /** A `put` of `checkpointId` in `thread`'s `checkpointNs` begins: made here, unless known otherwise. */
  putBegins(thread: string, checkpointNs: string, checkpointId: string): void {
    this.touch(thread, checkpointNs, checkpointId, true);
  }

  /** A read returned `checkpointId`, or asked for it: a checkpoint of storage, whatever it was before. */
  read(thread: string, checkpointNs: string, checkpointId: string): void {
    const known = this.touch(thread, checkpointNs, checkpointId, false);
    known.made = false;
  }

  /**
   * A `put` in the subgraph namespace `checkpointNs` begins; `parents` is its config's checkpoint
   * map, or its metadata's `parents`, which name the checkpoint its task belongs to. Without one,
   * nothing of the thread is known any more.
   */
  childPutBegins(thread: string, checkpointNs: string, parents: Parents): void {
    const parent = parentOf(checkpointNs, parents);
    if (!parent) {
      this.forgetThread(thread);
      return;
    }
    this.touch(thread, parent.checkpointNs, parent.checkpointId, false).children.add(checkpointNs);
  }

  /**
   * Whether the subgraph namespace `checkpointNs` of `thread` is known to hold no checkpoint: the
   * checkpoint its task belongs to (named by `parents`, the read's checkpoint map) was made here,
   * the namespace is named after that task, and this saver put nothing in it. `underWay` says which checkpoints of a namespace
   * this saver is putting.
   */
  holdsNothing(thread: string, checkpointNs: string, parents: Parents, underWay: (checkpointNs: string) => readonly string[]): boolean {
    const parent = parentOf(checkpointNs, parents);
    if (!parent || !namedAfterTask(checkpointNs, parent.checkpointNs)) return false;
    let known = this.known.get(keyOf(thread, parent.checkpointNs, parent.checkpointId));
    if (!known) {
      const making = underWay(parent.checkpointNs).some(
        (checkpointId) => this.known.get(keyOf(thread, parent.checkpointNs, checkpointId))?.made === true,
      );
      if (!making) return false;
      // Made by the run whose puts are under way: its own put comes after them.
      known = this.touch(thread, parent.checkpointNs, parent.checkpointId, true);
    }
    return known.made && !known.children.has(checkpointNs);
  }

  /** Nothing of `thread` is made here any more (it was deleted, copied into, pruned). */
  forgetThread(thread: string): void {
    const start = `[${JSON.stringify(thread)},`;
    for (const [key, known] of this.known) if (key.startsWith(start)) known.made = false;
  }

  private touch(thread: string, checkpointNs: string, checkpointId: string, made: boolean): Known {
    const key = keyOf(thread, checkpointNs, checkpointId);
    const known = this.known.get(key) ?? { made, children: new Set<string>() };
    // Most recently used last: the oldest is forgotten first.
    this.known.delete(key);
    this.known.set(key, known);
    if (this.known.size > REMEMBERED) this.known.delete(this.known.keys().next().value as string);
    return known;
  }
}

/** A checkpoint map (namespace → checkpoint id), as LangGraph puts it in a config's `checkpoint_map` and a checkpoint's `parents`. */
export type Parents = Record<string, unknown> | undefined;

/**
 * The checkpoint a subgraph namespace's task belongs to: the map's entry of the parent's
 * namespace, the longest one the namespace continues (`a:1|b:2` continues `a:1`, `b:2` the
 * thread's own, `''`). A namespace may carry more after its task (`graph:<task>|1` for a second
 * subgraph invoked in one task), so it is not cut at its last `|`.
 */
export function parentOf(checkpointNs: string, parents: Parents): { checkpointNs: string; checkpointId: string } | undefined {
  if (!parents || checkpointNs === '') return undefined;
  let found: { checkpointNs: string; checkpointId: string } | undefined;
  for (const [namespace, checkpointId] of Object.entries(parents)) {
    // The namespace's own entry (a subgraph's time travel) names a checkpoint in it, not its parent.
    if (typeof checkpointId !== 'string' || namespace === checkpointNs) continue;
    if (namespace !== '' && !checkpointNs.startsWith(`${namespace}|`)) continue;
    if (!found || namespace.length > found.checkpointNs.length) found = { checkpointNs: namespace, checkpointId };
  }
  return found;
}

/**
 * Whether a subgraph namespace is named after a task of its parent's checkpoint: its part after
 * the parent's namespace is `<node>:<task id>` (then maybe `|<counter>`, a second subgraph of
 * the same task). A subgraph compiled with `checkpointer: true` keeps one namespace whatever the
 * task (`<node>`: LangGraph drops the task ids), which holds its state from run to run.
 */
function namedAfterTask(checkpointNs: string, parentNs: string): boolean {
  const own = parentNs === '' ? checkpointNs : checkpointNs.slice(parentNs.length + 1);
  return /^[^|:]+:[^|:]+(\||$)/.test(own);
}

const keyOf = (thread: string, checkpointNs: string, checkpointId: string) => JSON.stringify([thread, checkpointNs, checkpointId]);
