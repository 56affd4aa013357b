import type { AllowedAgents } from '../agents/acting-agent.js';
import { requireMayWorkIn } from '../agents/agent-access.js';
import type { AgentSnapshot } from '../agents/agent-reader.js';
import type { NodeRecord, SessionScope, Tip } from '../model/model.js';
import type { SessionLog } from '../model/ports.js';
import { pointerOf } from '../model/tree.js';
import { requireMayMoveHeadTo } from '../write/head-move.js';

/**
 * What a key limited to agents may decide (API.md section 7): only in its conversations
 * (`403 forbidden`), and under a parent other than the head (where the decision moves the head)
 * only when that move changes no declared field its acting agent may not write
 * (`403 field_forbidden`). Nothing to check for a key that is not limited, or a session without an agent.
 */
export async function checkDecisionAccess(
  store: Pick<SessionLog, 'getVersion'>,
  decision: {
    scope: SessionScope;
    tip: Tip;
    agents: AgentSnapshot;
    /** The node of an id the decision names (else `404 node_not_found`). */
    parentOf: (nodeId: string) => NodeRecord;
    sessionAgentId: string | null;
    request: { allowed?: AllowedAgents; parentId?: string; agentId?: string };
  },
): Promise<void> {
  const { scope, tip, agents, sessionAgentId, request } = decision;
  if (!request.allowed || sessionAgentId === null) return;
  requireMayWorkIn(request.allowed, agents.agents, sessionAgentId, 'decide in');
  if (request.parentId === undefined || request.parentId === tip.head) return;
  const move = { scope, tip, from: tip.headVersion, to: pointerOf(decision.parentOf(request.parentId), tip) };
  await requireMayMoveHeadTo(store, move, agents.schemaFor(sessionAgentId), request.agentId ?? null);
}

/**
 * The same key check again once the workers have answered, right before the decision's commit:
 * a worker may take up to its timeout (25 s), and a move that took the session's agent out of
 * the key's conversations meanwhile must refuse the decision as it refuses any write sent after
 * it (`agents` reads the registry through the instance's copy, dropped at once by a move made
 * here, at most a second old otherwise). The head move was checked against the state at the
 * decision's node, which its commit still requires.
 */
export async function recheckDecisionAccess(
  agents: () => Promise<AgentSnapshot>,
  decision: { sessionAgentId: string | null; allowed?: AllowedAgents },
): Promise<void> {
  if (!decision.allowed || decision.sessionAgentId === null) return;
  requireMayWorkIn(decision.allowed, (await agents()).agents, decision.sessionAgentId, 'decide in');
}
