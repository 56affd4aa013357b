import type { AgentSnapshot } from '../agents/agent-reader.js';
import type { AgentRecord, DecisionRecord, DoneDecision, Tip } from '../model/model.js';
import type { RecentChanges } from '../model/ports.js';

/** What a decision reads before its worker is asked, and how much of it: pure choices over what was read. */

/** A decision id already done in this life of the session: in its newest change, or in its record. */
export function doneDecision(tip: Tip, decisionId: string, previous: DecisionRecord | null): DoneDecision | null {
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
export function recentFor(agents: AgentSnapshot, agentId: string | undefined, turn: boolean): RecentChanges {
  if (!turn) return true;
  if (agentId !== undefined) {
    const named = agents.agents.find((agent) => agent.agentId === agentId);
    return named && pathShown(named) === undefined ? 'page' : true;
  }
  return agents.agents.some((agent) => pathShown(agent) !== undefined) ? true : 'page';
}

/** How much of the path an agent's worker is shown: all of it (undefined), or its last N messages. */
export function pathShown(agent: AgentRecord | null): number | undefined {
  return agent?.worker?.messages?.last;
}
