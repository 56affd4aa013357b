import { sessionDefaultsFrom } from '../../core/model/lifetime.js';
import { DynamoDbSessionStore } from '../../store/sessions/session-store.js';
import type { Part } from '../wiring.js';

// The session's log (functions/store/sessions/session-store.ts): a module of its own, so that the agents
// group, which reads sessions only to check a field's type change, imports it on first use.

export const sessionStore: Part<DynamoDbSessionStore> = (wiring) =>
  new DynamoDbSessionStore(wiring.table, undefined, sessionDefaultsFrom(wiring.env), eraseBudgetFrom(wiring.env));

/**
 * How long a `DELETE` erases at most before it hands the rest to the change hook: its
 * function's time left (less what its answer needs) unless `AGENTSTATE_DELETE_ERASE_MS` says
 * less (tests, so that a few hundred items are a session too large to erase at once).
 */
function eraseBudgetFrom(env: NodeJS.ProcessEnv): number | undefined {
  const raw = env.AGENTSTATE_DELETE_ERASE_MS?.trim();
  if (!raw) return undefined;
  const budget = Number(raw);
  if (!Number.isFinite(budget) || budget < 0) throw new Error(`AGENTSTATE_DELETE_ERASE_MS must be a number of milliseconds, not "${raw}"`);
  return budget;
}
