import { describe, expect, it } from 'vitest';
import { buildStateChangedEvent, eventId, type RecordedVersion, serializeWithin } from '../../functions/core/events.js';

const recorded = (overrides: Partial<RecordedVersion['version']> = {}): RecordedVersion => ({
  tenant: 't1',
  sessionId: 's1',
  version: {
    version: 7,
    node: 'a3',
    prevVersion: 5,
    cause: 'decide',
    author: 'planner',
    decisionId: 'd-1',
    createdAt: '2025-06-01T10:00:00.000Z',
    state: { turns: 3 },
    agent: { model: 'fast' },
    ...overrides,
  },
});

describe('buildStateChangedEvent', () => {
  it('builds the event of API.md section 9 from the recorded version and the state of prevVersion', () => {
    expect(buildStateChangedEvent(recorded(), { turns: 2 })).toEqual({
      id: 's1:7',
      type: 'state.changed',
      sessionId: 's1',
      node: 'a3',
      version: 7,
      prevVersion: 5,
      cause: 'decide',
      author: 'planner',
      decisionId: 'd-1',
      next: { turns: 3 },
      prev: { turns: 2 },
      agent: { model: 'fast' },
      occurredAt: '2025-06-01T10:00:00.000Z',
    });
  });

  it('has prev null for the first version of a node lineage (prevVersion 0), whatever it is given', () => {
    expect(buildStateChangedEvent(recorded({ prevVersion: 0 }), { stale: true }).prev).toBeNull();
  });

  it('keeps the tenant out of the event (receivers are per tenant) and its id stable', () => {
    const event = buildStateChangedEvent(recorded(), null);
    expect(event).not.toHaveProperty('tenant');
    expect(event.id).toBe(buildStateChangedEvent(recorded(), { other: 1 }).id);
    expect(eventId('s:1', 12)).toBe('s:1:12');
  });
});

describe('serializeWithin', () => {
  it('keeps an event that fits whole', () => {
    const event = buildStateChangedEvent(recorded(), { turns: 2 });
    expect(JSON.parse(serializeWithin(event, 10_000))).toEqual(event);
  });

  it('drops the states of an event that does not fit, and says so', () => {
    const event = buildStateChangedEvent(recorded({ state: { blob: 'x'.repeat(200_000) } }), { blob: 'y'.repeat(200_000) });

    const text = serializeWithin(event, 128_000);

    expect(Buffer.byteLength(text)).toBeLessThan(128_000);
    expect(JSON.parse(text)).toEqual({ ...event, next: null, prev: null, agent: null, truncated: true });
  });
});
