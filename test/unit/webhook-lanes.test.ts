import { describe, expect, it } from 'vitest';
import { WebhookDeliverer } from '../../functions/core/webhooks/delivery.js';
import { WebhookLanes } from '../../functions/core/webhooks/lanes.js';
import type { DeadLetterEvent, DeliveryFailure, DeliveryResult, WebhookRecord } from '../../functions/core/webhooks/records.js';
import { laneOf, type QueuedDelivery } from '../../functions/core/webhooks/records.js';
import { memoryBreakers } from '../helpers/breakers.js';

/**
 * The local server's webhook lanes (core/webhooks/lanes.ts), driven through the deliverer with a
 * fake transport: each lane on its own, in order; what cannot be dead-lettered is tried again
 * first; a drain leaves nothing unaccounted for.
 */

const webhook = (id: string): WebhookRecord => ({
  id,
  url: `https://${id}.example`,
  secret: null,
  sessionId: null,
  createdAt: '2025-06-01T00:00:00.000Z',
});

function delivery(webhookId: string, sessionId: string, version: number): QueuedDelivery {
  return {
    tenant: 't1',
    webhook: webhook(webhookId),
    lane: laneOf('t1', webhookId, [sessionId]),
    event: { id: `${sessionId}:${version}`, sessionId, version, body: JSON.stringify({ id: `${sessionId}:${version}` }) },
  };
}

function harness(answer: (url: string, eventId: string) => Promise<DeliveryResult>) {
  const sent: string[] = [];
  const deadLetters: Array<{ webhookId: string; id: string; error: string }> = [];
  let refuseDeadLetters = 0;
  const breakers = memoryBreakers();
  const webhooks = {
    ...breakers,
    getWebhook: async (tenant: string, webhookId: string) => breakers.withBreaker(tenant, webhook(webhookId)),
    recordDeadLetter: async (_tenant: string, webhookId: string, event: DeadLetterEvent, failure: DeliveryFailure) => {
      if (refuseDeadLetters > 0) {
        refuseDeadLetters--;
        throw new Error('table unavailable');
      }
      deadLetters.push({ webhookId, id: event.id, error: failure.error });
    },
  };
  const deliverer = new WebhookDeliverer(
    {
      webhooks,
      send: async (target, _body, { eventId }) => {
        const result = await answer(target.url, eventId);
        if (result.ok) sent.push(`${target.url} ${eventId}`);
        return result;
      },
      sleep: async () => {},
      log: () => {},
      deliveredBy: 'the test',
    },
    { attempts: 2, backoffMs: [0] },
  );
  const lanes = new WebhookLanes(deliverer, { webhooks, sleep: async () => {}, retryMs: 0 });
  return {
    lanes,
    sent,
    deadLetters,
    refuseNextDeadLetters: (count: number) => {
      refuseDeadLetters = count;
    },
  };
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 20));

describe('webhook lanes', () => {
  it('deliver each lane in order while another lane hangs', async () => {
    // Prepare: webhook `dead` never answers.
    const h = harness((url) => (url.includes('dead') ? new Promise<DeliveryResult>(() => {}) : Promise.resolve({ ok: true, status: 200 })));

    // Act
    const taken = await h.lanes.enqueue([
      delivery('dead', 's1', 1),
      delivery('live', 's1', 1),
      delivery('live', 's1', 2),
      delivery('live', 's2', 7),
    ]);
    await settle();

    // Assess: enqueue takes everything at once; only the dead lane waits.
    expect(taken.failed).toEqual([]);
    expect([...h.sent].sort()).toEqual(['https://live.example s1:1', 'https://live.example s1:2', 'https://live.example s2:7']);
    expect(h.sent.indexOf('https://live.example s1:1')).toBeLessThan(h.sent.indexOf('https://live.example s1:2'));
    expect(h.lanes.pending()).toBe(1);
  });

  it('dead-letter a failing lane in order and try a dead letter that could not be written again before anything later', async () => {
    // Prepare: `down` answers 503; the first two dead letters cannot be written.
    const h = harness(async (url) => (url.includes('down') ? { ok: false, error: 'HTTP 503' } : { ok: true, status: 200 }));
    h.refuseNextDeadLetters(2);

    // Act
    await h.lanes.enqueue([delivery('down', 's1', 1), delivery('down', 's1', 2)]);
    await settle();

    // Assess: both end as dead letters, in version order, none lost.
    expect(h.deadLetters.map((letter) => letter.id)).toEqual(['s1:1', 's1:2']);
    expect(h.lanes.pending()).toBe(0);
  });

  it('turn what still waits at a drain into dead letters', async () => {
    // Prepare: one delivery hangs, one waits behind it.
    const h = harness(() => new Promise<DeliveryResult>(() => {}));
    await h.lanes.enqueue([delivery('dead', 's1', 1), delivery('dead', 's1', 2)]);

    // Act
    await h.lanes.drain(10);

    // Assess
    expect(h.deadLetters).toEqual([
      { webhookId: 'dead', id: 's1:1', error: 'not attempted: the server stopped' },
      { webhookId: 'dead', id: 's1:2', error: 'not attempted: the server stopped' },
    ]);
    expect(h.lanes.pending()).toBe(0);
  });
});
