import { describe, expect, it, vi } from 'vitest';
import type { ChangeEvent, RecordedVersion, StateChangedEvent } from '../../functions/core/events/events.js';
import { ChangeFanout, type ChangeFanoutPorts, type ChangeInput } from '../../functions/core/fanout/change-fanout.js';
import type { WebhookReads } from '../../functions/core/fanout/fanout.js';
import type { Json } from '../../functions/core/json/json.js';
import { useMetricSink } from '../../functions/core/kernel/metrics.js';
import { WebhookDeliverer } from '../../functions/core/webhooks/delivery.js';
import type { DeliveryResult, WebhookRecord, WebhookSender } from '../../functions/core/webhooks/records.js';
import { memoryBreakers } from '../helpers/breakers.js';

/**
 * A recorded version of `sessionId` (tenant t1 unless said), keyed by a made-up sequence number;
 * made while a follow's mark was on the session's log unless `followed` is false.
 */
function change(sessionId: string, version: number, prevVersion: number, state: Json, tenant = 't1', followed = true): ChangeInput {
  const recorded: RecordedVersion = {
    ...(followed ? { followed: true } : {}),
    tenant,
    sessionId,
    version: {
      version,
      node: 'root',
      prevVersion,
      cause: 'patch',
      author: null,
      decisionId: null,
      createdAt: '2025-06-01T10:00:00.000Z',
      state,
      agent: null,
    },
  };
  return { key: `${tenant}/${sessionId}/${version}`, change: recorded };
}

const webhook = (id: string, sessionId: string | null = null, url = `https://${id}.example`): WebhookRecord => ({
  id,
  url,
  secret: null,
  sessionId,
  createdAt: '2025-06-01T00:00:00.000Z',
});

interface Harness {
  /** The webhook consumer's ports: with the webhooks and the sender. */
  ports: ChangeFanoutPorts & { webhooks: WebhookReads; send: WebhookSender };
  sent: Array<{ url: string; id: string; attempt: number }>;
  deadLetters: Array<{ webhookId: string; id: string; attempts: number; error: string }>;
  reads: Array<{ sessionId: string; version: number }>;
  broadcasts: Array<{ sessionId: string; ids: string[] }>;
}

/** Fakes of every port; `answer` decides each delivery. */
function harness(options: {
  webhooks?: Record<string, WebhookRecord[]>;
  answer?: (url: string, event: StateChangedEvent, attempt: number) => DeliveryResult | Promise<DeliveryResult>;
  states?: Record<string, Json>;
}): Harness {
  const h: Harness = { sent: [], deadLetters: [], reads: [], broadcasts: [], ports: undefined as never };
  const breakers = memoryBreakers();
  h.ports = {
    readState: async (scope, version) => {
      h.reads.push({ sessionId: scope.sessionId, version });
      const key = `${scope.sessionId}:${version}`;
      return options.states && key in options.states ? { state: options.states[key] as Json } : null;
    },
    webhooks: {
      allWebhooks: async (tenant) => (options.webhooks?.[tenant] ?? []).map((webhook) => breakers.withBreaker(tenant, webhook)),
      openBreaker: breakers.openBreaker,
      claimProbe: breakers.claimProbe,
      closeBreaker: breakers.closeBreaker,
      recordDeadLetter: async (_tenant, webhookId, event, failure) => {
        h.deadLetters.push({ webhookId, id: event.id, attempts: failure.attempts, error: failure.error });
      },
    },
    send: async (target, body, details) => {
      h.sent.push({ url: target.url, id: details.eventId, attempt: details.attempt });
      return options.answer
        ? options.answer(target.url, JSON.parse(body) as StateChangedEvent, details.attempt)
        : { ok: true, status: 204 };
    },
    broadcast: async (scope, events) => {
      h.broadcasts.push({ sessionId: scope.sessionId, ids: events.map((event) => event.id) });
    },
    sleep: async () => {},
    log: () => {},
  };
  return h;
}

describe('building events', () => {
  it('takes prev from the batch when it can, and reads it (once per event) when it cannot', async () => {
    // Prepare
    const h = harness({ states: { 's1:3': { n: 3 } } });
    let events: ChangeEvent[] = [];
    h.ports.broadcast = async (_scope, built) => {
      events = [...built];
    };

    // Act
    const result = await new ChangeFanout(h.ports).process([
      change('s1', 4, 3, { n: 4 }),
      change('s1', 5, 4, { n: 5 }),
      change('s1', 6, 3, { n: 6 }),
    ]);

    // Assess
    expect(result.failed).toEqual([]);
    expect(h.reads).toEqual([
      { sessionId: 's1', version: 3 },
      { sessionId: 's1', version: 3 },
    ]);
    expect(events.map((event) => [event.id, (event as StateChangedEvent).prev, (event as StateChangedEvent).next])).toEqual([
      ['s1:4', { n: 3 }, { n: 4 }],
      ['s1:5', { n: 4 }, { n: 5 }],
      ['s1:6', { n: 3 }, { n: 6 }],
    ]);
  });

  it('takes prev from an earlier batch of the same session and life without reading it', async () => {
    // Prepare: one instance, as the change hook keeps for its stream.
    const h = harness({ states: { 's1:5': { n: 'read' } } });
    let events: ChangeEvent[] = [];
    h.ports.broadcast = async (_scope, built) => {
      events = [...built];
    };
    const fanout = new ChangeFanout(h.ports);
    await fanout.process([change('s1', 4, 3, { n: 4 }), change('s2', 5, 4, { m: 5 })]);
    h.reads.length = 0;

    // Act: the next batch; s1's version 4 came in the batch before, s1's version 5 never did.
    await fanout.process([change('s1', 6, 4, { n: 6 })]);
    const sixth = events;
    await fanout.process([change('s1', 7, 5, { n: 7 })]);

    // Assess: only the version this instance never saw is read; another session's is not taken.
    expect(h.reads).toEqual([{ sessionId: 's1', version: 5 }]);
    expect((sixth[0] as StateChangedEvent).prev).toEqual({ n: 4 });
    expect((events[0] as StateChangedEvent).prev).toEqual({ n: 'read' });
  });

  it('reads nothing for prevVersion 0, and gives prev null when that version is gone', async () => {
    const h = harness({});
    let events: ChangeEvent[] = [];
    h.ports.broadcast = async (_scope, built) => {
      events = [...built];
    };

    await new ChangeFanout(h.ports).process([change('s1', 1, 0, { a: 1 }), change('s1', 9, 8, { a: 9 })]);

    expect(h.reads).toEqual([{ sessionId: 's1', version: 8 }]);
    expect(events.map((event) => (event as StateChangedEvent).prev)).toEqual([null, null]);
  });

  it('reports the first record of a session whose event cannot be built, and delivers nothing after it', async () => {
    // Prepare
    const h = harness({ webhooks: { t1: [webhook('w')] } });
    h.ports.readState = async (scope) => {
      if (scope.sessionId === 'broken') throw new Error('DynamoDB unavailable');
      return null;
    };

    // Act
    const result = await new ChangeFanout(h.ports).process([
      change('broken', 1, 0, 1),
      change('fine', 3, 2, 3),
      // Its prev (version 7, on another branch) is not in the batch: it must be read.
      change('broken', 8, 7, 8),
      change('broken', 9, 8, 9),
    ]);

    // Assess: version 8 of "broken" failed, so 8 and 9 wait for the stream's retry.
    expect(result.failed).toEqual(['t1/broken/8']);
    expect(h.sent.map((delivery) => delivery.id)).toEqual(['broken:1', 'fine:3']);
  });
});

describe('webhooks', () => {
  it('delivers to the tenant’s webhooks of that session (or of every session) only', async () => {
    const h = harness({ webhooks: { t1: [webhook('all'), webhook('s1', 's1'), webhook('s2', 's2')], t2: [webhook('theirs')] } });

    await new ChangeFanout(h.ports).process([change('s1', 1, 0, 'x')]);

    expect(h.sent.map((delivery) => delivery.url).sort()).toEqual(['https://all.example', 'https://s1.example']);
  });

  it('delivers a session’s events to each webhook in version order', async () => {
    // Prepare: the first delivery is slow, so a parallel second one would overtake it.
    const order: string[] = [];
    const h = harness({
      webhooks: { t1: [webhook('w')] },
      answer: async (_url, event) => {
        if (event.version === 1) await new Promise((resolve) => setTimeout(resolve, 30));
        order.push(event.id);
        return { ok: true, status: 200 };
      },
    });

    // Act
    await new ChangeFanout(h.ports).process([change('s1', 1, 0, 1), change('s1', 2, 1, 2), change('s1', 3, 2, 3)]);

    // Assess
    expect(order).toEqual(['s1:1', 's1:2', 's1:3']);
  });

  it('retries a failing endpoint 3 times, dead-letters the event, and sends the rest of the batch straight to dead letters', async () => {
    // Prepare
    const h = harness({
      webhooks: { t1: [webhook('bad'), webhook('good')] },
      answer: (url) => (url.includes('bad') ? { ok: false, error: 'HTTP 503' } : { ok: true, status: 200 }),
    });

    let deadLettersCounted = 0;
    useMetricSink((name, value) => {
      if (name === 'WebhookDeadLetters') deadLettersCounted += value;
    });

    // Act
    const result = await new ChangeFanout(h.ports)
      .process([change('s1', 1, 0, 1), change('s1', 2, 1, 2), change('s2', 1, 0, 1)])
      .finally(() => useMetricSink(() => {}));

    // Assess: s1 and s2 are tried in parallel; s1's later event is not tried after s1:1 failed.
    expect(result.failed).toEqual([]);
    expect(deadLettersCounted).toBe(3);
    const attempts = (id: string) =>
      h.sent.filter((delivery) => delivery.url.includes('bad') && delivery.id === id).map((delivery) => delivery.attempt);
    expect([attempts('s1:1'), attempts('s1:2'), attempts('s2:1')]).toEqual([[1, 2, 3], [], [1, 2, 3]]);
    expect(h.deadLetters.sort((a, b) => a.id.localeCompare(b.id))).toEqual([
      { webhookId: 'bad', id: 's1:1', attempts: 3, error: 'HTTP 503' },
      { webhookId: 'bad', id: 's1:2', attempts: 0, error: 'not attempted: an earlier delivery to this webhook failed in the same batch' },
      { webhookId: 'bad', id: 's2:1', attempts: 3, error: 'HTTP 503' },
    ]);
    expect(
      h.sent
        .filter((delivery) => delivery.url.includes('good'))
        .map((delivery) => delivery.id)
        .sort(),
    ).toEqual(['s1:1', 's1:2', 's2:1']);
  });

  it('never lets a failing endpoint hold up another session or webhook in the batch', async () => {
    // Prepare: the failing endpoint's answer is held until the healthy deliveries are done.
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const healthy: string[] = [];
    const h = harness({
      webhooks: { t1: [webhook('slow', 's1')], t2: [webhook('fast', 's2')] },
      answer: async (url, event) => {
        if (url.includes('slow')) {
          await held;
          return { ok: false, error: 'no answer within 5000 ms' };
        }
        healthy.push(event.id);
        if (healthy.length === 2) release();
        return { ok: true, status: 200 };
      },
    });

    // Act: would never finish if the healthy deliveries waited for the failing one.
    const result = await new ChangeFanout(h.ports).process([
      change('s1', 1, 0, 1),
      change('s2', 1, 0, 1, 't2'),
      change('s2', 2, 1, 2, 't2'),
    ]);

    // Assess
    expect(healthy).toEqual(['s2:1', 's2:2']);
    expect(result.failed).toEqual([]);
    expect(h.deadLetters.map((letter) => letter.id)).toEqual(['s1:1']);
  });

  it('stops trying a webhook whose delivery failed until its breaker lets a probe through', async () => {
    // Prepare
    let healthy = false;
    const h = harness({
      webhooks: { t1: [webhook('w')] },
      answer: () => (healthy ? { ok: true, status: 200 } : { ok: false, error: 'HTTP 500' }),
    });
    const fanout = new ChangeFanout(h.ports);

    // Act: the endpoint recovers within the breaker's 30 s.
    await fanout.process([change('s1', 1, 0, 1)]);
    await fanout.process([change('s1', 2, 1, 2)]);
    healthy = true;
    await fanout.process([change('s1', 3, 2, 3)]);

    // Assess: one failed delivery (3 attempts), then dead letters without an attempt, which a
    // replay delivers; the breaker's clock is what lets deliveries try again.
    expect(h.sent.map((delivery) => `${delivery.id}#${delivery.attempt}`)).toEqual(['s1:1#1', 's1:1#2', 's1:1#3']);
    expect(h.deadLetters.map((letter) => `${letter.id}:${letter.attempts}`)).toEqual(['s1:1:3', 's1:2:0', 's1:3:0']);
  });

  it('dead-letters without trying once the invocation is out of time, naming the function that ran out', async () => {
    // Prepare: the fan-out as the change hook and as the webhook hook deliver in the batch, and
    // the deliverer as the delivery hook runs it (functions/streams/).
    const asChangeHook = harness({ webhooks: { t1: [webhook('w')] } });
    const asWebhookHook = harness({ webhooks: { t1: [webhook('w')] } });
    const asDeliveryHook = harness({});
    const deliverer = new WebhookDeliverer({ ...asDeliveryHook.ports, deliveredBy: 'the delivery hook' });

    // Act: each past its deadline.
    await new ChangeFanout(asChangeHook.ports).process([change('s1', 1, 0, 1)], { deadline: Date.now() - 1 });
    await new ChangeFanout({ ...asWebhookHook.ports, deliveredBy: 'the webhook hook' }).process([change('s1', 1, 0, 1)], {
      deadline: Date.now() - 1,
    });
    await deliverer.deliver(
      [{ tenant: 't1', webhook: webhook('w'), lane: 'w s1', event: { id: 's1:1', sessionId: 's1', version: 1, body: '{}' } }],
      { deadline: Date.now() - 1 },
    );

    // Assess: nothing sent; each dead letter names its own function.
    expect([asChangeHook, asWebhookHook, asDeliveryHook].flatMap((h) => h.sent)).toEqual([]);
    const error = (h: Harness) => h.deadLetters.map((letter) => letter.error);
    expect(error(asChangeHook)).toEqual(['not attempted: the change hook ran out of time']);
    expect(error(asWebhookHook)).toEqual(['not attempted: the webhook hook ran out of time']);
    expect(error(asDeliveryHook)).toEqual(['not attempted: the delivery hook ran out of time']);
  });

  it('keeps breakers and deadlines on its own clock', async () => {
    // Prepare: a clock a year ahead of the system's, moved by hand.
    let clock = Date.now() + 365 * 24 * 60 * 60 * 1000;
    let healthy = false;
    const h = harness({
      webhooks: { t1: [webhook('w')] },
      answer: () => (healthy ? { ok: true, status: 200 } : { ok: false, error: 'HTTP 500' }),
    });
    const fanout = new ChangeFanout({ ...h.ports, now: () => new Date(clock) });

    // Act: a failure opens the breaker for 30 s on the clock; then one probe fails and opens it
    // for 60 s. A deadline past on the clock (though not on the system's) stops deliveries; one
    // ahead does not, and the probe that gets through closes the breaker.
    await fanout.process([change('s1', 1, 0, 1)]);
    await fanout.process([change('s1', 2, 1, 2)]);
    clock += 30_001;
    await fanout.process([change('s1', 3, 2, 3)]);
    clock += 30_001;
    await fanout.process([change('s1', 4, 3, 4)]);
    clock += 30_001;
    await fanout.process([change('s1', 5, 4, 5)], { deadline: clock - 1 });
    healthy = true;
    await fanout.process([change('s1', 6, 5, 6)], { deadline: clock + 1 });
    await fanout.process([change('s1', 7, 6, 7)]);

    // Assess
    expect(h.sent.map((delivery) => `${delivery.id}#${delivery.attempt}`)).toEqual([
      's1:1#1',
      's1:1#2',
      's1:1#3',
      's1:3#1',
      's1:6#1',
      's1:7#1',
    ]);
    expect(h.deadLetters.map((letter) => `${letter.id}:${letter.attempts}`)).toEqual(['s1:1:3', 's1:2:0', 's1:3:1', 's1:4:0', 's1:5:0']);
    expect(h.deadLetters[1]?.error).toBe(
      `not attempted: the endpoint failed a delivery, so its breaker is open until ${new Date(clock - 90_003 + 30_000).toISOString()}`,
    );
    expect(h.deadLetters[3]?.error).toMatch(/^not attempted: the endpoint failed 2 deliveries in a row, so its breaker is open until /);
  });

  it('stops retrying a delivery when the backoff would run past the deadline on its clock', async () => {
    // Prepare
    const clock = Date.now() + 365 * 24 * 60 * 60 * 1000;
    const h = harness({ webhooks: { t1: [webhook('w')] }, answer: () => ({ ok: false, error: 'HTTP 500' }) });

    // Act: the first backoff is at least 125 ms; the deadline is 100 ms away on the clock.
    await new ChangeFanout({ ...h.ports, now: () => new Date(clock) }).process([change('s1', 1, 0, 1)], { deadline: clock + 100 });

    // Assess
    expect(h.sent.map((delivery) => delivery.attempt)).toEqual([1]);
    expect(h.deadLetters).toEqual([{ webhookId: 'w', id: 's1:1', attempts: 1, error: 'HTTP 500' }]);
  });

  it('reports the record whose dead letter could not be written, so the stream retries it', async () => {
    const h = harness({ webhooks: { t1: [webhook('w')] }, answer: () => ({ ok: false, error: 'HTTP 500' }) });
    h.ports.webhooks.recordDeadLetter = async () => {
      throw new Error('throttled');
    };

    const result = await new ChangeFanout(h.ports).process([change('s1', 1, 0, 1), change('s1', 2, 1, 2)]);

    expect(result.failed).toEqual(['t1/s1/1']);
  });

  it('reports a session’s first record when its tenant’s webhooks cannot be read', async () => {
    const h = harness({});
    h.ports.webhooks.allWebhooks = async (tenant) => {
      if (tenant === 't2') throw new Error('unavailable');
      return [];
    };

    const result = await new ChangeFanout(h.ports).process([change('a', 1, 0, 1), change('b', 5, 4, 5, 't2'), change('b', 6, 5, 6, 't2')]);

    expect(result.failed).toEqual(['t2/b/5']);
  });
});

describe('live clients and the event bus', () => {
  it('as the live consumer, broadcasts without waiting on, or even reading, webhooks', async () => {
    // Prepare: a webhook that never answers.
    const h = harness({ webhooks: { t1: [webhook('w1')] }, answer: () => new Promise<DeliveryResult>(() => {}) });
    const allWebhooks = vi.spyOn(h.ports.webhooks, 'allWebhooks');

    // Act
    const result = await new ChangeFanout({ ...h.ports, deliversWebhooks: false }).process([change('s1', 1, 0, 1)]);

    // Assess
    expect(result.failed).toEqual([]);
    expect(h.broadcasts).toEqual([{ sessionId: 's1', ids: ['s1:1'] }]);
    expect(allWebhooks).not.toHaveBeenCalled();
    expect(h.sent).toEqual([]);
  });

  it('broadcasts each session’s events, in order, once per batch', async () => {
    const h = harness({});

    await new ChangeFanout(h.ports).process([change('s1', 1, 0, 1), change('s2', 1, 0, 1), change('s1', 2, 1, 2)]);

    expect(h.broadcasts).toEqual([
      { sessionId: 's1', ids: ['s1:1', 's1:2'] },
      { sessionId: 's2', ids: ['s2:1'] },
    ]);
  });

  it('looks for no followers of a session whose versions carry no follow’s mark, and for all of a batch where one does', async () => {
    // Prepare: s1 nobody follows; s2 was followed between its two versions.
    const h = harness({});
    const broadcast = vi.spyOn(h.ports, 'broadcast');

    // Act
    await new ChangeFanout(h.ports).process([
      change('s1', 1, 0, 1, 't1', false),
      change('s2', 1, 0, 1, 't1', false),
      change('s1', 2, 1, 2, 't1', false),
      change('s2', 2, 1, 2, 't1', true),
    ]);

    // Assess: s1 is not looked up at all; s2's followers get the batch's events of it, in order.
    expect(broadcast).toHaveBeenCalledTimes(1);
    expect(h.broadcasts).toEqual([{ sessionId: 's2', ids: ['s2:1', 's2:2'] }]);
  });

  it('does not fail the batch when live clients cannot be reached', async () => {
    const h = harness({});
    h.ports.broadcast = vi.fn(async () => {
      throw new Error('gone away');
    });

    expect((await new ChangeFanout(h.ports).process([change('s1', 1, 0, 1)])).failed).toEqual([]);
  });

  it('publishes every event with its tenant, and reports the records of events that could not be put', async () => {
    // Prepare
    const published: Array<{ tenant: string; id: string }> = [];
    const h = harness({});
    h.ports.publish = async (entries) => {
      published.push(...entries.map(({ tenant, event }) => ({ tenant, id: event.id })));
      return entries.flatMap((entry, index) => (entry.event.id === 's2:2' ? [index] : []));
    };

    // Act
    const result = await new ChangeFanout(h.ports).process([
      change('s1', 1, 0, 1),
      change('s2', 1, 0, 1, 't2'),
      change('s2', 2, 1, 2, 't2'),
    ]);

    // Assess
    expect(published).toEqual([
      { tenant: 't1', id: 's1:1' },
      { tenant: 't2', id: 's2:1' },
      { tenant: 't2', id: 's2:2' },
    ]);
    expect(result.failed).toEqual(['t2/s2/2']);
  });
});

describe('document events', () => {
  /** A recorded document version, made by a commit of `sessionId`. */
  function documentChange(
    kind: 'run' | 'profile' | 'shared',
    id: string,
    sessionId: string,
    version: number,
    state: Json,
    prevState: Json = null,
  ): ChangeInput {
    return {
      key: `${kind}/${id}/${version}`,
      change: {
        tenant: 't1',
        document: { kind, id, sessionId, version, state, prevState, author: 'planner', createdAt: '2025-06-01T10:00:00.000Z' },
      },
    };
  }

  it('builds them from the record alone, and sends each to the webhooks and followers of the session that wrote it', async () => {
    // Prepare
    const h = harness({ webhooks: { t1: [webhook('all'), webhook('only-s1', 's1'), webhook('only-s2', 's2')] } });
    const events: ChangeEvent[] = [];
    h.ports.send = async (target, body) => {
      const event = JSON.parse(body) as ChangeEvent;
      h.sent.push({ url: target.url, id: event.id, attempt: 1 });
      events.push(event);
      return { ok: true, status: 204 };
    };

    // Act
    const result = await new ChangeFanout(h.ports).process([
      documentChange('profile', 'u1', 's1', 1, { lang: 'en' }),
      change('s1', 3, 2, { n: 3 }),
      documentChange('profile', 'u1', 's2', 2, { lang: 'fr' }, { lang: 'en' }),
      documentChange('run', 'r1', 's1', 4, { step: 4 }, { step: 3 }),
    ]);

    // Assess
    expect(result.failed).toEqual([]);
    expect(h.reads).toEqual([{ sessionId: 's1', version: 2 }]);
    const to = (host: string) => h.sent.filter((sent) => sent.url === `https://${host}.example`).map((sent) => sent.id);
    expect(to('all').sort()).toEqual(['profile/u1/1', 'profile/u1/2', 'run/s1/r1/4', 's1:3']);
    expect(to('only-s1').sort()).toEqual(['profile/u1/1', 'run/s1/r1/4', 's1:3']);
    expect(to('only-s2')).toEqual(['profile/u1/2']);
    // The profile stream keeps its order at the webhook that gets both of its events.
    expect(to('all').filter((id) => id.startsWith('profile/'))).toEqual(['profile/u1/1', 'profile/u1/2']);
    expect(events.find((event) => event.id === 'profile/u1/2')).toEqual({
      id: 'profile/u1/2',
      type: 'profile.changed',
      scope: 'profile',
      sessionId: 's2',
      userId: 'u1',
      version: 2,
      prevVersion: 1,
      cause: 'commit',
      author: 'planner',
      next: { lang: 'fr' },
      prev: { lang: 'en' },
      patch: { lang: 'fr' },
      occurredAt: '2025-06-01T10:00:00.000Z',
    });
    expect(h.broadcasts.map((broadcast) => `${broadcast.sessionId}: ${broadcast.ids.join(' ')}`).sort()).toEqual([
      's1: profile/u1/1',
      's1: run/s1/r1/4',
      's1: s1:3',
      's2: profile/u1/2',
    ]);
  });

  it('dead-letters an undelivered document event under its document, and retries nothing', async () => {
    // Prepare
    const h = harness({ webhooks: { t1: [webhook('failing')] }, answer: () => ({ ok: false, error: 'HTTP 500' }) });
    const recorded: unknown[] = [];
    h.ports.webhooks.recordDeadLetter = async (_tenant, _webhookId, event) => {
      recorded.push({ id: event.id, sessionId: event.sessionId, version: event.version, document: event.document });
    };

    // Act
    const result = await new ChangeFanout(h.ports).process([
      documentChange('shared', 'shared', 's9', 3, { x: 1 }, { x: 0 }),
      documentChange('run', 'r2', 's9', 1, {}),
    ]);

    // Assess
    expect(result.failed).toEqual([]);
    expect(recorded.sort((a: any, b: any) => a.id.localeCompare(b.id))).toEqual([
      { id: 'run/s9/r2/1', sessionId: 's9', version: 1, document: 'run#r2' },
      { id: 'shared/3', sessionId: 's9', version: 3, document: 'shared' },
    ]);
  });

  it('sends document events whole to a webhook registered with an agent', async () => {
    const h = harness({ webhooks: { t1: [{ ...webhook('scoped'), agentId: 'writer' }] } });
    const bodies: ChangeEvent[] = [];
    h.ports.send = async (_target, body) => {
      bodies.push(JSON.parse(body) as ChangeEvent);
      return { ok: true, status: 204 };
    };
    // No schema reader: a thread event of a typed session could not be cut, a document needs none.
    delete h.ports.schemaFor;

    const result = await new ChangeFanout(h.ports).process([documentChange('profile', 'u1', 's1', 1, { private: 'kept' })]);

    expect(result.failed).toEqual([]);
    expect(bodies.map((body) => (body as StateChangedEvent).next)).toEqual([{ private: 'kept' }]);
  });
});

describe('session activity', () => {
  const at = (input: ChangeInput, createdAt: string, activityDue = true): ChangeInput => {
    const recorded = input.change as RecordedVersion;
    return { ...input, change: { ...recorded, version: { ...recorded.version, createdAt }, activityDue } };
  };

  it('moves each written session once per batch, to its newest version whose move was due', async () => {
    // Prepare
    const moved: Array<[string, string]> = [];
    const h = harness({});
    h.ports.moveActivity = async (scope, when) => {
      moved.push([scope.sessionId, when]);
    };

    // Act
    const result = await new ChangeFanout(h.ports).process([
      at(change('s1', 1, 0, { a: 1 }), '2025-06-01T10:00:01.000Z'),
      at(change('s2', 1, 0, { b: 1 }), '2025-06-01T10:00:02.000Z', false),
      at(change('s1', 2, 1, { a: 2 }), '2025-06-01T10:00:03.000Z'),
      at(change('s1', 3, 2, { a: 3 }), '2025-06-01T10:00:04.000Z', false),
    ]);

    // Assess: s1 to its newest version whose move was due; s2's was not (it moved within the interval).
    expect(result.failed).toEqual([]);
    expect(moved).toEqual([['s1', '2025-06-01T10:00:03.000Z']]);
  });

  it('moves the session of a document version whose blind commit found its move due, once an interval, once per batch', async () => {
    // Prepare: profile versions written from s1 (two due) and s2 (not due), one shared version from s3 (due).
    const moved: Array<[string, string, unknown]> = [];
    const h = harness({});
    h.ports.moveActivity = async (scope, when, _lifetime, options) => {
      moved.push([scope.sessionId, when, options]);
    };
    const document = (
      kind: 'profile' | 'shared',
      sessionId: string,
      version: number,
      createdAt: string,
      activityDue: boolean,
    ): ChangeInput => ({
      key: `${kind}/${sessionId}/${version}`,
      change: {
        tenant: 't1',
        document: {
          kind,
          id: kind === 'shared' ? 'shared' : 'u1',
          sessionId,
          version,
          state: { v: version },
          prevState: null,
          author: null,
          createdAt,
        },
        ...(activityDue ? { activityDue } : {}),
      },
    });

    // Act
    const result = await new ChangeFanout(h.ports).process([
      document('profile', 's1', 1, '2025-06-01T10:00:01.000Z', true),
      document('profile', 's2', 2, '2025-06-01T10:00:02.000Z', false),
      document('profile', 's1', 3, '2025-06-01T10:00:03.000Z', true),
      document('shared', 's3', 7, '2025-06-01T10:00:04.000Z', true),
    ]);

    // Assess: the move holds itself to once an interval, as no tip records it.
    expect(result.failed).toEqual([]);
    expect(moved.sort()).toEqual([
      ['s1', '2025-06-01T10:00:03.000Z', { onceAnInterval: true }],
      ['s3', '2025-06-01T10:00:04.000Z', { onceAnInterval: true }],
    ]);
  });

  it('delivers the events even when activity cannot be moved', async () => {
    const h = harness({ webhooks: { t1: [webhook('ok')] } });
    h.ports.moveActivity = async () => {
      throw new Error('throttled');
    };

    const result = await new ChangeFanout(h.ports).process([at(change('s1', 1, 0, { a: 1 }), '2025-06-01T10:00:01.000Z')]);

    expect(result.failed).toEqual([]);
    expect(h.sent.map((sent) => sent.id)).toEqual(['s1:1']);
  });
});
