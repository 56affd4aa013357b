import { describe, expect, it } from 'vitest';
import {
  buildStateChangedEvent,
  EVENT_STATES_LIMIT_BYTES,
  eventId,
  type RecordedVersion,
  serializeWithin,
} from '../../functions/core/events/events.js';

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

describe('serializeWithin: every event fits every channel (API.md section 9)', () => {
  const big = (size: number, letter = 'x') => letter.repeat(size);

  it('sends an event whose states fit whole, with the merge patch from prev to next', () => {
    const event = buildStateChangedEvent(recorded({ state: { turns: 3, mood: 'ok' } }), { turns: 2, stale: true });

    expect(JSON.parse(serializeWithin(event, 10_000))).toEqual({ ...event, patch: { turns: 3, mood: 'ok', stale: null } });
  });

  it('leaves next and prev out, keeping the patch, when together they pass 64 KiB', () => {
    // Prepare: 40 KiB each, one member changed.
    const prev = { doc: big(40 * 1024), turn: 1 };
    const event = buildStateChangedEvent(recorded({ state: { doc: big(40 * 1024), turn: 2 } }), prev);

    // Act
    const sent = JSON.parse(serializeWithin(event, 256 * 1024));

    // Assess
    expect(sent).not.toHaveProperty('next');
    expect(sent).not.toHaveProperty('prev');
    expect(sent).toMatchObject({ id: 's1:7', truncated: true, patch: { turn: 2 }, agent: { model: 'fast' } });
  });

  it('keeps next and prev at exactly 64 KiB together', () => {
    const half = EVENT_STATES_LIMIT_BYTES / 2 - 2; // a string's JSON is its length plus two quotes
    const event = buildStateChangedEvent(recorded({ state: big(half, 'a') }), big(half, 'b'));

    const sent = JSON.parse(serializeWithin(event, 256 * 1024));

    expect(sent.truncated).toBeUndefined();
    expect(sent.next).toBe(big(half, 'a'));
  });

  it('leaves the patch out when it alone passes 64 KiB, and still says truncated', () => {
    const event = buildStateChangedEvent(recorded({ state: { blob: big(70 * 1024) } }), null);

    const sent = JSON.parse(serializeWithin(event, 256 * 1024));

    expect(sent).toMatchObject({ truncated: true });
    expect(sent).not.toHaveProperty('patch');
    expect(sent).not.toHaveProperty('next');
  });

  it('leaves the patch out when no merge patch can set a member to null', () => {
    const event = buildStateChangedEvent(recorded({ state: { a: null } }), { a: 1 });

    const sent = JSON.parse(serializeWithin(event, 10_000));

    expect(sent).not.toHaveProperty('patch');
    expect(sent).toMatchObject({ next: { a: null }, prev: { a: 1 } });
  });

  it('sends a patch-mode receiver the event without next and prev', () => {
    const event = buildStateChangedEvent(recorded(), { turns: 2 });

    const sent = JSON.parse(serializeWithin(event, 10_000, 'patch'));

    expect(sent).not.toHaveProperty('next');
    expect(sent).not.toHaveProperty('prev');
    expect(sent).toMatchObject({ patch: { turns: 3 } });
    expect(sent.truncated).toBeUndefined();
  });

  it('fits a channel smaller than the event: without states, then without the agent config, then without the patch', () => {
    // Prepare: a 60 KiB config and a 60 KiB patch; the WebSocket takes 128 KB.
    const event = buildStateChangedEvent(recorded({ state: { note: big(60 * 1024) }, agent: { prompt: big(60 * 1024) } }), {
      note: big(1024),
    });

    // Act
    const sizes = [128_000, 100_000, 1_000].map((limit) => serializeWithin(event, limit));

    // Assess
    expect(JSON.parse(sizes[0] as string)).toMatchObject({
      truncated: true,
      patch: { note: big(60 * 1024) },
      agent: { prompt: big(60 * 1024) },
    });
    expect(JSON.parse(sizes[1] as string)).not.toHaveProperty('agent');
    expect(JSON.parse(sizes[1] as string)).toHaveProperty('patch');
    expect(JSON.parse(sizes[2] as string)).toEqual({
      id: 's1:7',
      type: 'state.changed',
      sessionId: 's1',
      node: 'a3',
      version: 7,
      prevVersion: 5,
      cause: 'decide',
      author: 'planner',
      decisionId: 'd-1',
      occurredAt: '2025-06-01T10:00:00.000Z',
      truncated: true,
    });
  });
});
