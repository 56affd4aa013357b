import { type AgentStateApi, AgentStateError, type Json } from '@agentstate/client';

/** The member of the root node's state that lists a thread's other namespaces. */
const REGISTRY_KEY = 'checkpoint_namespaces';

/**
 * A thread's subgraph namespaces, each a session of its own, listed in the state of the thread
 * session's `root` node: `{"checkpoint_namespaces": {"<namespace>": "<session id>"}}`. A merge
 * patch adds one (concurrent ones all land), a read of that one node lists them, strongly
 * consistent, so `list` and `deleteThread` find every namespace of a thread right after its `put`.
 * Checkpoint nodes never see this state: a checkpoint with no parent replaces the state it
 * starts with, and every other one starts from its parent's.
 */
export class NamespaceRegistry {
  constructor(private readonly client: AgentStateApi) {}

  /** Lists `checkpointNs` (a session of its own) in the registry of the thread session `root`. */
  async register(root: string, checkpointNs: string, sessionId: string): Promise<void> {
    await this.client.state.patch(root, { [REGISTRY_KEY]: { [checkpointNs]: sessionId } }, { node: 'root' });
  }

  /** The sessions of a thread's other namespaces (none when its session does not exist). */
  async sessionsOf(rootSession: string): Promise<string[]> {
    return [...(await this.entriesOf(rootSession)).values()];
  }

  /** A thread's other namespaces, each with its session (none when its session does not exist). */
  async entriesOf(rootSession: string): Promise<Map<string, string>> {
    let state: Json;
    try {
      state = (await this.client.state.get(rootSession, { node: 'root' })).state;
    } catch (error) {
      if (AgentStateError.is(error, 'node_not_found')) return new Map();
      throw error;
    }
    const registry = state !== null && typeof state === 'object' && !Array.isArray(state) ? state[REGISTRY_KEY] : undefined;
    if (registry === null || typeof registry !== 'object' || Array.isArray(registry)) return new Map();
    return new Map(Object.entries(registry).filter((entry): entry is [string, string] => typeof entry[1] === 'string'));
  }

  /** Points a thread session's registry at other sessions (a copy's own), in one merge patch. */
  async point(rootSession: string, sessions: ReadonlyMap<string, string>): Promise<void> {
    if (sessions.size === 0) return;
    await this.client.state.patch(rootSession, { [REGISTRY_KEY]: Object.fromEntries(sessions) }, { node: 'root' });
  }
}

/** `work` over `items`, a few at a time, answers in the items' order. */
export async function inBatches<T, R>(items: readonly T[], work: (item: T) => Promise<R>, size = 8): Promise<R[]> {
  const results: R[] = [];
  for (let start = 0; start < items.length; start += size) {
    results.push(...(await Promise.all(items.slice(start, start + size).map(work))));
  }
  return results;
}
