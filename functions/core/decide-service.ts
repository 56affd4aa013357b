import type { AgentService } from './agent-service.js';
import { type ChainPlan, type IncomingMessage, planChain, suppliedIds } from './chain.js';
import {
  type AnswerSource,
  answeredState,
  triggerMessagesOf,
  type ValidDecision,
  validateDecisionResponse,
  withIds,
  withOverlay,
} from './decision-answer.js';
import { AgentStateError } from './errors.js';
import { newId, ROOT_NODE } from './ids.js';
import { encodedSize, type Json, type JsonObject, jsonEqual, stringifyJson } from './json.js';
import { checkDecisionMessages } from './limits.js';
import { type MessagePath, pathFrom } from './message-path.js';
import type {
  AgentRecord,
  DecisionOutcome,
  DocumentRecord,
  DoneDecision,
  NodeRecord,
  SessionMeta,
  SessionScope,
  WorkerRecord,
} from './model.js';
import {
  type DecisionStore,
  type DocumentStore,
  LeaseLostError,
  NodeTakenError,
  type SessionStore,
  StaleTipError,
  type TipChange,
} from './ports.js';
import { nextVersion, pointerOf, rootNode } from './tree.js';
import { workerTimeoutMs } from './worker-timeout.js';
import { type SchemaSource, storedState, visibleState, type WriteTarget, WriteTargets } from './write-target.js';

/** An answered state larger than this is replayed from its version rather than kept with the decision. */
const KEPT_ANSWER_STATE_BYTES = 64 * 1024;

/** How long a lease outlives its worker's timeout, to cover the reads and the commit. */
const LEASE_MARGIN_MS = 10_000;
/** Commits that lose a race to unrelated writes are retried this often before giving up. */
const COMMIT_ATTEMPTS = 5;

export interface DecideRequest {
  trigger: JsonObject & { type: string };
  decisionId?: string;
  agentId?: string;
  turnId?: string;
  parentId?: string;
  proposed?: JsonObject;
  /** Typed fields seeded into the state the worker sees, for this request only. */
  stateOverlay?: JsonObject;
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
  /** The session item, when it was read up front (a request that names no agent). */
  readonly meta: SessionMeta | null;
  /** The session's typed fields: from the tenant's agents read once, when they were. */
  readonly schemas: SchemaSource;
  /** The trigger's messages, their ids fixed once so that a retried commit creates the same nodes. */
  readonly triggerMessages: readonly IncomingMessage[];
}

/** Everything a decision read before asking its worker. */
interface Prepared {
  /** The decision's node (`plan.last`) as a write target: the tip, its version, the typed fields. */
  target: WriteTarget;
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
}

/**
 * `POST /v1/sessions/{sid}/decide` (API.md section 6): one decision at a time per session,
 * state riding the decision to the agent's worker and back, everything the answer writes
 * committed in one atomic step at the new head.
 */
export class DecideService {
  private readonly store: SessionStore;
  private readonly decisions: DecisionStore;
  private readonly documents: DocumentStore;
  private readonly targets: WriteTargets;

  constructor(
    stores: { sessions: SessionStore; decisions: DecisionStore; documents: DocumentStore },
    private readonly agents: AgentService,
    private readonly invokeWorker: WorkerInvoker,
    private readonly now: () => Date = () => new Date(),
  ) {
    this.store = stores.sessions;
    this.decisions = stores.decisions;
    this.documents = stores.documents;
    this.targets = new WriteTargets(stores.sessions, (tenant, agentId) => agents.schemaFor(tenant, agentId));
  }

  async decide(scope: SessionScope, request: DecideRequest): Promise<DecideResult> {
    const decisionId = request.decisionId ?? newId();
    const [previous, meta] = await Promise.all([
      request.decisionId ? this.decisions.getDecision(scope, decisionId) : Promise.resolve(null),
      request.agentId ? Promise.resolve(null) : this.store.getMeta(scope),
    ]);
    if (previous?.status === 'done') return this.replay(scope, previous);

    const agentId = request.agentId ?? meta?.agentId ?? null;
    // One query of the tenant's agents gives the deciding agent and the session's typed fields.
    const agents = agentId ? await this.agents.snapshot(scope.tenant) : null;
    const agent = agentId && agents ? agents.agent(agentId) : null;
    const timeoutMs = workerTimeoutMs(agent?.worker ?? {});

    const leaseToken = newId();
    const leaseUntil = this.now().getTime() + timeoutMs + LEASE_MARGIN_MS;
    if (!(await this.decisions.acquireLease(scope, leaseToken, leaseUntil))) {
      throw new AgentStateError('decision_in_progress', `another decision is running in session ${scope.sessionId}`, {
        sessionId: scope.sessionId,
      });
    }
    let leaseHeld = true;
    try {
      // A twin request with the same id may have finished while we waited for the lease.
      const settled = request.decisionId ? await this.decisions.getDecision(scope, decisionId) : null;
      if (settled?.status === 'done') return await this.replay(scope, settled);

      const result = await this.run({
        scope,
        request: { ...request, decisionId },
        agentId,
        agent,
        timeoutMs,
        attempts: (settled?.attempts ?? 0) + 1,
        leaseToken,
        meta,
        schemas: agents
          ? async (_tenant, sessionAgentId) => agents.schemaFor(sessionAgentId)
          : (tenant, sessionAgentId) => this.targets.schemaOf(tenant, sessionAgentId),
        triggerMessages: withIds(triggerMessagesOf(request.trigger)),
      });
      leaseHeld = false; // released by the commit itself
      return result;
    } catch (error) {
      if (request.decisionId && isWorkerError(error)) {
        await this.decisions.recordFailedAttempt(scope, decisionId).catch(() => undefined);
      }
      throw error;
    } finally {
      if (leaseHeld) await this.decisions.releaseLease(scope, leaseToken).catch(() => undefined);
    }
  }

  private async run(context: DecisionContext): Promise<DecideResult> {
    const { scope, request, agentId, agent } = context;
    const prepared = await this.prepare(context);
    const [path, profile, shared] = await Promise.all([
      this.pathTo(scope, prepared),
      this.profileOf(scope, context.meta),
      this.documents.getDocument({ kind: 'shared', tenant: scope.tenant }),
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
      attempts: context.attempts,
      version: prepared.target.pointer,
      head: prepared.plan.last.id,
      profile: profile?.state ?? null,
      shared: shared?.state ?? null,
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
    const worker: WorkerAnswer = { decision, replyMessages: withIds(decision.messages ?? []) };

    let current = prepared;
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.commit(context, current, worker);
      } catch (error) {
        if (error instanceof LeaseLostError) {
          throw new AgentStateError('conflict', 'the decision took longer than its lease; nothing was written');
        }
        if (!(error instanceof StaleTipError || error instanceof NodeTakenError) || attempt >= COMMIT_ATTEMPTS) throw error;
        // The session moved (a write elsewhere, an append). The answer still applies if what the
        // worker saw — the state at the decision's node — is unchanged; otherwise it does not.
        const fresh = await this.prepare(context);
        if (fresh.target.pointer !== prepared.target.pointer || fresh.plan.last.id !== prepared.plan.last.id) {
          throw new AgentStateError(
            'conflict',
            'the state changed while the worker was deciding; nothing was written, run the decision again',
            { version: fresh.target.pointer },
          );
        }
        current = fresh;
      }
    }
  }

  /** Reads what the worker will see: the trigger's messages planned under the parent. */
  private async prepare(context: DecisionContext): Promise<Prepared> {
    const { scope, request, triggerMessages, agentId, agent } = context;
    const parentId = request.parentId;
    const lookups = [...new Set([...suppliedIds(triggerMessages), ...(parentId ? [parentId] : [])])];
    const [tip, known] = await Promise.all([this.store.readTip(scope, { withState: true }), this.store.getNodes(scope, lookups)]);
    // The root as head needs no read: its pointer is on the tip and it has no ancestors.
    const parentOrHead = parentId ?? tip.head;
    const parent =
      parentOrHead === ROOT_NODE && tip.head === ROOT_NODE && !known.has(ROOT_NODE)
        ? rootNode('')
        : await this.targets.nodeById(scope, known, parentOrHead);
    const plan = planChain({ parent, messages: triggerMessages, known, tip, at: this.now().toISOString() });
    const target = await this.targets.atNode(scope, tip, plan.last, context.schemas);
    return {
      target,
      parent,
      plan,
      // The worker sees only what its agent may read.
      state: visibleState(target.schema, agentId, storedState(target)),
      // A session starts with its agent's registered config until a version records another.
      agent: target.current?.agent ?? agent?.config ?? null,
    };
  }

  private async commit(context: DecisionContext, prepared: Prepared, worker: WorkerAnswer): Promise<DecideResult> {
    const { scope, agentId } = context;
    const { decisionId } = context.request;
    const { target, plan, agent } = prepared;
    const { tip, schema } = target;
    const { decision, replyMessages } = worker;
    const at = this.now().toISOString();
    const replyKnown = await this.store.getNodes(scope, suppliedIds(replyMessages));
    const reply = planChain({ parent: plan.last, messages: replyMessages, known: replyKnown, tip, at });
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
    };
    const record: DoneDecision = { decisionId, status: 'done', attempts: context.attempts, outcome };
    const completion = { record, leaseToken: context.leaseToken };
    const newNodes: NodeRecord[] = [...plan.created, ...reply.created];
    const headMoves = head.id !== tip.head;

    if (version || newNodes.length > 0 || headMoves) {
      const change: TipChange = {
        basedOn: tip,
        ...(version ? { version } : {}),
        head: { id: head.id, version: resultVersion, depth: head.depth },
        nodePointers: headMoves ? [{ id: tip.head, version: tip.headVersion }] : [],
        newNodes,
        touchSessionAt: at,
        mayCreateSession: tip.slot === 0,
        sessionAgentId: target.sessionAgentId,
        decision: completion,
      };
      await this.store.commit(scope, change);
    } else {
      await this.decisions.completeDecision(scope, completion);
    }
    return { decisionId, decision: decision.raw, state: visible, agent: nextAgent, version: resultVersion, changed, head: head.id };
  }

  /** The profile of the session's user; the session item is read only if not read already. */
  private async profileOf(scope: SessionScope, meta: SessionMeta | null): Promise<DocumentRecord | null> {
    const userId = (meta ?? (await this.store.getMeta(scope)))?.userId;
    return userId ? this.documents.getDocument({ kind: 'profile', tenant: scope.tenant, id: userId }) : null;
  }

  /** The answer of a decision that already happened, as it was first given. */
  private async replay(scope: SessionScope, record: DoneDecision): Promise<DecideResult> {
    const { outcome } = record;
    let state = outcome.state ?? null;
    let decision = outcome.decision;
    if (outcome.state === undefined && outcome.version > 0) {
      const version = await this.store.getVersion(scope, outcome.version);
      const schema = await this.targets.schemaOf(scope.tenant, version?.sessionAgentId ?? null);
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

  /** The path root→decision node: the parent's stored path plus the trigger's chain. */
  private async pathTo(scope: SessionScope, prepared: Prepared): Promise<MessagePath> {
    const base = await pathFrom(this.store, scope, prepared.parent);
    return {
      messages: [...base.messages, ...prepared.plan.chain.map((node) => node.message ?? {})],
      ancestry: [...base.ancestry, ...prepared.plan.chain.map((node) => node.id)],
    };
  }
}

function isWorkerError(error: unknown): boolean {
  return AgentStateError.match(error, 'worker_');
}
