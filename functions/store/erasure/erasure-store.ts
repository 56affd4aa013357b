import { GetCommand, PutCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { ErasureRecord, ErasureStart, ErasureStore } from '../../core/erasure/erasure.js';
import type { DynamoDbSessionStore } from '../sessions/session-store.js';
import { ERASURE_ITEM_KIND, KIND_ATTRIBUTE } from '../table/item-kinds.js';
import * as keys from '../table/keys.js';
import { tableKeys } from '../table/table.js';
import { conditionally, type Item, isConditionFailure, type TableClient } from '../table/table-client.js';

/**
 * Erasures of users (core/erasure/erasure.ts has the steps):
 *
 *   E#<tenant>#<erasure>    E            kind erasure: status (closing, running, done), userId
 *                                        (removed when done; `subject: tenant` for the admin
 *                                        CLI's), `cursor` (how far closing got), the counts,
 *                                        createdAt, finishedAt
 *   E#<tenant>#<erasure>    S#<session>  a session the erasure closed in life `life`, until it is erased
 *   E#<tenant>#<erasure>    N#<path>     a memory namespace it closed items in, until their past is erased
 *   E#<tenant>#user#<user>  U            the erasure of the user that is not done yet (`erasureId`;
 *                                        deleted just before it is set done)
 *
 * The `DELETE` does a bounded amount of work whatever the user has: it claims the user's
 * `U` item (or joins the erasure that holds it), puts the erasure's item as `closing`, and
 * waits, reading that item, until the change hook has closed everything of the user
 * (erasure-close.ts: in steps of bounded size, each of which moves `cursor` and so makes the
 * stream record that drives the next) and set it `running`. Then it answers `202`. If the
 * wait runs out first, it answers `409 conflict` with the erasure's id: the hook goes on
 * regardless, and the `DELETE` sent again joins the same erasure and answers `202` once
 * closing is done. Nothing of the work depends on the request that started it, so a request
 * that dies does not stop it.
 *
 * Nor does a run that dies for good (killed, its stream record given up: nothing brings the
 * next): the erasure's item is an entry of the retention sweep's index (`byPruneDue`,
 * `dpk`/`dsk`), due `STALL_MARGIN_MS` after the end of the run that last wrote it. Every write a
 * run makes of the item (each step's move of the cursor, `running`, a run's hand-on) moves it
 * on; `done` removes it. So it comes due only when no run has moved the erasure for longer than
 * a run takes, and then the sweep runs the erasure's next steps as the change hook would
 * (erasure-finish.ts; streams/prune-sweep.ts), its moves of the cursor bringing the hook back. A
 * `DELETE` that joins an erasure found due so brings a run too (`nudgeIfStalled`).
 */

/** How long a `DELETE` waits for the hook to close what the user has (then `409`, the work goes on); see `erasureWaitFrom`. */
const DEFAULT_WAIT_MS = 12_000;
/** The first pause between reads of the erasure while waiting; each is longer, up to `MAX_POLL_MS`. */
const FIRST_POLL_MS = 50;
const MAX_POLL_MS = 500;
/**
 * A `U` item naming an erasure that does not exist (its `DELETE` died between the two puts) is
 * completed by the next `DELETE` while it is this young, and replaced once older: it may instead
 * name an erasure that TTL removed, done with its `U` item left behind (erasure-finish.ts deletes
 * it before `done`, but one left by a hook that deleted it after may still be there).
 */
const ORPHAN_MS = 60 * 60_000;

/**
 * How long one run of an erasure goes on at most (the change hook's and the retention sweep's;
 * less when its invocation has less time left): then it hands on (erasure-finish.ts).
 */
export const ERASURE_RUN_MS = 20_000;
/**
 * How long after the end of the run that last wrote it an erasure's item is due on the retention
 * index (`byPruneDue`): long enough for the run that the write brings to start and end (at most
 * `ERASURE_RUN_MS`, and a running erasure's run writes the item only at its end), so that an
 * erasure comes due only when its runs stopped.
 */
const STALL_MARGIN_MS = 30_000;

/**
 * The wait of a `DELETE` (env `AGENTSTATE_ERASURE_WAIT_MS`, default 12 s): well within the route
 * functions' timeout (20 s, lib/agent-state.ts), so that the `409` is what a caller gets, never a
 * function killed mid-wait.
 */
export function erasureWaitFrom(env: NodeJS.ProcessEnv): number {
  const raw = env.AGENTSTATE_ERASURE_WAIT_MS?.trim();
  if (!raw) return DEFAULT_WAIT_MS;
  const wait = Number(raw);
  if (!Number.isFinite(wait) || wait < 0) throw new Error(`AGENTSTATE_ERASURE_WAIT_MS must be a number of milliseconds, not "${raw}"`);
  return wait;
}

export class DynamoDbErasureStore implements ErasureStore {
  constructor(
    protected readonly table: TableClient,
    protected readonly sessions: DynamoDbSessionStore,
    private readonly waitMs = DEFAULT_WAIT_MS,
  ) {}

  /**
   * Starts the erasure of the user, or joins the one of that user that is not done yet (so that
   * concurrent `DELETE`s make one erasure, counted once), and waits up to `waitMs` for its
   * closing. `closed`: everything of the user is unreadable.
   */
  async start(tenant: string, userId: string): Promise<ErasureStart> {
    const erasure = await this.claim(tenant, userId);
    const closed = await this.waitClosed(tenant, erasure.erasureId);
    return { erasureId: erasure.erasureId, closed };
  }

  async get(tenant: string, erasureId: string): Promise<ErasureRecord | null> {
    const found = await this.itemOf(tenant, erasureId);
    return found ? recordOf(found) : null;
  }

  /** The erasure's item, read consistently. */
  protected async itemOf(tenant: string, erasureId: string): Promise<Item | null> {
    const { Item } = await this.table.send(
      new GetCommand({ TableName: this.table.tableName, Key: erasureKey(tenant, erasureId), ConsistentRead: true }),
    );
    return Item ?? null;
  }

  /**
   * Puts the erasure's item as `closing`, for the change hook to close and erase what it
   * covers: what the user has (or, with null, the whole tenant) made at or before its time.
   * Idempotent: an item already there is left as it is.
   */
  protected async open(tenant: string, erasureId: string, userId: string | null, createdAt: string): Promise<void> {
    const due = this.dueAfterRun(tenant, erasureId, Date.now() + ERASURE_RUN_MS);
    try {
      await this.table.send(
        new PutCommand({
          TableName: this.table.tableName,
          Item: {
            ...erasureKey(tenant, erasureId),
            [KIND_ATTRIBUTE]: ERASURE_ITEM_KIND,
            status: 'closing',
            ...(userId === null ? { subject: 'tenant' } : { userId }),
            cursor: FIRST_CURSOR,
            sessions: 0,
            memoryItems: 0,
            documents: 0,
            createdAt,
            // Due should the run its put brings never come (erasure-finish.ts goes on from the sweep).
            [tableKeys.pruneDueIndex.partitionKey]: due.dpk,
            [tableKeys.pruneDueIndex.sortKey]: due.dsk,
          },
          ConditionExpression: 'attribute_not_exists(pk)',
        }),
      );
    } catch (error) {
      if (!isConditionFailure(error)) throw error;
    }
  }

  /** The user's erasure that is not done yet, made now if there is none (the user's `U` item decides). */
  private async claim(tenant: string, userId: string): Promise<{ erasureId: string }> {
    const key = { pk: keys.userErasure(tenant, userId), sk: keys.userErasureSort };
    for (;;) {
      const erasureId = crypto.randomUUID();
      const createdAt = new Date(this.table.now()).toISOString();
      const { Item: held } = await this.table.send(new GetCommand({ TableName: this.table.tableName, Key: key, ConsistentRead: true }));
      if (held) {
        const running = await this.itemOf(tenant, String(held.erasureId));
        const young = this.table.now() - Date.parse(String(held.createdAt)) < ORPHAN_MS;
        if (running && running.status !== 'done') {
          await this.nudgeIfStalled(tenant, String(held.erasureId), running);
          return { erasureId: String(held.erasureId) };
        }
        if (!running && young) {
          await this.open(tenant, String(held.erasureId), userId, String(held.createdAt));
          return { erasureId: String(held.erasureId) };
        }
      }
      try {
        await this.table.send(
          new PutCommand({
            TableName: this.table.tableName,
            Item: { ...key, erasureId, createdAt },
            // Only over what was read: a `DELETE` beside this one that claimed first is joined.
            ConditionExpression: held ? 'erasureId = :held' : 'attribute_not_exists(pk)',
            ...(held ? { ExpressionAttributeValues: { ':held': held.erasureId } } : {}),
          }),
        );
      } catch (error) {
        if (isConditionFailure(error)) continue;
        throw error;
      }
      await this.open(tenant, erasureId, userId, createdAt);
      return { erasureId };
    }
  }

  /**
   * The entry of the retention index (`dpk`/`dsk`) an erasure's item carries when written by a
   * run that ends at `deadline` (epoch ms; `ERASURE_RUN_MS` from now at most): due
   * `STALL_MARGIN_MS` after that, on the table's clock (which the sweep reads the index by).
   */
  protected dueAfterRun(tenant: string, erasureId: string, deadline: number): { dpk: string; dsk: string } {
    const left = Math.max(0, Math.min(deadline - Date.now(), ERASURE_RUN_MS));
    return erasureDue(tenant, erasureId, this.table.now() + left + STALL_MARGIN_MS);
  }

  /**
   * A `DELETE` that joins an erasure no run has moved for longer than a run takes (its entry on
   * the retention index due: its runs stopped, a run killed and its stream record given up)
   * brings a run: one conditional UpdateItem that moves the entry on, only while it is where this
   * read it, whose stream record brings the change hook. Only one of many `DELETE`s at once
   * lands it (each read the same entry); an erasure that is moving is left alone. The sweep's
   * count of failed runs stays on the entry.
   */
  private async nudgeIfStalled(tenant: string, erasureId: string, item: Item): Promise<void> {
    const read = item[tableKeys.pruneDueIndex.sortKey];
    if (typeof read !== 'string' || keys.pruneDueTime(read) > this.table.now()) return;
    const due = erasureDue(tenant, erasureId, this.table.now() + ERASURE_RUN_MS + STALL_MARGIN_MS, keys.pruneDueFailures(read));
    await conditionally(
      this.table.send(
        new UpdateCommand({
          TableName: this.table.tableName,
          Key: erasureKey(tenant, erasureId),
          UpdateExpression: 'SET #dpk = :dpk, #dsk = :dsk',
          ConditionExpression: '#dsk = :read',
          ExpressionAttributeNames: DUE_NAMES,
          ExpressionAttributeValues: { ':dpk': due.dpk, ':dsk': due.dsk, ':read': read },
        }),
      ),
    );
  }

  /** Whether the erasure left `closing` within the wait. */
  private async waitClosed(tenant: string, erasureId: string): Promise<boolean> {
    const until = Date.now() + this.waitMs;
    for (let pause = FIRST_POLL_MS; ; pause = Math.min(pause * 2, MAX_POLL_MS)) {
      const item = await this.itemOf(tenant, erasureId);
      if (item && item.status !== 'closing') return true;
      if (Date.now() + pause > until) return false;
      await new Promise((resolve) => setTimeout(resolve, pause));
    }
  }
}

/** Where closing starts: the user's sessions, first pass. */
const FIRST_CURSOR = JSON.stringify({ phase: 'sessions', pass: 1 });

/** The attribute names of an entry of the retention index `byPruneDue`. */
export const DUE_NAMES = { '#dpk': tableKeys.pruneDueIndex.partitionKey, '#dsk': tableKeys.pruneDueIndex.sortKey };

/**
 * An erasure's entry of the retention index, due at `dueMs` (with the count of the sweep's runs
 * of it that failed in a row, streams/prune-sweep.ts): the values of `dpk` and `dsk`.
 */
function erasureDue(tenant: string, erasureId: string, dueMs: number, failures = 0): { dpk: string; dsk: string } {
  return {
    dpk: keys.pruneDue(keys.erasureDueShard(tenant, erasureId)),
    dsk: failures > 0 ? keys.pruneDueRetry(dueMs, failures) : keys.pruneDueAt(dueMs),
  };
}

export function erasureKey(tenant: string, erasureId: string): Item {
  return { pk: keys.erasure(tenant, erasureId), sk: keys.erasureSort };
}

/** When a finished erasure's record goes (TTL): 30 days after it was done. */
export const RECORD_TTL_SECONDS = 30 * 86_400;

/** An erasure as `GET /v1/erasures/{erasureId}` shows it (`closing` is `running` to the caller). */
function recordOf(item: Item): ErasureRecord {
  return {
    erasureId: String(item.pk).split('#')[2] as string,
    status: item.status === 'done' ? 'done' : 'running',
    sessions: Number(item.sessions ?? 0),
    memoryItems: Number(item.memoryItems ?? 0),
    documents: Number(item.documents ?? 0),
    createdAt: String(item.createdAt),
    ...(typeof item.finishedAt === 'string' ? { finishedAt: item.finishedAt } : {}),
  };
}
