import type { AllowedAgents } from '../agents/acting-agent.js';
import type { AgentSnapshot } from '../agents/agent-reader.js';
import { hierarchyOf } from '../agents/hierarchy.js';
import { workerTimeoutMs } from '../agents/worker-timeout.js';
import { isJsonObject, type Json, type JsonObject, stringifyJson } from '../json/json.js';
import { checkDecisionMessages } from '../model/limits.js';
import type { PathRead } from '../model/message-path.js';
import type { AgentRecord, DocumentRecord, RoutingHop, SessionScope, WorkerRecord } from '../model/model.js';
import { type IncomingMessage, suppliedIds } from '../sessions/chain.js';
import { storedState, visibleState, type WriteTarget } from '../write/write-target.js';
import { type AnswerSource, type ValidDecision, validateDecisionResponse, withIds, withOverlay } from './decision-answer.js';
import { pathShown } from './decision-reads.js';

/**
 * Who answers a decision, and what they answer (API.md sections 6 and 13): the routes of the
 * agent it starts at choose the deciding agent, whose worker is asked; a worker may hand the
 * decision on to another agent of the session's hierarchy, whose worker is asked in turn. Each
 * worker is shown the state as its own agent may read it and the path as its agent shows it,
 * and every call of one decision shares its budget (the lease holds that long).
 */

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

/** The body a worker receives: snake_case, as in the Substructure worker protocol. */
export interface DecisionRequest {
  session_id: string;
  decision_id: string;
  /** The deciding agent: the session's (or the request's), or the agent routes or handoffs led to. */
  agent_id: string | null;
  /** The agent the decision started at when another decides (API.md section 13); else null. */
  routed_from: string | null;
  /** The hops that led to `agent_id`, in order; empty when the agent it started at decides. */
  routing: RoutingHop[];
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

/** The answer that decided, checked, and its messages with their ids fixed. */
export interface WorkerAnswer {
  /** The agent whose worker (or, with none, whose `proposed`) decided, and the hops that led there. */
  decidedBy: string | null;
  routing: RoutingHop[];
  decision: ValidDecision;
  replyMessages: IncomingMessage[];
  /** The ids the worker gave its messages itself: those may exist already. */
  replyLookups: string[];
}

/** What a decision read before it asks: fixed for every hop. */
export interface AskInput {
  scope: SessionScope;
  request: DecideRequest & { decisionId: string };
  /** The agent the decision starts at (the request's, else the session's), and its record. */
  agentId: string | null;
  agent: AgentRecord | null;
  agents: AgentSnapshot;
  attempts: number;
  budgetMs: number;
  triggerCount: number;
  /** The decision's node, its version and the session's typed fields. */
  target: WriteTarget;
  /** The agent config at the decision's node. */
  config: Json;
  head: string;
  /** The path as an agent that shows its worker the last `last` messages (all: undefined) sees it. */
  pathFor: (last: number | undefined) => Promise<PathRead>;
  profile: Promise<DocumentRecord | null>;
}

export async function askWorkers(input: AskInput, deps: { invokeWorker: WorkerInvoker; now: () => Date }): Promise<WorkerAnswer> {
  const { scope, request, agents, target } = input;
  const { schema } = target;
  const stored = storedState(target);
  const viewOf = (agentId: string | null) => visibleState(schema, agentId, stored);
  // Routing is a chunk of its own (with the filter it evaluates), read only by a decision whose
  // hierarchy routes or whose worker hands on: most decisions never load it.
  const routes = input.agent?.routes?.length ? await loadRouting() : null;
  let { agentId: deciding, routing } = routes
    ? routes.routeDecision(input.agentId, agents.agents, viewOf)
    : { agentId: input.agentId, routing: [] as RoutingHop[] };
  const hierarchy = hierarchyOf(schema, target.sessionAgentId ?? input.agentId, agents.agents);
  const deadline = deps.now().getTime() + input.budgetMs;
  for (;;) {
    const agent = deciding === input.agentId ? input.agent : deciding ? agents.agent(deciding) : null;
    const last = pathShown(agent);
    const [path, profile] = await Promise.all([input.pathFor(last), input.profile]);
    const decisionRequest: DecisionRequest = {
      session_id: scope.sessionId,
      decision_id: request.decisionId,
      agent_id: deciding,
      routed_from: routing.length > 0 ? input.agentId : null,
      routing,
      turn_id: request.turnId ?? null,
      trigger: request.trigger,
      proposed: request.proposed ?? {},
      state: withOverlay(schema, deciding, viewOf(deciding), request.stateOverlay),
      agent: input.config,
      messages: path.messages,
      ancestry: path.ancestry,
      // Said only when the agent shows its worker the last messages alone (`worker.messages`).
      ...(last === undefined ? {} : { messages_omitted: path.omitted }),
      attempts: input.attempts,
      version: target.pointer,
      head: input.head,
      profile: profile?.state ?? null,
      shared: agents.shared?.state ?? null,
    };
    // Without a worker the decision is the caller's own `proposed`, and so is any fault in it.
    const source: AnswerSource = agent?.worker ? 'worker' : 'caller';
    const handedOn = routing.some((hop) => hop.via === 'handoff');
    const answer = agent?.worker
      ? await deps.invokeWorker(agent.worker, stringifyJson(decisionRequest), callTimeoutMs(agent, deadline, deps.now()), {
          // The call's id for its signature (webhook-id): this attempt of this decision, and its hop.
          messageId: `${request.decisionId}:${input.attempts}${handedOn ? `:${routing.length}` : ''}`,
        })
      : (request.proposed ?? {});
    const handoff = source === 'worker' && isJsonObject(answer as Json) && 'handoff' in (answer as JsonObject) ? answer : null;
    if (handoff !== null && deciding !== null) {
      const { handoffOf, handoffHop } = await loadRouting();
      routing = [...routing, handoffHop(routing, deciding, handoffOf(handoff) as NonNullable<ReturnType<typeof handoffOf>>, hierarchy)];
      deciding = (routing.at(-1) as RoutingHop).to;
      continue;
    }
    const decision = validateDecisionResponse(answer, source);
    // Checked before anything is written: the trigger's nodes and the answer's go in one commit.
    checkDecisionMessages(input.triggerCount, decision.messages?.length ?? 0, source);
    return {
      decidedBy: deciding,
      routing,
      decision,
      replyMessages: withIds(decision.messages ?? []),
      replyLookups: suppliedIds(decision.messages ?? []),
    };
  }
}

/**
 * How long the worker calls of a decision may take together: the longest timeout of an agent that
 * may decide it (the agent it starts at, and every agent of the session's hierarchy, which routes
 * and handoffs reach). One agent with a worker: its own timeout, as before routing.
 */
export function decisionBudgetMs(agents: AgentSnapshot, start: AgentRecord | null, sessionAgentId: string | null): number {
  const reachable = hierarchyOf(null, sessionAgentId ?? start?.agentId ?? null, agents.agents);
  const timeouts = agents.agents
    .filter((agent) => reachable.has(agent.agentId) && agent.worker)
    .map((agent) => workerTimeoutMs(agent.worker ?? {}));
  return Math.max(workerTimeoutMs(start?.worker ?? {}), ...timeouts);
}

/** The routing module, loaded on first use (lib/bundling.ts splits the bundle at dynamic imports). */
function loadRouting() {
  return import('../agents/routing.js');
}

/** A call's timeout: its agent's own, within what is left of the decision's budget. */
function callTimeoutMs(agent: AgentRecord, deadline: number, now: Date): number {
  return Math.max(1, Math.min(workerTimeoutMs(agent.worker ?? {}), deadline - now.getTime()));
}
