/**
 * An example agentstate worker: a module exporting `decide(request)`. Start your own from here.
 *
 * Locally (`npm start`), register it as an agent's worker by path (relative to the directory
 * the server was started in). Only modules inside the module directories may be named
 * (`AGENTSTATE_MODULE_DIRS`, default `examples` and `workers`): put your own in `workers/`.
 *
 *   curl -s -X PUT $AS/v1/agents/demo-agent -H "$KEY" -H 'content-type: application/json' \
 *     -d '{"worker":{"url":"module:examples/worker.ts"}}'
 *
 * and run a decision:
 *
 *   curl -s -X POST $AS/v1/sessions/demo/decide -H "$KEY" -H 'content-type: application/json' \
 *     -d '{"agentId":"demo-agent","trigger":{"type":"client.messages","messages":[{"role":"user","content":"hi"}]}}'
 *
 * The same function served over HTTP is examples/http-worker.ts; in AWS, deploy it behind an
 * https:// URL or as a Lambda function (`lambda:<function arn>`), whose handler can be `decide`.
 */

/** A JSON value, as it travels between agentstate and a worker. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** A message on the session's path from the root to the head (API.md section 3). */
export interface Message {
  id?: string;
  role: string;
  content?: Json;
  [field: string]: Json | undefined;
}

/** What agentstate sends a worker for one decision (API.md section 6), in snake_case. */
export interface DecisionRequest {
  session_id: string;
  decision_id: string;
  /** The agent the decision runs for; null when the decide request named none. */
  agent_id: string | null;
  turn_id: string | null;
  /** Passed verbatim from the decide request: `{type, ...}`. */
  trigger: { type: string; [field: string]: Json | undefined };
  /** As given in the decide request; `{}` by default. */
  proposed: Json;
  /** The session's state at the head (only the fields this agent may read). */
  state: Json;
  /** The session's agent config at the head. */
  agent: Json;
  /** The path root → head, after the trigger's messages were appended. */
  messages: Message[];
  ancestry: Json;
  attempts: number;
  /** The version the state and agent were read at. */
  version: number;
  /** The head node's id. */
  head: string;
  /** The profile document of the session's user (commits' `profile` scope); null when none. */
  profile: Json;
  /** The tenant's shared document (commits' `shared` scope); null when none. */
  shared: Json;
}

/**
 * What a worker answers. Every member is optional: `state` overwrites the state (`{}` clears,
 * omitted or null keeps), `agent` replaces the agent config (omitted keeps), and `messages` are
 * appended under the head. Everything is committed in one atomic step.
 */
export interface DecisionResponse {
  state?: Json;
  agent?: Json;
  messages?: Message[];
  [field: string]: unknown;
}

interface ExampleState {
  turns?: number;
  [field: string]: Json | undefined;
}

function isObject(value: Json): value is { [key: string]: Json } {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

export function decide(request: DecisionRequest): DecisionResponse {
  switch (request.trigger.type) {
    case 'session.start':
      // A new session: pick the agent config and start counting turns.
      return { agent: { model: 'small-fast' }, state: { turns: 0 } };

    case 'client.messages': {
      // The user said something (already appended to the tree): count the turn and answer.
      const state: ExampleState = isObject(request.state) ? request.state : {};
      const n = (typeof state.turns === 'number' ? state.turns : 0) + 1;
      return {
        state: { ...state, turns: n },
        messages: [{ role: 'assistant', content: `turn ${n}` }],
      };
    }

    default:
      // Anything else: keep state, agent config and messages as they are.
      return {};
  }
}
