import type { AgentService } from './agent-service.js';
import { planChain, suppliedIds, type IncomingMessage } from './chain.js';
import { AgentStateError } from './errors.js';
import { isValidId, newId, ROOT_NODE } from './ids.js';
import { applyTypedWrite, checkOverlay, viewOf, type Schema } from './fields.js';
import { encodedSize, isJsonObject, jsonEqual, setOwn, type Json, type JsonObject } from './json.js';
import {
  STATE_LIMIT_BYTES,
  type AgentRecord,
  type DecisionOutcome,
  type DocumentRecord,
  type DoneDecision,
  type NodeRecord,
  type SessionMeta,
  type SessionScope,
  type Tip,
  type VersionRecord,
  type WorkerRecord,
} from './model.js';
import {
  LeaseLostError,
  NodeTakenError,
  StaleTipError,
  type DecisionStore,
  type DocumentStore,
  type SessionStore,
  type TipChange,
} from './ports.js';
import type { SessionService } from './session-service.js';
import { nextLineage, pointerOf, rootNode } from './tree.js';
import { workerTimeoutMs } from './worker-timeout.js';

/** A worker's whole answer is kept to replay it; it must fit one item with room to spare. */
export const DECISION_RESPONSE_LIMIT_BYTES = 256 * 1024;
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

/** Calls a worker with a serialized DecisionRequest; answers its parsed JSON or throws 502/504. */
export type WorkerInvoker = (worker: WorkerRecord, body: string, timeoutMs: number) => Promise<unknown>;

/** Everything a decision read before asking its worker. */
interface Prepared {
  tip: Tip;
  /** The node the trigger's messages go under (or the decision's node when there are none). */
  parent: NodeRecord;
  /** The session's typed fields; null when untyped. */
  schema: Schema | null;
  sessionAgentId: string | null;
  /** The stored state at the decision's node (all fields). */
  stored: Json;
  /** The trigger's messages appended under the parent: the decision happens at `plan.last`. */
  plan: ReturnType<typeof planChain>;
  pointer: number;
  current: VersionRecord | null;
  state: Json;
  agent: Json;
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

  constructor(
    stores: { sessions: SessionStore; decisions: DecisionStore; documents: DocumentStore },
    private readonly sessions: SessionService,
    private readonly agents: AgentService,
    private readonly invokeWorker: WorkerInvoker,
    private readonly now: () => Date = () => new Date(),
  ) {
    this.store = stores.sessions;
    this.decisions = stores.decisions;
    this.documents = stores.documents;
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
      const attempts = (settled?.attempts ?? 0) + 1;

      const result = await this.run(scope, { ...request, decisionId }, agentId, agent, timeoutMs, attempts, leaseToken, meta, agents);
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

  private async run(
    scope: SessionScope,
    request: DecideRequest & { decisionId: string },
    agentId: string | null,
    agent: AgentRecord | null,
    timeoutMs: number,
    attempts: number,
    leaseToken: string,
    meta: SessionMeta | null,
    agents: Awaited<ReturnType<AgentService['snapshot']>> | null,
  ): Promise<DecideResult> {
    const schemaOf = async (sessionAgentId: string | null) =>
      agents ? agents.schemaFor(sessionAgentId) : this.sessions.schemaOf(scope.tenant, sessionAgentId);
    // Ids are fixed once, so that a commit retried on fresh reads creates the same nodes.
    const triggerMessages = withIds(triggerMessagesOf(request.trigger));
    const prepared = await this.prepare(scope, request.parentId, triggerMessages, agent, agentId, schemaOf);
    const [path, profile, shared] = await Promise.all([
      this.pathTo(scope, prepared.plan, prepared.parent),
      this.profileOf(scope, meta),
      this.documents.getDocument({ kind: 'shared', tenant: scope.tenant }),
    ]);
    const shown = withOverlay(prepared, agentId, request.stateOverlay);

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
      attempts,
      version: prepared.pointer,
      head: prepared.plan.last.id,
      profile: profile?.state ?? null,
      shared: shared?.state ?? null,
    };
    const answer = agent?.worker
      ? await this.invokeWorker(agent.worker, JSON.stringify(decisionRequest), timeoutMs)
      : (request.proposed ?? {});
    const decision = validateDecisionResponse(answer);
    const replyMessages = withIds(decision.messages ?? []);

    let current = prepared;
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.commit(scope, request.decisionId, agentId, attempts, leaseToken, current, decision, replyMessages);
      } catch (error) {
        if (error instanceof LeaseLostError) {
          throw new AgentStateError('conflict', 'the decision took longer than its lease; nothing was written');
        }
        if (!(error instanceof StaleTipError || error instanceof NodeTakenError) || attempt >= COMMIT_ATTEMPTS) throw error;
        // The session moved (a write elsewhere, an append). The answer still applies if what the
        // worker saw — the state at the decision's node — is unchanged; otherwise it does not.
        const fresh = await this.prepare(scope, request.parentId, triggerMessages, agent, agentId, schemaOf);
        if (fresh.pointer !== prepared.pointer || fresh.plan.last.id !== prepared.plan.last.id) {
          throw new AgentStateError(
            'conflict',
            'the state changed while the worker was deciding; nothing was written, run the decision again',
            { version: fresh.pointer },
          );
        }
        current = fresh;
      }
    }
  }

  /** Reads what the worker will see: the trigger's messages planned under the parent. */
  private async prepare(
    scope: SessionScope,
    parentId: string | undefined,
    messages: IncomingMessage[],
    agent: AgentRecord | null,
    agentId: string | null,
    schemaOf: (sessionAgentId: string | null) => Promise<Schema | null>,
  ): Promise<Prepared> {
    const lookups = [...new Set([...suppliedIds(messages), ...(parentId ? [parentId] : [])])];
    const [tip, known] = await Promise.all([
      this.store.readTip(scope, { withState: true }),
      this.store.getNodes(scope, lookups),
    ]);
    const parent = await this.loadNode(scope, tip, known, parentId ?? tip.head);
    const plan = planChain({ parent, messages, known, tip, at: this.now().toISOString() });
    const pointer = pointerOf(plan.last, tip);
    let current: VersionRecord | null = null;
    if (pointer > 0) {
      current = tip.latest?.version === pointer ? tip.latest : await this.store.getVersion(scope, pointer);
      if (!current) throw new AgentStateError('internal', `version ${pointer} is missing`);
    }
    const sessionAgentId = await this.sessions.sessionAgentOf(scope, tip);
    const schema = await schemaOf(sessionAgentId);
    const stored = current?.state ?? null;
    return {
      tip,
      parent,
      schema,
      sessionAgentId,
      stored,
      plan,
      pointer,
      current,
      // The worker sees only what its agent may read.
      state: schema ? viewOf(schema, agentId, stored) : stored,
      // A session starts with its agent's registered config until a version records another.
      agent: current?.agent ?? agent?.config ?? null,
    };
  }

  private async commit(
    scope: SessionScope,
    decisionId: string,
    agentId: string | null,
    attempts: number,
    leaseToken: string,
    prepared: Prepared,
    decision: ValidDecision,
    replyMessages: IncomingMessage[],
  ): Promise<DecideResult> {
    const { tip, plan, state, agent } = prepared;
    const at = this.now().toISOString();
    const replyKnown = await this.store.getNodes(scope, suppliedIds(replyMessages));
    const reply = planChain({ parent: plan.last, messages: replyMessages, known: replyKnown, tip, at });
    const head = reply.last;

    // A value overwrites, {} clears; omitted or null keeps. The same for the agent config.
    // With typed fields the answer is the agent's view: what it cannot see is kept as stored.
    const meant = decision.state === undefined || decision.state === null ? state : decision.state;
    const nextState = prepared.schema ? typedAnswer(prepared.schema, agentId, prepared.stored, state, meant) : meant;
    const nextAgent = decision.agent === undefined || decision.agent === null ? agent : decision.agent;
    const changed = !jsonEqual(nextState, prepared.stored) || !jsonEqual(nextAgent, agent);
    const before = pointerOf(head, tip);
    const version: VersionRecord | undefined = changed
      ? {
          version: tip.version + 1,
          node: head.id,
          prevVersion: before,
          cause: 'decide',
          author: agentId,
          decisionId,
          createdAt: at,
          state: nextState,
          agent: nextAgent,
          lineage: nextLineage(prepared.current),
        }
      : undefined;
    const resultVersion = version?.version ?? before;
    const outcome: DecisionOutcome = {
      decision: decision.raw,
      version: resultVersion,
      changed,
      head: head.id,
      agent: nextAgent,
      ...(resultVersion === 0 ? { state: prepared.schema ? viewOf(prepared.schema, agentId, nextState) : nextState } : {}),
    };
    const record: DoneDecision = { decisionId, status: 'done', attempts, outcome };
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
        sessionAgentId: prepared.sessionAgentId,
        decision: { record, leaseToken },
      };
      await this.store.commit(scope, change);
    } else {
      await this.decisions.completeDecision(scope, { record, leaseToken });
    }
    const visible = prepared.schema ? viewOf(prepared.schema, agentId, nextState) : nextState;
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
    if (outcome.state === undefined && outcome.version > 0) {
      const version = await this.store.getVersion(scope, outcome.version);
      const schema = await this.sessions.schemaOf(scope.tenant, version?.sessionAgentId ?? null);
      state = version?.state ?? null;
      if (schema) state = viewOf(schema, version?.author ?? null, state);
    }
    return {
      decisionId: record.decisionId,
      decision: outcome.decision,
      state,
      agent: outcome.agent ?? null,
      version: outcome.version,
      changed: outcome.changed,
      head: outcome.head,
    };
  }

  /** The path root→decision node: the parent's stored path plus the trigger's chain. */
  private async pathTo(
    scope: SessionScope,
    plan: ReturnType<typeof planChain>,
    parent: NodeRecord,
  ): Promise<{ messages: JsonObject[]; ancestry: string[] }> {
    const base = await this.sessions.pathFrom(scope, parent);
    return {
      messages: [...base.messages, ...plan.chain.map((node) => node.message ?? {})],
      ancestry: [...base.ancestry, ...plan.chain.map((node) => node.id)],
    };
  }

  private async loadNode(scope: SessionScope, tip: Tip, known: Map<string, NodeRecord>, nodeId: string): Promise<NodeRecord> {
    // The root as head needs no read: its pointer is on the tip and it has no ancestors.
    if (nodeId === ROOT_NODE && tip.head === ROOT_NODE && !known.has(ROOT_NODE)) return rootNode('');
    const node = known.get(nodeId) ?? (await this.store.getNode(scope, nodeId));
    if (node) return node;
    if (nodeId === ROOT_NODE || (nodeId === tip.head && tip.head === ROOT_NODE)) return rootNode('');
    throw new AgentStateError('node_not_found', `node ${nodeId} does not exist`, { nodeId });
  }
}

// ---- the worker's answer ----------------------------------------------------------------

interface ValidDecision {
  raw: JsonObject;
  state?: Json;
  agent?: Json;
  messages?: IncomingMessage[];
}

function workerFailed(detail: string): AgentStateError {
  return new AgentStateError('worker_failed', `the worker's answer is not a valid DecisionResponse: ${detail}`);
}

/** A DecisionResponse is `{state?, agent?, messages?, ...}`; anything else is the worker's fault. */
export function validateDecisionResponse(answer: unknown): ValidDecision {
  if (!isJsonObject(answer)) throw workerFailed('it must be a JSON object');
  const raw = answer;
  const bytes = encodedSize(raw);
  if (bytes > DECISION_RESPONSE_LIMIT_BYTES) {
    throw workerFailed(`it is ${bytes} bytes of JSON; the limit is ${DECISION_RESPONSE_LIMIT_BYTES}`);
  }
  const decision: ValidDecision = { raw };
  if ('state' in raw) {
    decision.state = raw.state as Json;
    const stateBytes = encodedSize(decision.state);
    if (stateBytes > STATE_LIMIT_BYTES) throw workerFailed(`state is ${stateBytes} bytes; the limit is ${STATE_LIMIT_BYTES}`);
  }
  if ('agent' in raw) decision.agent = raw.agent as Json;
  if ('messages' in raw && raw.messages !== null) {
    if (!Array.isArray(raw.messages)) throw workerFailed('messages must be an array');
    decision.messages = raw.messages.map((message, index) => {
      if (!isJsonObject(message) || typeof message.role !== 'string' || message.role.length === 0) {
        throw workerFailed(`messages[${index}] must be an object with a string role`);
      }
      if (message.id !== undefined && (!isValidId(message.id) || message.id === ROOT_NODE)) {
        throw workerFailed(`messages[${index}].id is not a valid node id`);
      }
      return message as IncomingMessage;
    });
  }
  return decision;
}

/** The state the worker is shown: its view, with the request's `stateOverlay` on top. */
function withOverlay(prepared: Prepared, agentId: string | null, overlay: JsonObject | undefined): Json {
  if (!overlay) return prepared.state;
  if (prepared.schema) checkOverlay(prepared.schema, agentId, overlay);
  const base = isJsonObject(prepared.state) ? prepared.state : {};
  const shown: JsonObject = { ...base };
  for (const [name, value] of Object.entries(overlay)) {
    if (value === null) delete shown[name];
    else setOwn(shown, name, value);
  }
  return shown;
}

/** A worker's state, checked against its agent's write scope; its faults are the worker's. */
function typedAnswer(schema: Schema, agentId: string | null, stored: Json, seen: Json, meant: Json): Json {
  try {
    return applyTypedWrite(schema, agentId, stored, seen, meant);
  } catch (error) {
    if (!(error instanceof AgentStateError)) throw error;
    throw new AgentStateError('worker_failed', `the worker's state breaks the typed fields: ${error.message}`, {
      ...error.extras,
      fieldError: error.code,
    });
  }
}

function triggerMessagesOf(trigger: DecideRequest['trigger']): IncomingMessage[] {
  if (trigger.type !== 'client.messages') return [];
  return (trigger.messages ?? []) as IncomingMessage[];
}

/** Gives every message without an id a generated one, so a retried commit names the same nodes. */
function withIds(messages: readonly IncomingMessage[]): IncomingMessage[] {
  return messages.map((message) => (message.id === undefined ? { ...message, id: newId() } : message));
}

function isWorkerError(error: unknown): boolean {
  return AgentStateError.match(error, 'worker_');
}
