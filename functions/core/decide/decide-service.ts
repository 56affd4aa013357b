import type { AllowedAgents } from '../agents/acting-agent.js';
import type { AgentReader, AgentSnapshot } from '../agents/agent-reader.js';
import { workerTimeoutMs } from '../agents/worker-timeout.js';
import { encodedSize, type Json, type JsonObject, jsonEqual, stringifyJson } from '../json/json.js';
import { AgentStateError } from '../kernel/errors.js';
import { newId } from '../kernel/ids.js';
import { checkDecisionMessages } from '../model/limits.js';
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
  WorkerRecord,
} from '../model/model.js';
import {
  type DecisionStore,
  type DocumentStore,
  LeaseLostError,
  type RecentChanges,
  type SessionLog,
  StaleTipError,
} from '../model/ports.js';
import { pointerOf } from '../model/tree.js';
import { type ChainPlan, type IncomingMessage, lookupsOf, planChain, suppliedIds } from '../sessions/chain.js';
import { nextVersion } from '../write/next-version.js';
import { NodeTargets, type SchemaSource, storedState, visibleState, type WriteTarget } from '../write/write-target.js';
import { checkDecisionAccess } from './decision-access.js';
import {
  type AnswerSource,
  answeredState,
  planReply,
  triggerMessagesOf,
  type ValidDecision,
  validateDecisionResponse,
  withIds,
  withOverlay,
} from './decision-answer.js';
import { COMMIT_ATTEMPTS, DecisionLeases } from './decision-lease.js';

/** An answered state larger than this is replayed from its version rather than kept with the decision. */
const KEPT_ANSWER_STATE_BYTES = 64 * 1024;

export interface DecideRequest {
  trigger: JsonObject & { type: string };
  decisionId?: string;
  agentId?: string;
  turnId?: string;
  parentId?: string;
  proposed?: JsonObject;
  /** Typed fields seeded into the state the worker sees, for this request only. */
  stateOverlay?: JsonObject;
  /** The agents of a key limited to some (null or absent: not limited): it decides only in its conversations. */
  allowed?: AllowedAgents;
}

export interface DecideResult {
  decisionId: string;
  decision: JsonObject;
  state: Json;
  agent: Json;
  version: number;
  changed: boolean;
  head: string;
}

/** The body a worker receives: snake_case, as in the Substructure worker protocol. */
export interface DecisionRequest {
  session_id: string;
  decision_id: string;
  agent_id: string | null;
  turn_id: string | null;
  trigger: JsonObject;
  proposed: JsonObject;
  state: Json;
  agent: Json;
  messages: JsonObject[];
  ancestry: string[];
  /**
   * With the agent's `worker.messages` at `{"last": N}`: how many messages of the path came
   * before `messages` and were left out (0 when `messages` is the whole path, which `ancestry`
   * then starts at the root). Absent when the worker is shown every message.
   */
  messages_omitted?: number;
  attempts: number;
  version: number;
  head: string;
  /** The profile document of the session's user (commits' `profile` scope); null when none. */
  profile: Json;
  /** The tenant's shared document (commits' `shared` scope); null when none. */
  shared: Json;
}

/**
 * Calls a worker with a serialized DecisionRequest; answers its parsed JSON or throws 502/504.
 * `call.messageId` names this call in its signature (`webhook-id`).
 */
export type WorkerInvoker = (worker: WorkerRecord, body: string, timeoutMs: number, call?: { messageId: string }) => Promise<unknown>;

/** One decision, fixed once its lease is held: what each of its steps needs. */
interface DecisionContext {
  readonly scope: SessionScope;
  readonly request: DecideRequest & { decisionId: string };
  /** The deciding agent (the request's, else the session's) and its record; null for none. */
  readonly agentId: string | null;
  readonly agent: AgentRecord | null;
  readonly timeoutMs: number;
  /** This attempt of the decision id: its failed attempts so far, plus one. */
  readonly attempts: number;
  /** The session's lease this decision holds; its commit releases it. */
  readonly leaseToken: string;
  /** Whether the caller named the decision (`decisionId`): then a retry with that id replays it. */
  readonly named: boolean;
  /** The session item, when it was read (a session with nothing written yet). */
  readonly meta: SessionMeta | null;
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
  /** How much of the path the worker is shown (`worker.messages`): all of it, or the last N. */
  readonly last: number | undefined;
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
  /** The state at the decision's node as the deciding agent may see it. */
  state: Json;
  /** The agent config at the decision's node. */
  agent: Json;
}

/** The worker's answer, checked, and its messages with their ids fixed. */
interface WorkerAnswer {
  decision: ValidDecision;
  replyMessages: IncomingMessage[];
  /** The ids the worker gave its messages itself: those may exist already. */
  replyLookups: string[];
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

  async decide(scope: SessionScope, request: DecideRequest): Promise<DecideResult> {
    const decisionId = request.decisionId ?? newId();
    const triggerMessages = withIds(triggerMessagesOf(request.trigger));
    const lookups = lookupsOf(triggerMessagesOf(request.trigger), request.parentId);
    // First the tenant's agents with its shared document (one Query): they tell how much of the
    // path the worker will be shown, and so how much of the log the tip read brings (`recentFor`).
    let agents = await this.agents.snapshot(scope.tenant);
    // Then the tip, the nodes named, and the decision's record, together: a record read before
    // the tip could miss a decision that finished and was followed by another change meanwhile.
    const [{ tip, nodes }, previous] = await Promise.all([
      this.store.readTipWithNodes(scope, lookups, {
        withState: true,
        recent: recentFor(agents, request.agentId, triggerMessages.length > 0),
        // Under the head, the ids read are the trigger's new messages': one round.
        expectNew: request.parentId === undefined,
      }),
      request.decisionId ? this.decisions.getDecision(scope, decisionId) : Promise.resolve(null),
    ]);
    const done = doneDecision(tip, decisionId, previous);
    if (request.decisionId && done) {
      return this.replay(scope, done, request.agentId ?? (await this.targets.sessionOf(scope, tip)).agentId, agents);
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
    const timeoutMs = workerTimeoutMs(agent?.worker ?? {});
    const failedBefore = previous?.status === 'failed' && previous.incarnation === tip.incarnation ? previous.attempts : 0;

    const leaseToken = newId();
    const leased = await this.leases.take(scope, tip, this.leases.leaseFor(leaseToken, timeoutMs), decisionId, session);
    if ('replay' in leased) return this.replay(scope, leased.replay, agentId, agents);
    let leaseHeld = true;
    try {
      const result = await this.run(
        {
          scope,
          request: { ...request, decisionId },
          agentId,
          agent,
          timeoutMs,
          attempts: failedBefore + 1,
          leaseToken,
          named: request.decisionId !== undefined,
          meta,
          userId: session.userId,
          schemas: async (_tenant, sessionAgentId) => agents.schemaFor(sessionAgentId),
          shared: agents.shared,
          triggerMessages,
          lookups,
          last: pathShown(agent),
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

  private async run(context: DecisionContext, reads: Reads): Promise<DecideResult> {
    const { scope, request, agentId, agent } = context;
    const prepared = await this.prepare(context, reads.read, reads.nodes);
    const [path, profile] = await Promise.all([
      this.pathTo(scope, reads.read, prepared, context.last),
      context.userId ? this.documents.getDocument({ kind: 'profile', tenant: scope.tenant, id: context.userId }) : Promise.resolve(null),
    ]);
    const shown = withOverlay(prepared.target.schema, agentId, prepared.state, request.stateOverlay);

    const decisionRequest: DecisionRequest = {
      session_id: scope.sessionId,
      decision_id: request.decisionId,
      agent_id: agentId,
      turn_id: request.turnId ?? null,
      trigger: request.trigger,
      proposed: request.proposed ?? {},
      state: shown,
      agent: prepared.agent,
      messages: path.messages,
      ancestry: path.ancestry,
      // Said only when the agent shows its worker the last messages alone (`worker.messages`).
      ...(context.last === undefined ? {} : { messages_omitted: path.omitted }),
      attempts: context.attempts,
      version: prepared.target.pointer,
      head: prepared.plan.last.id,
      profile: profile?.state ?? null,
      shared: context.shared?.state ?? null,
    };
    // Without a worker the decision is the caller's own `proposed`, and so is any fault in it.
    const source: AnswerSource = agent?.worker ? 'worker' : 'caller';
    const answer = agent?.worker
      ? await this.invokeWorker(agent.worker, stringifyJson(decisionRequest), context.timeoutMs, {
          // The call's id for its signature (webhook-id): this attempt of this decision.
          messageId: `${context.request.decisionId}:${context.attempts}`,
        })
      : (request.proposed ?? {});
    const decision = validateDecisionResponse(answer, source);
    // Checked before anything is written: the trigger's nodes and the answer's go in one commit.
    checkDecisionMessages(context.triggerMessages.length, decision.messages?.length ?? 0, source);
    const worker: WorkerAnswer = {
      decision,
      replyMessages: withIds(decision.messages ?? []),
      replyLookups: suppliedIds(decision.messages ?? []),
    };

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
    const { scope, request, triggerMessages, agentId, agent } = context;
    const parent = this.targets.nodeById(tip, known, request.parentId ?? tip.head);
    const plan = planChain({ parent, messages: triggerMessages, known, tip, at: this.now().toISOString() });
    const target = await this.targets.atNode(scope, tip, plan.last, context.schemas, context.meta);
    return {
      target,
      known,
      parent,
      plan,
      // The worker sees only what its agent may read.
      state: visibleState(target.schema, agentId, storedState(target)),
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
    const nextState = answeredState(target, agentId, decision);
    const nextAgent = decision.agent === undefined || decision.agent === null ? agent : decision.agent;
    const changed = !jsonEqual(nextState, stored) || !jsonEqual(nextAgent, agent);
    const before = pointerOf(head, tip);
    // The reply's nodes start at the decision node's version, so the version continues its lineage.
    const version = changed
      ? nextVersion(
          { tip, nodeId: head.id, pointer: before, current: target.current },
          { state: nextState, agent: nextAgent, at, cause: 'decide', author: agentId, decisionId },
        )
      : undefined;
    const resultVersion = version?.version ?? before;
    const visible = visibleState(schema, agentId, nextState);
    // A large answered state is not kept twice: the version has it, and a replay reads it there.
    const stateInVersion =
      version !== undefined && 'state' in decision.raw && encodedSize(decision.raw.state as Json) > KEPT_ANSWER_STATE_BYTES;
    const { state: _answered, ...answerWithoutState } = decision.raw;
    const outcome: DecisionOutcome = {
      decision: stateInVersion ? answerWithoutState : decision.raw,
      ...(stateInVersion ? { decisionStateInVersion: true } : {}),
      version: resultVersion,
      changed,
      head: head.id,
      agent: nextAgent,
      ...(resultVersion === 0 ? { state: visible } : {}),
      agentId,
    };
    const record: DoneDecision = { decisionId, status: 'done', attempts: context.attempts, outcome };
    const newNodes: NodeRecord[] = [...plan.created, ...reply.created];
    // One change of the log holds all of it, and ends the lease: the trigger's and the worker's
    // messages, the version, the head's move, the decision's answer for replays.
    await this.store.commit(scope, {
      basedOn: tip,
      ...(version ? { version, prior: target.current } : {}),
      head: { id: head.id, version: resultVersion, depth: head.depth, place: head.place },
      newNodes,
      parent: plan.created.length > 0 ? plan.anchor : reply.anchor,
      touchSessionAt: at,
      mayCreateSession: tip.kind === 'empty',
      sessionAgentId: target.sessionAgentId,
      sessionUserId: target.sessionUserId,
      decision: { record, leaseToken: context.leaseToken, remember: context.named },
    });
    return { decisionId, decision: decision.raw, state: visible, agent: nextAgent, version: resultVersion, changed, head: head.id };
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
      state = visibleState(schema, version?.author ?? null, version?.state ?? null);
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
interface Reads {
  read: Tip;
  leased: Tip;
  nodes: ReadonlyMap<string, NodeRecord>;
}

/** A decision id already done in this life of the session: in its newest change, or in its record. */
function doneDecision(tip: Tip, decisionId: string, previous: DecisionRecord | null): DoneDecision | null {
  if (tip.recentDecision?.decisionId === decisionId) return tip.recentDecision;
  if (previous?.status === 'done' && previous.incarnation === tip.incarnation) return previous;
  return null;
}

/**
 * How much of the log a decision's tip read brings along, chosen before the tip names the
 * session's agent (docs/architecture.md, "What the whole path costs a decision"). A page of the
 * log (up to 1 MB, newest first) for a turn of a conversation (a trigger with messages) whose
 * worker is shown the whole path: such a log is mostly its path, so the page costs the read
 * units a range read of the path would, and holds the whole path of any log under a page. The
 * 48 newest changes otherwise: a worker shown only its last messages needs no more, and a
 * decision without messages (a tick, a tool's result) may follow a pile of versions after the
 * path's last message that a page would read for nothing. The deciding agent is the one the
 * request names, else the session's, which only the tip tells: then a page unless some agent of
 * the tenant shows only the last messages. A wrong guess changes no answer, only the reads
 * after the tip (a range read more, or a page read wider than needed).
 */
function recentFor(agents: AgentSnapshot, agentId: string | undefined, turn: boolean): RecentChanges {
  if (!turn) return true;
  if (agentId !== undefined) {
    const named = agents.agents.find((agent) => agent.agentId === agentId);
    return named && pathShown(named) === undefined ? 'page' : true;
  }
  return agents.agents.some((agent) => pathShown(agent) !== undefined) ? true : 'page';
}

/** How much of the path an agent's worker is shown: all of it (undefined), or its last N messages. */
function pathShown(agent: AgentRecord | null): number | undefined {
  return agent?.worker?.messages?.last;
}

function leaseOutlived(): AgentStateError {
  return new AgentStateError('conflict', 'the decision took longer than its lease; nothing was written');
}

function isWorkerError(error: unknown): boolean {
  return AgentStateError.match(error, 'worker_');
}
