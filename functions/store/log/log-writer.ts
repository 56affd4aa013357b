import { encodedSize, type JsonObject } from '../../core/json/json.js';
import { AgentStateError } from '../../core/kernel/errors.js';
import { allSettledOrThrow } from '../../core/kernel/settled.js';
import { hasExpired, type Lifetime, NO_LIFETIME, storedLifetime } from '../../core/model/lifetime.js';
import type { SessionScope, Tip } from '../../core/model/model.js';
import { LeaseLostError, SessionItemFound, StaleTipError, type TipChange } from '../../core/model/ports.js';
import { documentPut, profileFenceMove } from '../documents/document-store.js';
import { changedEntries } from '../sessions/list-entries.js';
import { newMetadataStamp } from '../sessions/session-item.js';
import { refusedSessionMeta } from '../sessions/session-read.js';
import { putPieces } from '../state/state-pieces.js';
import type { EncodedVersion } from '../state/version-item.js';
import * as versionItem from '../state/version-item.js';
import { LOG_ITEM_KIND } from '../table/item-kinds.js';
import type { LogPosition } from '../table/keys.js';
import * as keys from '../table/keys.js';
import { tableKeys } from '../table/table.js';
import { batchPut, type Item, SessionItemRefused, type TableClient, type TaggedItem, transact } from '../table/table-client.js';
import { copyItemCheck, intoCopy, ownCopyMark, withoutCopy } from './copy-marks.js';
import {
  type Carried,
  type Chain,
  entryOf,
  type LogEntry,
  logItem,
  type NewChange,
  type NodePlace,
  readLogItem,
  tipOf,
} from './log-items.js';
import { LifeClosedError, putChange } from './lost-race.js';
import { departure, movePointer } from './node-index.js';
import type { ClaimSeen, OwnClaims } from './own-claims.js';
import { childRuns } from './paths.js';
import {
  type AbandonedDeletes,
  ACTIVITY_EVERY_MS,
  isProvisionalLife,
  loneMarkClaim,
  loneMarkJoins,
  loneMarkOf,
  metadataWrite,
  nextSlot,
  provisionalCheck,
  provisionalTtl,
  type SlotClaim,
  sessionItemAbsent,
  sessionNotExpired,
  sessionUpsert,
} from './session-writes.js';
import { storedDecision } from './stored-decision.js';
import { nodePointerKey, UnclaimedWrites } from './unclaimed-writes.js';
import { lineageOf, versionPlace } from './version-places.js';

/**
 * The one way anything about a session's versions, head or lease changes: the next change of
 * its log, put where the log's next place is, on the condition that the place is free.
 *
 *   writer A reads tip V#0#41#1 ──┐            ┌── writer B reads tip V#0#41#1
 *   A puts V#0#41#2 if absent  ✓  │            │   B puts V#0#41#2 if absent ✗ → retries after A's
 *
 * Before its own put, a writer does what the change it moves past left to its successor (the
 * index of that change's nodes, a pointer only it held: node-index.ts, `departure`). Those
 * writes are safe to repeat and safe to lose a race after: what they write follows from a
 * change that is already in the log. The common write is one conditional PutItem; documents
 * and a session's first write make it a transaction (the session item, the documents).
 */
export class LogWriter {
  /** The last change this process made in each of the sessions it wrote lately (`lastChange`, `writeAhead`). */
  private readonly last = new Map<string, LastChange>();
  /** The owed index puts under way in this process, by session and items (`putOwed`): whether each landed. */
  private readonly owing = new Map<string, Promise<boolean>>();
  /** The index being written ahead in each session (`writeAhead`), until it has landed or failed. */
  private readonly ahead = new Map<string, Promise<boolean>>();
  /** What this process put under a life of a session ahead of a claim, until a claim vouches for it (unclaimed-writes.ts). */
  readonly unclaimed: UnclaimedWrites;

  constructor(
    private readonly table: TableClient,
    private readonly deleter: AbandonedDeletes,
    private readonly moveActivity: (scope: SessionScope, at: string, sessionMoved?: boolean, lifetime?: Lifetime) => Promise<void>,
    /** The deployment's lifetime defaults: what a session's first change carries when nothing says otherwise. */
    private readonly defaults: Lifetime | undefined,
    /** The notes waiting for this process's next claim of a session (own-claims.ts). */
    private readonly claims: OwnClaims,
  ) {
    this.unclaimed = new UnclaimedWrites(table);
  }

  async commit(scope: SessionScope, change: TipChange): Promise<Tip> {
    try {
      return await this.commitChange(scope, change);
    } catch (error) {
      // Another writer's change may be next: the tip is read again, not guessed from this one.
      this.forget(scope);
      throw error;
    }
  }

  private async commitChange(scope: SessionScope, change: TipChange): Promise<Tip> {
    const { basedOn } = change;
    // Nothing may be written into a session while it is deleted; the caller retries. A delete
    // that stopped halfway (its function timed out) is finished by the writes that find it.
    if (basedOn.kind === 'closing') {
      if (this.deleter.isAbandoned(basedOn)) await this.deleter.deleteSession(withoutCopy(scope));
      // Another request's copy is being written into the id: it is taken until the copy ends (but by a follow).
      else if (basedOn.unopened) return this.commitChange(...intoCopy(scope, basedOn, change));
      throw new StaleTipError('the session is being deleted');
    }
    const copy = ownCopyMark(scope, basedOn);
    const ending = change.decision?.leaseToken ?? change.releaseLease;
    if (ending !== undefined && basedOn.lease?.holder !== ending) throw new LeaseLostError();

    // A follow's mark that is the life's only change so far (session-writes.ts, `loneMarkOf`):
    // a follow moves it on in its place, the life's first change takes it into the life.
    const loneMark = loneMarkOf(basedOn);
    const follow = change.follow !== undefined;
    const { position, claim } = follow && loneMark ? loneMarkClaim(loneMark) : nextSlot(basedOn);
    // A change that is no write (a follow, a decision's lease or its end) in a life that holds
    // nothing else yet is provisional (session-writes.ts, `provisionalOf`): it carries a TTL.
    const provisional = (follow || change.takeLease !== undefined || change.releaseLease !== undefined) && isProvisionalLife(basedOn);
    // A provisional tip whose TTL is near is checked in the claim's transaction (`provisionalCheck`).
    const check = provisionalCheck(this.table.tableName, scope, basedOn, this.table.now());
    // The first change of a life: nothing in the log says when the session expires, its item
    // does, so the change is a transaction that checks it (a decision's lease on a session
    // nothing was written to is the one first change that would otherwise be a single put).
    // Follows and other provisional changes (log-items.ts, `isProvisional`) do not count: they
    // record no write and set no lifetime, and the write after them is the life's first still.
    const first = provisional ? entryOf(basedOn) === null || entryOf(basedOn)?.carried.fo === 1 : isProvisionalLife(basedOn);
    const inTransaction =
      (first && !follow) ||
      change.opensCopy === true ||
      change.mayCreateSession ||
      change.settings !== undefined ||
      (change.documents?.length ?? 0) > 0 ||
      check !== null;
    const lifetime = provisional ? undefined : (change.lifetime ?? basedOn.lifetime ?? (first && !follow ? this.defaults : undefined));
    // The activity moves with the first change (the session item may be new: the transaction's
    // upsert creates it) and then once an interval: a version's change only says that its move is
    // due (`ta`, the change hook makes it, so that a state write stays one PutItem), any other
    // change makes it itself, and a transaction carries it.
    // A first change knows when the activity moved from the session item, when it was read: a
    // session made a moment ago (POST /v1/sessions) and then written moves nothing yet.
    const at = change.touchSessionAt ?? change.version?.createdAt;
    const touchedAt = basedOn.kind === 'empty' ? (change.sessionTouchedAt ?? null) : basedOn.touchedAt;
    // A copy's session item stays as made, in no list, until the change that opens it moves it.
    const unopened = copy !== undefined && !change.opensCopy;
    const due = !unopened && at !== undefined && (change.opensCopy === true || activityIsStale(touchedAt, at));
    const movesActivity = due && !inTransaction && !change.version;
    const touches = change.touchSessionAt !== undefined && !unopened;
    const upsertsSession = inTransaction && touches && (due || change.mayCreateSession === true || change.settings !== undefined);
    // The upsert of a session's first change that is not due only makes sure the item exists.
    const sessionMoves = due || change.settings !== undefined;
    const encoded = change.version ? await versionItem.encodeTexts(change.version) : null;
    const newChange = this.newChange(basedOn, change, position, encoded, {
      movesActivity: due || (upsertsSession && sessionMoves),
      touchedAt,
      lifetime,
      copy: unopened ? copy : undefined,
    });
    const item = logItem(scope, position, newChange, follow && loneMark ? 0 : (entryOf(basedOn)?.carried.b ?? 0));
    // A follow's mark with no life to belong to yet goes once every follower it stands for has
    // (its `f`), unless the life's first change takes it in; a lease or its end there, an hour
    // after the lease (`provisionalTtl`), and the life's first write leaves them below.
    if (provisional && follow && newChange.carried.f !== undefined) item[tableKeys.timeToLive] = newChange.carried.f;
    if (provisional && !follow) {
      item[tableKeys.timeToLive] = provisionalTtl(newChange.carried.f, change.takeLease?.untilMs, this.table.now());
    }

    // What the change before this one left to its successor, and a large state's pieces: all
    // before the claim, and all safe to have written if the claim then fails (a crash or a lost
    // race leaves pieces no version names, never a version without its pieces; the collector,
    // state-pieces.ts, removes the former).
    const owed = departure(scope, basedOn, change.head.id !== basedOn.head);
    const life = basedOn.incarnation;
    // All settled before a failure is thrown: nothing of it may land after a copy's undo (session-copy.ts).
    const sent = allSettledOrThrow([
      this.putOwed(scope, owed.puts),
      encoded ? putPieces(this.table, scope, encoded) : undefined,
      ...owed.pointers.map((pointer) => movePointer(this.table, scope, life, pointer.nodeId, pointer.version)),
    ]);
    this.unclaimed.sent(scope, life, [...owed.puts, ...owed.pointers.map(({ nodeId }) => nodePointerKey(scope, nodeId, life))], sent);
    await sent;

    // A write that read the tip before the session expired and comes after it: the expiry
    // wins (API.md section 12), the write retries and finds the session closed. Checked the
    // moment before the claim, on the clock every reader compares with.
    if (hasExpired(basedOn.expiresAtMs, this.table.now())) throw new StaleTipError('the session expired');
    // The notes that arrived before the claim is sent learn what it tells once it has landed
    // (own-claims.ts); a claim that fails tells them nothing.
    const settle = this.claims.claimSent(scope, change.newNodes.length > 0);
    let seen: ClaimSeen | undefined;
    try {
      seen = await this.claim(scope, change, item, claim, {
        inTransaction,
        upsertsSession,
        first,
        sessionMoves,
        due,
        at,
        lifetime,
        movesActivity,
        // The place before, in the same transaction: a lone mark taken into the life (or passed
        // by a provisional change), a provisional tip near its TTL checked.
        before: [
          ...(loneMark && !follow ? [loneMarkJoins(this.table.tableName, scope, loneMark, { passed: provisional })] : []),
          ...(check ? [check] : []),
        ],
      });
    } catch (error) {
      // The place is a delete's: what was put under this life ahead of the claim may have landed
      // after the delete read the session, and nobody will erase it but this writer.
      if (error instanceof LifeClosedError) await this.unclaimed.takeBack(scope, life + 1);
      throw error;
    } finally {
      settle(seen);
    }
    await this.unclaimed.claimed(scope, position.incarnation);
    const tip = seen.tip;
    if (!change.version || tip.kind !== 'version') return tip;
    return { ...tip, latest: { ...change.version, place: versionPlace(position, change.prior ?? null) } };
  }

  /** The claim of the change's place (a put, or the transaction that carries it), and what it tells once landed. */
  private async claim(
    scope: SessionScope,
    change: TipChange,
    item: Item,
    claim: SlotClaim,
    plan: {
      inTransaction: boolean;
      upsertsSession: boolean;
      first: boolean;
      sessionMoves: boolean;
      due: boolean;
      at: string | undefined;
      lifetime: Lifetime | undefined;
      movesActivity: boolean;
      /** Updates of the change before, on the condition that it is the one read (`loneMarkJoins`, `provisionalCheck`). */
      before: ReadonlyArray<NonNullable<TaggedItem['item']['Update']>>;
    },
  ): Promise<ClaimSeen> {
    const { inTransaction, upsertsSession, first, sessionMoves, due, at, lifetime, movesActivity, before } = plan;
    if (inTransaction) {
      const items: TaggedItem[] = [
        { role: 'tip', item: { Put: { TableName: this.table.tableName, Item: item, ...claim } } },
        ...(change.documents ?? []).map((write) => documentPut(this.table, scope, write)),
        ...before.map((update) => ({ role: 'tip' as const, item: { Update: update } })),
      ];
      if (upsertsSession && at) {
        const metadata = change.settings?.metadata;
        const metadataStamp = metadata ? newMetadataStamp() : undefined;
        const upsert = sessionUpsert(this.table.tableName, scope, at, {
          lifetime: lifetime ?? NO_LIFETIME,
          first,
          moves: sessionMoves,
          nowMs: this.table.now(),
          ...(change.settings ? { settings: change.settings } : {}),
          ...(change.opensCopy && scope.copy !== undefined ? { opens: scope.copy } : {}),
          ...(metadataStamp === undefined ? {} : { metadataStamp }),
          ...(change.sessionAbsent ? { absent: true } : {}),
        });
        items.push({ role: 'session', item: { Update: upsert } });
        // A PATCH of the metadata writes it to its own item, which the session item names (session-item.ts).
        if (metadata !== undefined) {
          const written = metadata && metadataStamp !== undefined ? { metadata, stamp: metadataStamp } : null;
          items.push({ role: 'entry', item: metadataWrite(this.table.tableName, scope, written) });
        }
        // A PATCH moves the session's list entries with it: listed under its new user, agent and
        // metadata, and under the old ones no longer, once it has answered (list-entries.ts).
        // One of the lifetime alone moves them only when their move is due, as any change.
        const { settings } = change;
        const relists =
          settings && (due || settings.userId !== undefined || settings.agentId !== undefined || settings.metadata !== undefined);
        for (const entry of relists ? changedEntries(scope, settings.lists, at) : []) {
          items.push({ role: 'entry', item: { Put: { TableName: this.table.tableName, Item: entry } } });
        }
        // A PATCH that takes the session from its user moves that user's profile fence with it:
        // a keyed profile commit of this session that read the profile before fails and reads
        // again (document-store.ts `writeDocument`).
        const leaving = settings?.lists.before.userId;
        if (settings?.userId !== undefined && typeof leaving === 'string' && settings.userId !== leaving) {
          items.push(profileFenceMove(this.table, scope.tenant, leaving));
        }
      } else if (first && scope.copy !== undefined) {
        items.push({
          role: 'session',
          item: { Update: copyItemCheck(this.table.tableName, { ...scope, copy: scope.copy }, this.table.now()) },
        });
      } else if (first) {
        const check = change.sessionAbsent
          ? sessionItemAbsent(this.table.tableName, scope)
          : sessionNotExpired(this.table.tableName, scope, this.table.now());
        items.push({ role: 'session', item: { ConditionCheck: check } });
      }
      try {
        await transact(this.table, items);
      } catch (error) {
        // Its session item is there after all: nothing was written, the caller computes the change again from it.
        if (error instanceof SessionItemRefused && change.sessionAbsent) throw new SessionItemFound(refusedSessionMeta(scope, error.item));
        // The session item of a session with nothing in its log says it expired: erase it (its
        // next life starts empty, API.md section 12), then the write retries on a new session.
        // (Not a copy's: its item refused because the copy was erased as abandoned, and the id is another's now.)
        if (error instanceof SessionItemRefused && first && !change.settings && !scope.copy) await this.deleter.deleteSession(scope);
        throw error;
      }
      // The transaction moved the session item; its list entries follow (list-entries.ts),
      // unless the session is known to be in no list but the tenant's (most first writes), or
      // the transaction moved them too (a PATCH).
      if (upsertsSession && due && !change.settings && at && change.sessionListed !== false) await this.moveActivity(scope, at, true);
    } else {
      await putChange(this.table, item, claim);
      if (movesActivity && at) await this.moveActivity(scope, at, false, lifetime);
    }
    const written = readLogItem(item) as LogEntry;
    const tip = tipOf(written, { withState: false });
    this.remember(scope, item, tip);
    // The parent the new nodes hang under was in the tip this change follows, and so it is still.
    const nodes = [...(change.parent ? [change.parent] : []), ...change.newNodes];
    return { tip, nodes: new Map(nodes.map((node) => [node.id, node])) };
  }

  /**
   * Where the last change this process made in the session is, and the key of the place after
   * it, when that change is recent: an append here reads those two keys (and its new ids) by key
   * in one request instead of the log's newest item and the ids in two (session-log.ts,
   * `readTipWithNodes`).
   */
  lastChange(scope: SessionScope): { key: string; next: string; incarnation: number } | undefined {
    const last = this.last.get(keys.session(scope));
    return last && this.table.now() - last.madeAt <= LAST_CHANGE_FOR_MS ? last : undefined;
  }

  /**
   * Starts writing, beside the tip read of an append about to follow, the index the last change
   * this process made in the session owes its successor (node-index.ts, `departure`). It is put
   * only for a change already in the log, so it is the truth whatever the tip turns out to be;
   * `commit` counts it as written only once it has landed, and only for the very items it owes.
   */
  writeAhead(scope: SessionScope): void {
    const last = this.last.get(keys.session(scope));
    if (!last || last.sent || last.puts.length === 0 || this.table.now() - last.madeAt > LAST_CHANGE_FOR_MS) return;
    const key = keys.session(scope);
    const sent = batchPut(this.table, last.puts).then(...settledAs);
    this.unclaimed.sent(scope, last.incarnation, last.puts, sent);
    last.sent = sent;
    this.ahead.set(key, sent);
    void sent.then(() => this.ahead.get(key) === sent && this.ahead.delete(key));
  }

  /** Once the index written ahead in the session has landed or failed: a copy's undo erases after it (session-copy.ts). */
  async settled(scope: SessionScope): Promise<void> {
    await this.ahead.get(keys.session(scope));
  }

  /** Forgets the session's last change (its session is being deleted). */
  forget(scope: SessionScope): void {
    this.last.delete(keys.session(scope));
  }

  /**
   * Puts the index a change owes its predecessor before it claims its place, unless exactly
   * those items were written ahead (`writeAhead`) and have landed, or another writer of this
   * process is putting exactly those items: then it waits for that put, and puts them itself
   * only if that put failed. Blind writers that read the same tip all owe the same index, and
   * each putting it again made a burst cost writers x nodes item writes: 50 PATCHes after an
   * append of 50 messages sent 100 BatchWriteItems of 25 at once, which `npm start`'s on-disk
   * DynamoDB Local (about 30 ms an item) took longer than the client's 3 s bound to answer
   * (50 of 50 answered 503).
   */
  private async putOwed(scope: SessionScope, puts: readonly Item[]): Promise<void> {
    if (puts.length === 0) return;
    const text = JSON.stringify(puts);
    const last = this.last.get(keys.session(scope));
    if (last?.sent && last.text === text && (await last.sent)) return;
    const key = `${keys.session(scope)}\n${text}`;
    const underWay = this.owing.get(key);
    if (underWay && (await underWay)) return;
    const put = batchPut(this.table, puts);
    const landed = put.then(...settledAs);
    this.owing.set(key, landed);
    try {
      await put;
    } finally {
      if (this.owing.get(key) === landed) this.owing.delete(key);
    }
  }

  /** Where the change just written is, and what it will owe its successor. */
  private remember(scope: SessionScope, item: Item, tip: Tip): void {
    const key = keys.session(scope);
    this.last.delete(key);
    if (tip.kind === 'closing') return;
    const { puts } = departure(scope, tip, true);
    this.last.set(key, {
      key: String(item.sk),
      next: nextSlot(tip).key,
      incarnation: tip.incarnation,
      puts,
      text: JSON.stringify(puts),
      madeAt: this.table.now(),
    });
    if (this.last.size > LAST_CHANGE_SESSIONS) this.last.delete(this.last.keys().next().value as string);
  }

  /** The change to write after `basedOn`: what it records, and what it carries forward. */
  private newChange(
    basedOn: Tip,
    change: TipChange,
    position: LogPosition,
    encoded: EncodedVersion | null,
    carry: { movesActivity: boolean; touchedAt: string | null; lifetime: Lifetime | undefined; copy: string | undefined },
  ): NewChange {
    const { movesActivity, touchedAt, lifetime, copy } = carry;
    const entry = entryOf(basedOn);
    const now = this.table.now();
    // A follow keeps the time of the change before it: it is no write, so the session's idle
    // expiry (counted from its newest change's time, `lt`) does not move.
    const createdAt =
      change.version?.createdAt ??
      change.touchSessionAt ??
      (change.follow !== undefined && entry ? entry.createdAt : new Date(now).toISOString());
    const headMoves = change.head.id !== basedOn.head;
    const nodes = change.newNodes;
    const kind = change.version
      ? LOG_ITEM_KIND.version
      : nodes.length > 0
        ? LOG_ITEM_KIND.nodes
        : change.takeLease
          ? LOG_ITEM_KIND.lease
          : headMoves
            ? LOG_ITEM_KIND.head
            : change.settings || change.opensCopy
              ? LOG_ITEM_KIND.settings
              : change.follow !== undefined
                ? LOG_ITEM_KIND.follow
                : LOG_ITEM_KIND.release;
    const stored = lifetime ? storedLifetime(lifetime) : undefined;

    let chain: Chain | undefined;
    let headPlace: NodePlace | undefined = headMoves ? (change.head.place as NodePlace | undefined) : entry?.carried.hp;
    if (nodes.length > 0) {
      const first = nodes[0] as (typeof nodes)[number];
      const parent = change.parent && change.parent.id === first.parentId ? change.parent : undefined;
      const parentPlace = (parent?.place as NodePlace | undefined) ?? null;
      if (first.parentId !== null && first.parentId !== 'root' && !parentPlace) {
        throw new AgentStateError('internal', `the parent ${first.parentId} of new nodes has no place in the log`);
      }
      const bytesBefore = entry?.carried.b ?? 0;
      const estimate = nodes.reduce((sum, node) => sum + encodedSize(node.message), 512);
      const runs = childRuns(parentPlace, entry?.carried.ln, {
        base: position.base,
        seq: position.seq,
        bytesBefore,
        bytesAfter: bytesBefore + estimate,
      });
      chain = { up: parentPlace ? { s: parentPlace.s, p: parentPlace.p } : null, d: first.depth, p0: first.stateVersion, r: runs };
      headPlace = { s: [position.base, position.seq], p: nodes.length - 1, n: nodes.length, r: runs };
    }

    const lease = basedOn.lease;
    // Until when the session may have followers: carried on while it lasts, moved on by a follow.
    const followersUntil = Math.max(basedOn.followersUntil ?? 0, change.follow ?? 0);
    const carried: Omit<Carried, 'b'> = {
      v: change.version?.version ?? basedOn.version,
      h: change.head.id,
      hv: change.head.version,
      hd: change.head.depth,
      hx:
        nodes.length > 0
          ? -1
          : !headMoves
            ? entry && entry.carried.hx === -1
              ? basedOn.headVersion
              : (entry?.carried.hx ?? 0)
            : change.head.version,
      ...(headPlace ? { hp: headPlace } : {}),
      ...(nodes.length > 0 ? { ln: [position.base, position.seq] as const } : entry?.carried.ln ? { ln: entry.carried.ln } : {}),
      ag: change.sessionAgentId !== undefined ? change.sessionAgentId : basedOn.agentId,
      u: change.sessionUserId !== undefined ? change.sessionUserId : basedOn.userId,
      // When the activity last moved, or was due to (a version's: the change hook moves it then).
      ta: movesActivity ? (change.version ? createdAt : (change.touchSessionAt ?? createdAt)) : touchedAt,
      ...(stored ? { lt: stored } : {}),
      ...(entry?.carried.w || change.version || nodes.length > 0 || headMoves ? { w: true as const } : {}),
      ...(change.takeLease
        ? { ls: { k: change.takeLease.holder, u: change.takeLease.untilMs } }
        : change.decision || change.releaseLease || !lease || lease.untilMs <= now
          ? {}
          : { ls: { k: lease.holder, u: lease.untilMs } }),
      ...(followersUntil * 1000 > now ? { f: followersUntil } : {}),
      ...(change.follow !== undefined && isProvisionalLife(basedOn) ? { fo: 1 as const } : {}),
      ...(change.contended ? { c: 1 as const } : {}),
      ...(copy === undefined ? {} : { cp: copy }),
    };
    return {
      kind,
      createdAt,
      carried,
      ...(encoded ? { version: { encoded, lineage: lineageOf(change.prior ?? null) } } : {}),
      ...(chain ? { chain, messages: nodes.map((node) => node.message as JsonObject) } : {}),
      ...(change.decision ? { decision: storedDecision(change.decision.record, change.decision.remember) } : {}),
      ...(change.kept ? { kept: change.kept } : {}),
      ...(change.opensCopy ? { opensCopy: true as const } : {}),
    };
  }
}

/** How long after this process made a change an append here reads its place by key and writes its index ahead. */
const LAST_CHANGE_FOR_MS = 10_000;
/** Sessions whose last change this process keeps (the oldest are dropped). */
const LAST_CHANGE_SESSIONS = 1_000;

/** A change this process made: its key, the next place's, and the index it owes its successor (`departure`). */
interface LastChange {
  readonly key: string;
  readonly next: string;
  readonly incarnation: number;
  readonly puts: readonly Item[];
  /** The items as JSON: a commit skips its own puts only when they are these, to the byte. */
  readonly text: string;
  readonly madeAt: number;
  sent?: Promise<boolean>;
}

/** Whether the session's activity was last moved by a writer long enough ago to move it again. */
function activityIsStale(touchedAt: string | null, at: string): boolean {
  return touchedAt === null || Date.parse(at) - Date.parse(touchedAt) >= ACTIVITY_EVERY_MS;
}

/** A put's promise as whether it landed (never rejects). */
const settledAs = [() => true, () => false] as const;
