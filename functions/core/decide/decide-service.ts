import type { AgentReader, AgentSnapshot } from '../agents/agent-reader.js';
import { encodedSize, type Json, type JsonObject, jsonEqual } from '../json/json.js';
import { AgentStateError } from '../kernel/errors.js';
import { newId } from '../kernel/ids.js';
import type { PathRead } from '../model/message-path.js';
import type {
  AgentRecord,
  DecisionOutcome,
  DecisionRecord,
  DocumentRecord,
  DoneDecision,
  NodeRecord,
  SessionMeta,
  SessionScope,
  Tip,
} from '../model/model.js';
import {
  type AnswerKeeper,
  type DecisionStore,
  type DocumentStore,
  LeaseLostError,
  type SessionLog,
  StaleTipError,
} from '../model/ports.js';
import { pointerOf } from '../model/tree.js';
import { type ChainPlan, type IncomingMessage, lookupsOf, planChain } from '../sessions/chain.js';
import { nextVersion } from '../write/next-version.js';
import { NodeTargets, type SchemaSource, storedState, visibleState, type WriteTarget } from '../write/write-target.js';
import { checkDecisionAccess, recheckDecisionAccess } from './decision-access.js';
import { answeredState, planReply, triggerMessagesOf, withIds } from './decision-answer.js';
import { askWorkers, type DecideRequest, decisionBudgetMs, type WorkerAnswer, type WorkerInvoker } from './decision-hops.js';
import { COMMIT_ATTEMPTS, DecisionLeases } from './decision-lease.js';
import { doneDecision, recentFor } from './decision-reads.js';

/** An answered state larger than this is replayed from its version rather than kept with the decision. */
const KEPT_ANSWER_STATE_BYTES = 64 * 1024;

export interface DecideResult {
  decisionId: string;
  decision: JsonObject;
  state: Json;
  agent: Json;
  version: number;
  changed: boolean;
  head: string;
}

/** One decision, fixed once its lease is held: what each of its steps needs. */
interface DecisionContext {
  readonly scope: SessionScope;
  readonly request: DecideRequest & { decisionId: string };
  /**
   * The agent the decision starts at (the request's, else the session's), as whom the caller
   * decides and sees the answer; routes and handoffs may give the decision to another agent.
   */
  readonly agentId: string | null;
  readonly agent: AgentRecord | null;
  /** The registry as this decision read it: routes and handoffs choose from it. */
  readonly agents: AgentSnapshot;
  /** What every worker call of the decision may take together (its lease holds that long). */
  readonly budgetMs: number;
  /** This attempt of the decision id: its failed attempts so far, plus one. */
  readonly attempts: number;
  /** The session's lease this decision holds; its commit releases it. */
  readonly leaseToken: string;
  /** Whether the caller named the decision (`decisionId`): then a retry with that id replays it. */
  readonly named: boolean;
  /** The session item, when it was read (a session with nothing written yet). */
  readonly meta: SessionMeta | null;
  /** The session's agent, whose place in the hierarchy says whether a limited key may decide. */
  readonly sessionAgentId: string | null;
  /** The session's user (whose profile the worker is shown). */
  readonly userId: string | null;
  /** The session's typed fields: from the tenant's agents, read once. */
  readonly schemas: SchemaSource;
  /** The tenant's shared document (commits' `shared` scope), read with the agents. */
  readonly shared: DocumentRecord | null;
  /** The trigger's messages, their ids fixed once so that a retried commit creates the same nodes. */
  readonly triggerMessages: readonly IncomingMessage[];
  /** The ids the client gave its trigger messages and the parent it named: what must be looked up. */
  readonly lookups: readonly string[];
  /** Under an `Idempotency-Key`: the answer to keep in the decision's commit (ports.ts, TipChange.kept). */
  readonly keep?: AnswerKeeper<DecideResult>;
}

/** Everything a decision read before asking its worker. */
interface Prepared {
  /** The decision's node (`plan.last`) as a write target: the tip, its version, the typed fields. */
  target: WriteTarget;
  /** The nodes of the lookups that exist. */
  known: ReadonlyMap<string, NodeRecord>;
  /** The node the trigger's messages go under (or the decision's node when there are none). */
  parent: NodeRecord;
  /** The trigger's messages appended under the parent: the decision happens at `plan.last`. */
  plan: ChainPlan;
  /** The agent config at the decision's node. */
  agent: Json;
}

/**
 * `POST /v1/sessions/{sid}/decide` (API.md section 6): one decision at a time per session,
 * state riding the decision to the agent's worker and back, everything the answer writes
 * committed in one atomic step at the new head.
 */
export class DecideService {
  private readonly store: SessionLog;
  private readonly decisions: DecisionStore;
  private readonly documents: Pick<DocumentStore, 'getDocument'>;
  private readonly targets: NodeTargets;
  private readonly leases: DecisionLeases;

  constructor(
    stores: { sessions: SessionLog; decisions: DecisionStore; documents: Pick<DocumentStore, 'getDocument'> },
    private readonly agents: Pick<AgentReader, 'snapshot'>,
    private readonly invokeWorker: WorkerInvoker,
    private readonly now: () => Date = () => new Date(),
  ) {
    this.store = stores.sessions;
    this.decisions = stores.decisions;
    this.documents = stores.documents;
    this.targets = new NodeTargets(stores.sessions);
    this.leases = new DecisionLeases(stores.sessions, now);
  }

  async decide(scope: SessionScope, request: DecideRequest, keep?: AnswerKeeper<DecideResult>): Promise<DecideResult> {
    const decisionId = request.decisionId ?? newId();
    const triggerMessages = withIds(triggerMessagesOf(request.trigger));
    const lookups = lookupsOf(triggerMessagesOf(request.trigger), request.parentId);
    // First the tenant's agents with its shared document (one Query): they tell how much of the
    // path the worker will be shown, and so how much of the log the tip read brings (`recentFor`).
    const agents = await this.agents.snapshot(scope.tenant);
    const begin = (fromReplica: boolean) => this.begin({ scope, request, decisionId, triggerMessages, lookups, agents, fromReplica });
    // The log's newest changes from a replica (half the read units), which the lease's put then
    // confirms: it claims the place after the tip that was read, so it succeeds only if nothing
    // was written after it. Anything else that stops the decision before its lease (a lost race,
    // an error the read may have caused) starts it again from a consistent read.
    const begun = await begin(true).catch((error: unknown) => {
      if (!(error instanceof StaleTipError || (error instanceof AgentStateError && error.status < 500 && error.status !== 429)))
        throw error;
      return begin(false);
    });
    if ('replay' in begun) return begun.replay;
    const { tip, nodes, previous, session, agentId, agent, budgetMs, leaseToken, leased } = begun;
    const failedBefore = previous?.status === 'failed' && previous.incarnation === tip.incarnation ? previous.attempts : 0;
    let leaseHeld = true;
    try {
      const result = await this.run(
        {
          scope,
          request: { ...request, decisionId },
          agentId,
          agent,
          agents: begun.agents,
          budgetMs,
          attempts: failedBefore + 1,
          leaseToken,
          named: request.decisionId !== undefined,
          meta: begun.meta,
          sessionAgentId: session.agentId,
          userId: session.userId,
          schemas: async (_tenant, sessionAgentId) => begun.agents.schemaFor(sessionAgentId),
          shared: begun.agents.shared,
          triggerMessages,
          lookups,
          ...(keep ? { keep } : {}),
        },
        { read: tip, leased: leased.tip, nodes },
      );
      leaseHeld = false; // released by the commit itself
      return result;
    } catch (error) {
      if (request.decisionId && isWorkerError(error)) {
        await this.decisions.recordFailedAttempt(scope, decisionId, tip.incarnation).catch(() => undefined);
      }
      throw error;
    } finally {
      if (leaseHeld) await this.leases.release(scope, leased.tip, leaseToken).catch(() => undefined);
    }
  }

  /**
   * Everything before the worker: the tip with the path's end, the nodes named and the
   * decision's record; a replay of a decision already done; the access check; the lease. With
   * `fromReplica`, the tip read is eventually consistent and the lease is tried once, at the
   * place after it: a lost race there throws (StaleTipError), and the caller begins again.
   */
  private async begin(start: {
    scope: SessionScope;
    request: DecideRequest;
    decisionId: string;
    triggerMessages: readonly IncomingMessage[];
    lookups: readonly string[];
    agents: AgentSnapshot;
    fromReplica: boolean;
  }): Promise<{ replay: DecideResult } | Begun> {
    const { scope, request, decisionId, triggerMessages, lookups } = start;
    let { agents } = start;
    // Then the tip, the nodes named, and the decision's record, together: a record read before
    // the tip could miss a decision that finished and was followed by another change meanwhile.
    const [{ tip, nodes }, previous] = await Promise.all([
      this.store.readTipWithNodes(scope, lookups, {
        withState: true,
        recent: recentFor(agents, request.agentId, triggerMessages.length > 0),
        // Under the head, the ids read are the trigger's new messages': one round.
        expectNew: request.parentId === undefined,
        ...(start.fromReplica ? { fromReplica: true } : {}),
      }),
      request.decisionId ? this.decisions.getDecision(scope, decisionId) : Promise.resolve(null),
    ]);
    const done = doneDecision(tip, decisionId, previous);
    if (request.decisionId && done) {
      return { replay: await this.replay(scope, done, request.agentId ?? (await this.targets.sessionOf(scope, tip)).agentId, agents) };
    }

    // The session's agent and user ride on its tip; a session with nothing written reads its item.
    const meta = tip.kind === 'empty' ? await this.store.getMeta(scope) : null;
    const session = await this.targets.sessionOf(scope, tip, meta);
    const agentId = request.agentId ?? session.agentId;
    // An agent registered through another instance within the second: read the registry again.
    if (agentId && !agents.agents.some((known) => known.agentId === agentId))
      agents = await this.agents.snapshot(scope.tenant, { missing: agentId });
    const parentOf = (id: string) => this.targets.nodeById(tip, nodes, id);
    await checkDecisionAccess(this.store, { scope, tip, agents, parentOf, sessionAgentId: session.agentId, request });
    const agent = agentId ? agents.agent(agentId) : null;
    const budgetMs = decisionBudgetMs(agents, agent, session.agentId);

    const leaseToken = newId();
    const leased = await this.leases.take(scope, tip, this.leases.leaseFor(leaseToken, budgetMs), {
      decisionId,
      session,
      attempts: start.fromReplica ? 1 : COMMIT_ATTEMPTS,
    });
    if ('replay' in leased) return { replay: await this.replay(scope, leased.replay, agentId, agents) };
    return { tip, nodes, previous, meta, session, agentId, agent, agents, budgetMs, leaseToken, leased };
  }

  private async run(context: DecisionContext, reads: Reads): Promise<DecideResult> {
    const { scope } = context;
    const prepared = await this.prepare(context, reads.read, reads.nodes);
    const paths = new Map<number | undefined, Promise<PathRead>>();
    const worker = await askWorkers(
      {
        scope,
        request: context.request,
        agentId: context.agentId,
        agent: context.agent,
        agents: context.agents,
        attempts: context.attempts,
        budgetMs: context.budgetMs,
        triggerCount: context.triggerMessages.length,
        target: prepared.target,
        config: prepared.agent,
        head: prepared.plan.last.id,
        // Each `last` a deciding agent shows is read once, however many agents it passes.
        pathFor: (last) => {
          if (!paths.has(last)) paths.set(last, this.pathTo(scope, reads.read, prepared, last));
          return paths.get(last) as Promise<PathRead>;
        },
        profile: context.userId
          ? this.documents.getDocument({ kind: 'profile', tenant: scope.tenant, id: context.userId })
          : Promise.resolve(null),
      },
      { invokeWorker: this.invokeWorker, now: this.now },
    );

    await recheckDecisionAccess(() => this.agents.snapshot(scope.tenant), {
      sessionAgentId: context.sessionAgentId,
      allowed: context.request.allowed,
    });
    let tip = reads.leased;
    let current = prepared;
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.commit(context, tip, current, worker);
      } catch (error) {
        if (error instanceof LeaseLostError) throw leaseOutlived();
        if (!(error instanceof StaleTipError) || attempt >= COMMIT_ATTEMPTS) throw error;
        // The session moved (a write elsewhere, an append). The answer still applies if what the
        // worker saw — the state at the decision's node — is unchanged; otherwise it does not.
        const fresh = await this.store.readTipWithNodes(scope, context.lookups, { withState: true });
        if (fresh.tip.lease?.holder !== context.leaseToken) throw leaseOutlived();
        const again = await this.prepare(context, fresh.tip, fresh.nodes);
        if (again.target.pointer !== prepared.target.pointer || again.plan.last.id !== prepared.plan.last.id) {
          throw new AgentStateError(
            'conflict',
            'the state changed while the worker was deciding; nothing was written, run the decision again',
            { version: again.target.pointer },
          );
        }
        tip = fresh.tip;
        current = again;
      }
    }
  }

  /** What the worker will see: the trigger's messages planned under the parent, at the tip read. */
  private async prepare(context: DecisionContext, tip: Tip, known: ReadonlyMap<string, NodeRecord>): Promise<Prepared> {
    const { scope, request, triggerMessages, agent } = context;
    const parent = this.targets.nodeById(tip, known, request.parentId ?? tip.head);
    const plan = planChain({ parent, messages: triggerMessages, known, tip, at: this.now().toISOString() });
    const target = await this.targets.atNode(scope, tip, plan.last, context.schemas, context.meta);
    return {
      target,
      known,
      parent,
      plan,
      // A session starts with its agent's registered config until a version records another.
      agent: target.current?.agent ?? agent?.config ?? null,
    };
  }

  private async commit(context: DecisionContext, tip: Tip, prepared: Prepared, worker: WorkerAnswer): Promise<DecideResult> {
    const { scope, agentId } = context;
    const { decisionId } = context.request;
    const { target, plan, agent } = prepared;
    const { schema } = target;
    const { decision, replyMessages } = worker;
    const at = this.now().toISOString();
    // Only ids the worker gave its messages can exist already; generated ones are new.
    const replyKnown =
      worker.replyLookups.length > 0
        ? (await this.store.readTipWithNodes(scope, worker.replyLookups, { withState: false })).nodes
        : new Map<string, NodeRecord>();
    const reply = planReply({ parent: plan.last, messages: replyMessages, known: replyKnown, tip, at }, plan.created, decision.source);
    const head = reply.last;

    // A value overwrites, {} clears; omitted or null keeps. The same for the agent config.
    // With typed fields the answer is the agent's view: what it cannot see is kept as stored.
    const stored = storedState(target);
    const decidedBy = worker.decidedBy;
    const nextState = answeredState(target, decidedBy, decision);
    const nextAgent = decision.agent === undefined || decision.agent === null ? agent : decision.agent;
    const changed = !jsonEqual(nextState, stored) || !jsonEqual(nextAgent, agent);
    const before = pointerOf(head, tip);
    // The reply's nodes start at the decision node's version, so the version continues its lineage.
    const version = changed
      ? nextVersion(
          { tip, nodeId: head.id, pointer: before, current: target.current },
          { state: nextState, agent: nextAgent, at, cause: 'decide', author: decidedBy, decisionId },
        )
      : undefined;
    const resultVersion = version?.version ?? before;
    const visible = visibleState(schema, agentId, nextState);
    // The caller sees the answer as the agent it decided as may: a routed decision's worker may
    // have written fields that agent cannot read.
    const answered = decidedBy === agentId || !('state' in decision.raw) ? decision.raw : { ...decision.raw, state: visible };
    // The answered state is not kept twice when the version has it: a replay reads the version
    // anyway (for the answer's `state`), and takes the worker's state from it when that is what
    // the agent sees of the version (a state that filled the turn's commit twice cost it a write
    // unit more), or when it is large.
    const stateInVersion =
      version !== undefined &&
      'state' in decision.raw &&
      (jsonEqual(answered.state as Json, visible) || encodedSize(decision.raw.state as Json) > KEPT_ANSWER_STATE_BYTES);
    const { state: _answered, ...answerWithoutState } = answered;
    const outcome: DecisionOutcome = {
      decision: stateInVersion ? answerWithoutState : answered,
      ...(stateInVersion ? { decisionStateInVersion: true } : {}),
      version: resultVersion,
      changed,
      head: head.id,
      agent: nextAgent,
      ...(resultVersion === 0 ? { state: visible } : {}),
      agentId,
      ...(worker.routing.length > 0 ? { decidedBy, routing: worker.routing } : {}),
    };
    const record: DoneDecision = { decisionId, status: 'done', attempts: context.attempts, outcome };
    const newNodes: NodeRecord[] = [...plan.created, ...reply.created];
    const result: DecideResult = {
      decisionId,
      decision: answered,
      state: visible,
      agent: nextAgent,
      version: resultVersion,
      changed,
      head: head.id,
    };
    const kept = context.keep?.(result);
    // One change of the log holds all of it, and ends the lease: the trigger's and the worker's
    // messages, the version, the head's move, the decision's answer for replays.
    await this.store
      .commit(scope, {
        basedOn: tip,
        ...(version ? { version, prior: target.current } : {}),
        head: { id: head.id, version: resultVersion, depth: head.depth, place: head.place },
        newNodes,
        parent: plan.created.length > 0 ? plan.anchor : reply.anchor,
        touchSessionAt: at,
        mayCreateSession: tip.kind === 'empty',
        sessionAgentId: target.sessionAgentId,
        sessionUserId: target.sessionUserId,
        ...(target.sessionListed === undefined ? {} : { sessionListed: target.sessionListed }),
        ...(target.sessionLifetime ? { lifetime: target.sessionLifetime } : {}),
        ...(target.sessionTouchedAt ? { sessionTouchedAt: target.sessionTouchedAt } : {}),
        decision: { record, leaseToken: context.leaseToken, remember: context.named },
        ...(kept ? { kept } : {}),
      })
      .catch((error: unknown) => {
        throw tooLargeToCommit(error, reply.created.length > 0 && decision.source === 'worker');
      });
    return result;
  }

  /**
   * The answer of a decision that already happened, as it was first given, to a request that
   * decides as the same agent. The answer is that agent's view (its fields, its worker's
   * answer): a request deciding as another agent, which may see less, gets `422`, not the answer.
   * A state kept in its version is shown through the typed fields of the tenant's agents this
   * request read.
   */
  private async replay(scope: SessionScope, record: DoneDecision, agentId: string | null, agents: AgentSnapshot): Promise<DecideResult> {
    const { outcome } = record;
    if (outcome.agentId !== undefined && outcome.agentId !== agentId) {
      throw new AgentStateError(
        'idempotency_key_reused',
        `decision ${record.decisionId} was made as another agent; its answer is replayed only to requests that decide as that agent`,
      );
    }
    let state = outcome.state ?? null;
    let decision = outcome.decision;
    if (outcome.state === undefined && outcome.version > 0) {
      const version = await this.store.getVersion(scope, outcome.version);
      const schema = agents.schemaFor(version?.sessionAgentId ?? null);
      // As the agent the decision was made as sees it (its author may be another: routes, handoffs).
      state = visibleState(schema, outcome.agentId === undefined ? (version?.author ?? null) : outcome.agentId, version?.state ?? null);
      if (outcome.decisionStateInVersion) decision = { ...decision, state };
    }
    return {
      decisionId: record.decisionId,
      decision,
      state,
      agent: outcome.agent ?? null,
      version: outcome.version,
      changed: outcome.changed,
      head: outcome.head,
    };
  }

  /**
   * The path root→decision node the worker is shown: the parent's path in the log plus the
   * trigger's chain, or (`last`) only the last messages of it, with how many came before.
   */
  private async pathTo(scope: SessionScope, tip: Tip, prepared: Prepared, last: number | undefined): Promise<PathRead> {
    const chain = prepared.plan.chain;
    const fromParent = last === undefined ? undefined : Math.max(0, last - chain.length);
    const base: PathRead =
      fromParent === 0 && prepared.parent.depth > 0
        ? { messages: [], ancestry: [], omitted: prepared.parent.depth }
        : await this.store.readPath(scope, tip, prepared.parent, fromParent === undefined ? {} : { last: fromParent });
    const messages = [...base.messages, ...chain.map((node) => node.message ?? {})];
    const ancestry = [...base.ancestry, ...chain.map((node) => node.id)];
    if (last === undefined || messages.length <= last) return { messages, ancestry, omitted: base.omitted };
    const cut = messages.length - last;
    return { messages: messages.slice(cut), ancestry: ancestry.slice(-last), omitted: base.omitted + cut };
  }
}

/** The reads a decision starts from: the tip as read, the tip its lease made, the nodes the request named. */
/** A decision that holds its lease, and what it read to take it. */
interface Begun {
  tip: Tip;
  nodes: ReadonlyMap<string, NodeRecord>;
  previous: DecisionRecord | null;
  meta: SessionMeta | null;
  session: Awaited<ReturnType<NodeTargets['sessionOf']>>;
  agentId: string | null;
  agent: AgentRecord | null;
  agents: AgentSnapshot;
  budgetMs: number;
  leaseToken: string;
  leased: { tip: Tip };
}

interface Reads {
  read: Tip;
  leased: Tip;
  nodes: ReadonlyMap<string, NodeRecord>;
}

function leaseOutlived(): AgentStateError {
  return new AgentStateError('conflict', 'the decision took longer than its lease; nothing was written');
}

function isWorkerError(error: unknown): boolean {
  return AgentStateError.match(error, 'worker_');
}

/**
 * A commit the store refused as larger than one change may be (`413`, before anything was
 * written): the worker's fault when it added messages to the trigger's (`502`), else the
 * trigger's messages' (`413` naming them).
 */
function tooLargeToCommit(error: unknown, workerAddedMessages: boolean): unknown {
  if (!AgentStateError.match(error, 'payload_too_large')) return error;
  const { limitBytes, sizeBytes } = error.extras as { limitBytes?: number; sizeBytes?: number };
  const size = { ...(limitBytes === undefined ? {} : { limitBytes }), ...(sizeBytes === undefined ? {} : { sizeBytes }) };
  if (workerAddedMessages) {
    return new AgentStateError('worker_failed', `the worker's messages cannot be stored with the trigger's: ${error.message}`, {
      ...size,
      fieldError: 'payload_too_large',
    });
  }
  return new AgentStateError('payload_too_large', error.message, { ...size, field: 'trigger.messages' });
}
