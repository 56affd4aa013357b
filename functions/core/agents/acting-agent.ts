import { AgentStateError } from '../kernel/errors.js';

/**
 * A key limited to some agents acts only as one of them (API.md section 7): every request it
 * makes names the agent (`X-Agent-Id`, a decision's `agentId`, a webhook's `agentId`, a
 * WebSocket subscription's `agentId`), and that agent must be one of the key's. The one rule
 * behind the HTTP middleware (http/edge/middleware.ts), decisions, webhooks and live sync.
 */

/** The agents a key may act as: null (or absent) when it is not limited to any. */
export type AllowedAgents = readonly string[] | null | undefined;

/** How a refusal is worded where it happens: the request names the agent in its own way. */
export interface ActingAgentWording {
  /** The detail when the request names no agent. */
  missing: string;
  /** The detail when the request names an agent the key may not act as. */
  refused: (agentId: string) => string;
}

/** True when a key with `allowed` may act as `agentId`: any agent for an unlimited key, else only its own. */
export function mayActAs(allowed: AllowedAgents, agentId: string | null | undefined): boolean {
  return !allowed || (agentId != null && allowed.includes(agentId));
}

/** Throws `403 forbidden` (with the key's `agents`) unless a key with `allowed` may act as `agentId`. */
export function requireActingAgent(allowed: AllowedAgents, agentId: string | null | undefined, wording: ActingAgentWording): void {
  if (mayActAs(allowed, agentId)) return;
  throw new AgentStateError('forbidden', agentId == null ? wording.missing : wording.refused(agentId), { agents: allowed });
}
