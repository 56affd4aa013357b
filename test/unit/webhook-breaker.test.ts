import { describe, expect, it } from 'vitest';
import { breakerAfterFailure, breakerGate, breakerOpenError } from '../../functions/core/webhooks/breaker.js';

/** The breaker's rule (core/webhooks/breaker.ts) on its own: openings, their growth, the probe. */
describe('a webhook breaker', () => {
  const now = Date.parse('2026-06-01T00:00:00.000Z');

  it('opens for 30 s after a failed delivery, twice as long after each failed probe, at most 15 minutes', () => {
    let breaker = breakerAfterFailure(undefined, now);
    const openings = [breaker.openUntil - now];
    for (let probe = 0; probe < 8; probe++) {
      breaker = breakerAfterFailure(breaker, now);
      openings.push(breaker.openUntil - now);
    }
    expect(openings).toEqual([30_000, 60_000, 120_000, 240_000, 480_000, 900_000, 900_000, 900_000, 900_000]);
    expect(breaker.failures).toBe(9);
  });

  it('is closed without a breaker, open until its time, then half-open unless a probe holds it', () => {
    const breaker = { failures: 2, openUntil: now + 1_000 };
    expect(breakerGate(undefined, now)).toEqual({ kind: 'closed' });
    expect(breakerGate(breaker, now)).toEqual({ kind: 'open', until: now + 1_000, failures: 2 });
    expect(breakerGate(breaker, now + 1_000)).toEqual({ kind: 'half-open', failures: 2 });
    expect(breakerGate({ ...breaker, probeUntil: now + 5_000 }, now + 2_000)).toEqual({ kind: 'open', until: now + 5_000, failures: 2 });
    // A probe whose instance died holds it only until its hold runs out.
    expect(breakerGate({ ...breaker, probeUntil: now + 5_000 }, now + 5_000)).toEqual({ kind: 'half-open', failures: 2 });
  });

  it('says in the dead letter why a delivery was not tried, and until when', () => {
    expect(breakerOpenError({ kind: 'open', until: now, failures: 1 })).toBe(
      'not attempted: the endpoint failed a delivery, so its breaker is open until 2026-06-01T00:00:00.000Z',
    );
    expect(breakerOpenError({ kind: 'open', until: now, failures: 3 })).toBe(
      'not attempted: the endpoint failed 3 deliveries in a row, so its breaker is open until 2026-06-01T00:00:00.000Z',
    );
  });
});
