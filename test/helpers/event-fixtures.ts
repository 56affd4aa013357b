import type { StateChangedEvent } from '../../functions/core/events/events.js';

/**
 * A `state.changed` event of session `s1` at the root, version `version` after `version - 1`,
 * written by a patch with no author: what the unit and fault tests feed the outbound ports.
 * `fields` sets what a test is about (the states, the patch, the agent's config).
 */
export function stateChangedEvent(version: number, fields: Partial<StateChangedEvent> = {}): StateChangedEvent {
  return {
    id: `s1:${version}`,
    type: 'state.changed',
    sessionId: 's1',
    node: 'root',
    version,
    prevVersion: version - 1,
    cause: 'patch',
    author: null,
    decisionId: null,
    next: { n: version },
    prev: null,
    agent: null,
    occurredAt: '2025-06-01T10:00:00.000Z',
    ...fields,
  };
}
