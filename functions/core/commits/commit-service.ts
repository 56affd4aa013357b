import type { AllowedAgents } from '../agents/acting-agent.js';
import { requireMayWorkIn } from '../agents/agent-access.js';
import { type Json, type JsonObject, jsonEqual } from '../json/json.js';
import { AgentStateError } from '../kernel/errors.js';
import { invalidateTenant } from '../kernel/tenant-cache.js';
import type { Caller } from '../model/fields.js';
import {
  type AgentRecord,
  DOCUMENT_LIMIT_BYTES,
  type DocumentKind,
  type DocumentRecord,
  type DocumentRef,
  type SessionScope,
} from '../model/model.js';
import {
  type DocumentStore,
  type DocumentWrite,
  type KeyChange,
  type QueueTarget,
  type SessionStore,
  StaleTipError,
  type WriteQueue,
} from '../model/ports.js';
import { versionAt } from '../write/next-version.js';
import { othersWaiting, QueueBehindOthers, type RetryPolicy, retryOnStaleTip } from '../write/write-retry.js';
import {
  checkedWrite,
  checkIfMatch,
  checkStateSize,
  type SchemaSource,
  storedState,
  visibleState,
  WriteTargets,
} from '../write/write-target.js';
import { applySlots, type Command, type CommandScope, foldCommands } from './commands.js';

export interface CommitRequest {
  commands: Command[];
  runId?: string;
  /** Guards the thread scope: the state at the node must still be at this version. */
  expectedVersion?: number;
  node?: string;
  caller?: Caller;
  /** The agents of a key limited to some (null or absent: not limited), API.md section 7. */
  allowed?: AllowedAgents;
}

export interface DocumentView {
  version: number;
  state: Json;
  updatedAt: string | null;
}

export interface CommitResult {
  sessionId: string;
  node: string;
  /** The thread's version after the commit (unchanged when no thread key changed). */
  version: number;
  state: Json;
  changed: boolean;
  run?: DocumentView & { runId: string };
  profile?: DocumentView & { userId: string };
  shared?: DocumentView;
}

/** Run documents expire this long after their last write unless configured otherwise. */
export const DEFAULT_RUN_TTL_SECONDS = 7 * 24 * 60 * 60;

export interface CommitServiceOptions {
  runTtlSeconds?: number;
  retry?: Partial<RetryPolicy>;
  now?: () => Date;
  /** Where typed fields come from; without it every state is untyped. */
  schemas?: SchemaSource;
  /** The tenant's agents: whose sessions, and which grants, a key limited to agents commits under. */
  agents?: (tenant: string) => Promise<readonly AgentRecord[]>;
  /** Where blind commits that lost a race wait their turn (write-retry.ts); without it they back off and retry. */
  queue?: WriteQueue;
}

/**
 * `POST /v1/sessions/{sid}/commits` (API.md section 8): a batch of keyed commands over the
 * thread, run, profile and shared scopes, applied all together or not at all. Without
 * `expectedVersion` a batch that lost a race is folded again onto fresh state: the policies
 * are deterministic, so the result is as if batches ran one after another.
 */
export class CommitService {
  private readonly store: SessionStore;
  private readonly documents: DocumentStore;
  private readonly targets: WriteTargets;

  constructor(
    stores: { sessions: SessionStore; documents: DocumentStore },
    private readonly options: CommitServiceOptions = {},
  ) {
    this.store = stores.sessions;
    this.documents = stores.documents;
    this.targets = new WriteTargets(stores.sessions, options.schemas ?? (async () => null));
  }

  /**
   * A key limited to agents commits only in its conversations (`mayWorkIn`), so a `profile`
   * only of the user of a session it may work in; and to `shared` only when one of its agents
   * is registered with `"documents": {"shared": "write"}` (API.md section 7). `403 forbidden`
   * otherwise, before anything is written.
   */
  private async checkLimitedKey(
    scope: SessionScope,
    allowed: readonly string[],
    sessionAgentId: string | null,
    shared: boolean,
  ): Promise<void> {
    const agents = (await this.options.agents?.(scope.tenant)) ?? [];
    requireMayWorkIn(allowed, agents, sessionAgentId, 'commit to');
    if (shared && !agents.some((agent) => allowed.includes(agent.agentId) && agent.documents?.shared === 'write')) {
      throw new AgentStateError(
        'forbidden',
        'this key may write the shared document only when one of its agents is registered with "documents": {"shared": "write"}',
        { agents: allowed },
      );
    }
  }

  async commit(scope: SessionScope, request: CommitRequest): Promise<CommitResult> {
    const slots = foldCommands(request.commands);
    const touches = (kind: CommandScope) => slots.has(kind);
    if (touches('run') && !request.runId) {
      throw new AgentStateError('invalid_request', 'run commands need a runId', { field: 'runId' });
    }
    const caller = request.caller ?? null;
    const now = this.options.now ?? (() => new Date());

    // A blind commit that lost a race waits its turn among the writers of what it writes; one
    // with `expectedVersion` answers 412 instead and never waits.
    const queue = this.options.queue;
    // What it waits for is known once an attempt has read the session: the thread's log when it
    // moves the thread, else the document it writes (a profile's user is on the tip).
    let waitsFor: QueueTarget = { session: scope };
    const join = queue && request.expectedVersion === undefined ? () => queue.join(waitsFor) : undefined;
    return retryOnStaleTip(
      this.options.retry ?? {},
      async (attempt) => {
        const at = now().toISOString();
        const [resolved, run, shared] = await Promise.all([
          this.targets.resolveForWrite(scope, request.node),
          touches('run') ? this.documents.getDocument({ kind: 'run', scope, id: request.runId as string }) : Promise.resolve(null),
          touches('shared') ? this.documents.getDocument({ kind: 'shared', tenant: scope.tenant }) : Promise.resolve(null),
        ]);
        // A documents-only commit writes no tip: it must not slip into a session being deleted.
        // A delete that died halfway is finished here, as the thread's own commit would.
        if (resolved.tip.kind === 'closing') {
          await this.store.settleClosing(scope, resolved.tip);
          throw new StaleTipError('the session is being deleted');
        }
        checkIfMatch(resolved, request.expectedVersion);
        // The session's user is on its tip; only a session with nothing written reads its item,
        // once, for both the user and the agent.
        const meta = resolved.tip.kind === 'empty' ? await this.store.getMeta(scope) : undefined;
        let userId: string | null = null;
        if (touches('profile')) {
          userId = resolved.tip.kind === 'empty' ? (meta?.userId ?? null) : resolved.tip.userId;
          if (!userId) {
            throw new AgentStateError('invalid_request', 'profile commands need a session with a userId', { field: 'commands' });
          }
        }
        const profileRead = userId ? await this.documents.readProfile({ kind: 'profile', tenant: scope.tenant, id: userId }) : null;
        const profile = profileRead?.document ?? null;

        // The thread: top-level keys of the state at the node, typed fields applied as for a write.
        const target = await this.targets.withFields(scope, resolved, undefined, meta);
        const { tip, nodeId, pointer, schema, sessionAgentId, sessionUserId, sessionListed, sessionLifetime } = target;
        if (request.allowed) await this.checkLimitedKey(scope, request.allowed, sessionAgentId, touches('shared'));
        const stored = storedState(target);
        const thread = touches('thread')
          ? checkedWrite(target, caller, (seen) => applySlots(seen, slots.get('thread') as Map<string, never>, 'thread'), 'thread')
          : stored;
        const threadChanged = !jsonEqual(thread, stored);
        waitsFor = threadChanged
          ? { session: scope }
          : touches('shared')
            ? { document: { kind: 'shared', tenant: scope.tenant } }
            : userId
              ? { document: { kind: 'profile', tenant: scope.tenant, id: userId } }
              : { session: scope };
        // A blind commit that moves the thread takes the log's next place like a state write, so
        // it joins the writers already waiting for this session rather than jump them. One that
        // changes only documents writes no tip and competes with no one here.
        if (threadChanged && request.expectedVersion === undefined && othersWaiting(tip, attempt, now())) {
          throw new QueueBehindOthers();
        }

        const documents: DocumentWrite[] = [];
        const result: CommitResult = {
          sessionId: scope.sessionId,
          node: nodeId,
          version: pointer,
          state: visibleState(schema, caller, thread),
          changed: threadChanged,
        };
        const documentChange = (kind: DocumentKind, id: string, before: DocumentRecord | null) => {
          const next = applySlots(before?.state ?? null, slots.get(kind) as Map<string, never>, kind);
          checkStateSize(next, kind, DOCUMENT_LIMIT_BYTES);
          const unchanged = before !== null && jsonEqual(next, before.state);
          const record: DocumentRecord = unchanged ? before : { kind, id, version: (before?.version ?? 0) + 1, state: next, updatedAt: at };
          if (!unchanged) {
            documents.push({
              record,
              basedOnVersion: before?.version ?? 0,
              author: caller,
              ...(kind === 'run' ? { ttlSeconds: this.options.runTtlSeconds ?? DEFAULT_RUN_TTL_SECONDS } : {}),
            });
          }
          return { version: record.version, state: record.state, updatedAt: record.updatedAt };
        };
        if (touches('run')) result.run = { runId: request.runId as string, ...documentChange('run', request.runId as string, run) };
        if (touches('profile')) result.profile = { userId: userId as string, ...documentChange('profile', userId as string, profile) };
        if (touches('shared')) result.shared = documentChange('shared', 'shared', shared);

        // A blind documents-only commit of one document from a session that exists may be keyed.
        // Not a profile read without a fence (the user's first, or one a keyed write made before
        // profiles had fences): the keyed write's condition on no fence would hold on an absent
        // item too, also once the user's erasure is done and its tombstone gone, so a commit that
        // read before the erasure closed the session could make the profile again. Put whole in
        // the transaction below, it needs the session item to name the user still, which an
        // erased session has not, and it sets a fence: once per user.
        const unfenced = profileRead !== null && profileRead.fence === null;
        const keyedKind =
          !threadChanged && documents.length === 1 && request.expectedVersion === undefined && (tip.kind !== 'empty' || meta)
            ? (documents[0] as DocumentWrite).record.kind
            : null;
        const keyed = keyedKind === 'shared' || (keyedKind === 'profile' && !unfenced) ? keyedKind : null;
        if (threadChanged) {
          const { version, change } = versionAt(target, {
            state: thread,
            at,
            cause: 'commit',
            author: caller,
            commands: request.commands as unknown as Json[],
          });
          await this.store.commit(scope, {
            ...change,
            // With documents (or a first write) this is a transaction, which moves the session's
            // activity too; a thread-only commit is one PutItem, like a state write, and the
            // change hook moves it.
            touchSessionAt: documents.length > 0 || tip.kind === 'empty' ? at : undefined,
            mayCreateSession: tip.kind === 'empty',
            sessionAgentId,
            sessionUserId,
            ...(sessionListed === undefined ? {} : { sessionListed }),
            ...(sessionLifetime ? { lifetime: sessionLifetime } : {}),
            documents,
            contended: attempt.raced || attempt.queued === true,
          });
          result.version = version.version;
        } else if (keyed) {
          // The shared document or the profile alone, blind, from a session that exists: written
          // key by key in one update that numbers its own version, so that concurrent commits to
          // other keys never make it lose a race, wait, or try again (document-store.ts
          // `writeDocument`). A profile is the session's user's only while the session names
          // them: the session item, read after the profile, still did (`requireStillTheUsers`), and the
          // write lands only while the profile's fence is the one read with it, which a `PATCH`
          // giving one of the user's sessions to another user, and the user's erasure, replace.
          const kind = keyed;
          if (kind === 'profile') await this.requireStillTheUsers(scope, userId as string);
          const ref: DocumentRef & { kind: 'shared' | 'profile' } =
            kind === 'shared' ? { kind, tenant: scope.tenant } : { kind, tenant: scope.tenant, id: userId as string };
          const written = await this.documents.writeDocument(ref, {
            before: kind === 'shared' ? shared : profile,
            changes: slots.get(kind) as ReadonlyMap<string, KeyChange>,
            next: (documents[0] as DocumentWrite).record.state as JsonObject,
            sessionId: scope.sessionId,
            sessionTouchedAt: tip.kind === 'empty' ? (meta?.updatedAt ?? null) : tip.touchedAt,
            author: caller,
            at,
            ...(kind === 'profile' ? { fence: profileRead?.fence ?? null } : {}),
          });
          const view = { version: written.version, state: written.state, updatedAt: written.updatedAt };
          if (kind === 'shared') result.shared = view;
          else result.profile = { userId: userId as string, ...view };
        } else if (documents.length > 0) {
          // No thread change: the documents alone, guarded by the thread's tip when asked to be
          // (expectedVersion), and always for a run, which belongs to the session: a delete of
          // the session between this read and the write must make the write fail, not land.
          // A profile with others is the session's user's only while it is (a PATCH may give the
          // session to another user meanwhile): the write is conditional on the session item still naming them.
          // Several documents change together or not at all: one transaction.
          const guarded = request.expectedVersion !== undefined || touches('run');
          await this.documents.commitDocuments(scope, documents, guarded ? tip : null, at, userId ?? undefined);
        }
        // The shared document rides the registry this process's decisions read (kernel/tenant-cache.ts).
        if (result.shared) invalidateTenant('registry', scope.tenant);
        return result;
      },
      undefined,
      join,
    );
  }

  /**
   * Whether the session item still names `userId`, read after its profile was: a `PATCH` that
   * gave the session to another user between the tip's read and the profile's is seen here (the
   * profile's fence, read after it, cannot tell), and one after this read changes that fence.
   * An erased session has no item. A moved user makes the commit read again.
   */
  private async requireStillTheUsers(scope: SessionScope, userId: string): Promise<void> {
    const meta = await this.store.getMeta(scope);
    if (meta?.userId !== userId) throw new StaleTipError("the session's user changed since it was read");
  }

  /** A run, profile or shared document as a client reads it (version 0 and null when none). */
  async readDocument(ref: DocumentRef): Promise<DocumentView> {
    const record = await this.documents.getDocument(ref);
    return { version: record?.version ?? 0, state: record?.state ?? null, updatedAt: record?.updatedAt ?? null };
  }
}
