import { describe, expect, it } from 'vitest';
import { sessionDefaultsFrom } from '../../functions/core/model/lifetime.js';
import { countWindowStart, inWindow, PRUNE_INTERVAL_MS, pruneIntervalFrom } from '../../functions/core/model/retention.js';

/** Retention's rules (API.md section 12) and the deployment's settings of it. */
describe('retention windows', () => {
  const now = Date.parse('2026-06-01T10:00:00Z');
  const day = 24 * 60 * 60 * 1000;

  it.each([
    [{ keepVersions: 3 }, 8, now - 30 * day, true],
    [{ keepVersions: 3 }, 7, now, false],
    [{ keepDays: 2 }, 1, now - day, true],
    [{ keepDays: 2 }, 9, now - 3 * day, false],
    [{ keepVersions: 3, keepDays: 2 }, 1, now - day, true],
    [{ keepVersions: 3, keepDays: 2 }, 9, now - 3 * day, true],
    [{}, 10, now, false],
  ])('%j keeps version %i written at %i: %s (the newest is 10)', (retention, version, createdAt, kept) => {
    expect(inWindow(retention, version, createdAt, 10, now)).toBe(kept);
  });

  it('starts the count window at the newest keepVersions, and past the newest without one', () => {
    expect(countWindowStart({ keepVersions: 3 }, 10)).toBe(8);
    expect(countWindowStart({ keepVersions: 30 }, 10)).toBe(1);
    expect(countWindowStart({ keepDays: 1 }, 10)).toBe(11);
  });
});

describe('the deployment’s settings', () => {
  it('reads AGENTSTATE_RETENTION as the default retention of new sessions, over nothing else', () => {
    expect(sessionDefaultsFrom({ AGENTSTATE_RETENTION: 'keepVersions=100' })).toEqual({
      ttlSeconds: null,
      expiresAtMs: null,
      retention: { keepVersions: 100 },
    });
    expect(sessionDefaultsFrom({ AGENTSTATE_RETENTION: 'keepVersions=5, keepDays=30', AGENTSTATE_SESSION_TTL_DAYS: '1' })).toEqual({
      ttlSeconds: 86_400,
      expiresAtMs: null,
      retention: { keepVersions: 5, keepDays: 30 },
    });
    expect(sessionDefaultsFrom({})).toBeUndefined();
  });

  it.each(['keepVersions=0', 'keepVersions', 'keep=3', 'keepDays=1.5', 'keepVersions=x'])(
    'refuses AGENTSTATE_RETENTION=%s at start',
    (value) => {
      expect(() => sessionDefaultsFrom({ AGENTSTATE_RETENTION: value })).toThrow(/AGENTSTATE_RETENTION/);
    },
  );

  it('prunes a session at most once a minute unless AGENTSTATE_PRUNE_INTERVAL_SECONDS says otherwise', () => {
    expect(pruneIntervalFrom({})).toBe(PRUNE_INTERVAL_MS);
    expect(pruneIntervalFrom({ AGENTSTATE_PRUNE_INTERVAL_SECONDS: '1' })).toBe(1000);
    expect(() => pruneIntervalFrom({ AGENTSTATE_PRUNE_INTERVAL_SECONDS: 'soon' })).toThrow(/AGENTSTATE_PRUNE_INTERVAL_SECONDS/);
  });
});
