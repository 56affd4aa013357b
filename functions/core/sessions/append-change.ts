import type { Caller } from '../model/fields.js';
import type { NodeRecord, SessionMeta, SessionScope, Tip } from '../model/model.js';
import { SessionItemFound, type SessionStore } from '../model/ports.js';
import { pointerOf } from '../model/tree.js';
import type { HeadMove } from '../write/head-move.js';
import type { AttemptContext } from '../write/write-retry.js';
import { visibleState, type WriteTargets } from '../write/write-target.js';
import type { AppendInput, AppendResult, HeadState, KeyAccess } from './append-input.js';
import type { ChainPlan } from './chain.js';
import { nodeView } from './session-views.js';

/**
 * The second half of an append (session-tree-service.ts `appendMessages`), once its tip is read
 * and its chain planned: the session's agent and user, the key's access, the head's state, the
 * change.
 *
 * A first write of a life needs the session item (its agent, user, lifetime), once for both
 * the append and the state it carries. The tip's read tells whether there is one (ports.ts
 * `sessionItem`: the newest item from the session item to the log's end, the tip itself when
 * the log holds a change). When it found none (`EmptyTip.absent`), the item is not read: the
 * append is made as for a session without one (no agent, no user, the deployment's lifetime, as
 * a read finding none gave), and its transaction holds only while there is none (TipChange
 * `sessionAbsent`: the session item's update in it is conditional on its absence, as the log's
 * place is on its own). So a thread's first append, LangGraph's first `put`, costs the tip's
 * round and the transaction's, where a read of the item between them made it three. What the
 * tip's read saw is not what proves it: the transaction's check comes after it, and any item
 * there then refuses it (one made in between, or an item of a life a delete was closing). When
 * the tip's read found an item (`POST /v1/sessions` made the session, or it is an expired
 * session's), the item is read and the append made from it, as it always was: the tip, the
 * item, the transaction, and no transaction refused (a refused one is billed as written). The
 * same when a transaction made as for none is refused by an item made since, or the append as
 * for none would answer anything but its own change (a refusal may be the missing item's doing:
 * a limited key, typed fields; an append that writes nothing proves nothing): it is made again
 * on the same tip, from the item its refusal brought back (`ReturnValuesOnConditionCheckFailure`)
 * or from a read of it. A copy's own append reads the item its copy made.
 */
export async function appendChange(parts: AppendParts, call: AppendCall): Promise<AppendResult> {
  const { scope, input, planned } = call;
  if (planned.tip.kind !== 'empty') return appendOn(parts, call, undefined);
  // Only when the tip read found no session item either (`EmptyTip.absent`): a session that has
  // one (POST /v1/sessions made it) would refuse the transaction, which is billed as written.
  if (planned.tip.absent && scope.copy === undefined && !input.opensCopy) {
    try {
      return await appendOn(parts, call, null, true);
    } catch (error) {
      if (!(error instanceof AssumedWrong)) throw error;
      // The item the transaction found, when its refusal brought it whole: no read then.
      if (error.meta !== undefined) return appendOn(parts, call, error.meta);
    }
  }
  return appendOn(parts, call, await parts.store.getMeta(scope));
}

/** What an append's change asks of the service that makes it. */
export interface AppendParts {
  store: Pick<SessionStore, 'commit' | 'getMeta'>;
  targets: Pick<WriteTargets, 'sessionOf'>;
  /** The key's access to the session (its agent), for an append that moves the head by `move`. */
  checkKeyAccess(tenant: string, sessionAgentId: string | null, access: KeyAccess | undefined, move?: HeadMove): Promise<void>;
  /** The new head's state of an append that carries one. */
  headStateOf(at: HeadStateAt): Promise<HeadState>;
}

/** Where an append's new head's state is made: the tip, the head it follows, the session item read (if any). */
export interface HeadStateAt {
  scope: SessionScope;
  tip: Tip;
  head: NodeRecord;
  input: AppendInput;
  caller: Caller;
  at: string;
  meta: SessionMeta | null | undefined;
}

/** An append whose tip is read and whose chain is planned. */
export interface AppendCall {
  scope: SessionScope;
  input: AppendInput;
  access: KeyAccess | undefined;
  planned: { tip: Tip; parent: NodeRecord; at: string; attempt: AttemptContext; plan: ChainPlan };
}

/**
 * The append with `meta`, the session item read for a first write of a life (undefined after
 * one: the tip says). `assumed`: `meta` is null because the item was not read; anything but a
 * change whose transaction proved the item absent then throws `AssumedWrong`.
 */
async function appendOn(
  parts: AppendParts,
  call: AppendCall,
  meta: SessionMeta | null | undefined,
  assumed = false,
): Promise<AppendResult> {
  const { scope, input, access } = call;
  const { tip, parent, at, attempt } = call.planned;
  const { chain, created, last, anchor } = call.planned.plan;
  /** Whether the change is being committed: its failures are the store's, and hold whatever the item. */
  let committing = false;
  try {
    const session = await parts.targets.sessionOf(scope, tip, meta);
    // Under a parent other than the head, the head moves to a node that reads the parent's state.
    const move = parent.id === tip.head ? undefined : { scope, tip, from: tip.headVersion, to: pointerOf(parent, tip) };
    await parts.checkKeyAccess(scope.tenant, session.agentId, access, move);
    const turn =
      input.state === undefined
        ? undefined
        : await parts.headStateOf({ scope, tip, head: last, input, caller: access?.caller ?? null, at, meta });

    // Pointers as of the tip read: a reused node that was the head has its pointer there.
    const views = chain.map((node) => nodeView(node, tip));
    const version = turn ? (turn.version?.version ?? turn.target.pointer) : undefined;
    const result: AppendResult = !turn
      ? { nodes: views, head: last.id }
      : {
          nodes: views.map((view) => (view.id === last.id ? { ...view, stateVersion: version as number } : view)),
          head: last.id,
          version,
          state: visibleState(turn.target.schema, access?.caller ?? null, turn.state),
          changed: turn.version !== undefined,
        };
    // A copy's last append opens its session even when it has nothing else to write.
    if (created.length > 0 || last.id !== tip.head || turn?.version || input.opensCopy) {
      const kept = input.keep?.(result);
      committing = true;
      await parts.store.commit(scope, {
        basedOn: tip,
        ...(kept ? { kept } : {}),
        ...(turn?.version ? { version: turn.version, prior: turn.target.current } : {}),
        head: { id: last.id, version: turn?.version?.version ?? pointerOf(last, tip), depth: last.depth, place: last.place },
        newNodes: created,
        parent: anchor,
        touchSessionAt: at,
        mayCreateSession: tip.kind === 'empty',
        ...(assumed ? { sessionAbsent: true } : {}),
        sessionAgentId: session.agentId,
        sessionUserId: session.userId,
        ...(session.listed === undefined ? {} : { sessionListed: session.listed }),
        ...(session.lifetime ? { lifetime: session.lifetime } : {}),
        ...(session.touchedAt ? { sessionTouchedAt: session.touchedAt } : {}),
        contended: attempt.raced || attempt.queued === true,
        ...(input.opensCopy ? { opensCopy: true as const } : {}),
      });
    } else if (assumed) {
      // Nothing to write, so nothing proves the item absent: the answer is made from it.
      throw new AssumedWrong();
    }
    return result;
  } catch (error) {
    if (assumed && error instanceof SessionItemFound) throw new AssumedWrong(error.meta);
    if (assumed && !committing) throw new AssumedWrong();
    throw error;
  }
}

/** An append made as for a session without its item might not answer as with the item read (`appendOn`). */
class AssumedWrong extends Error {
  constructor(
    /** The session item the change's transaction found instead, when it came back whole (SessionItemFound). */
    readonly meta?: SessionMeta | null,
  ) {
    super('the append is made again from the session item');
  }
}
