import { describe, expect, it } from 'vitest';
import type { DeadLetter, WebhookStore } from '../../functions/core/webhooks/records.js';
import { WebhookService } from '../../functions/core/webhooks/registry.js';

/** A webhook with `count` dead letters, in memory: only what a replay touches. */
function storeWithDeadLetters(count: number): { store: WebhookStore; letters: DeadLetter[] } {
  const letters: DeadLetter[] = Array.from({ length: count }, (_, index) => ({
    webhookId: 'w',
    eventId: `s1:${index + 1}`,
    sessionId: 's1',
    version: index + 1,
    body: JSON.stringify({ id: `s1:${index + 1}` }),
    attempts: 3,
    lastError: 'HTTP 500',
    firstFailedAt: '2025-06-01T00:00:00.000Z',
    lastFailedAt: '2025-06-01T00:00:00.000Z',
  }));
  const unused = () => Promise.reject(new Error('not used by a replay'));
  const store: WebhookStore = {
    putWebhook: unused,
    listWebhooks: unused,
    allWebhooks: unused,
    deleteWebhook: unused,
    recordDeadLetter: unused,
    openBreaker: unused,
    claimProbe: unused,
    closeBreaker: unused,
    getWebhook: async () => ({ id: 'w', url: 'https://w.example', secret: null, sessionId: null, createdAt: '2025-06-01T00:00:00.000Z' }),
    listDeadLetters: async (_tenant, _webhookId, options) => ({
      items: letters.slice(0, options.limit),
      ...(letters.length > options.limit ? { next: 'more' } : {}),
    }),
    deleteDeadLetter: async (_tenant, _webhookId, event) => {
      letters.splice(
        letters.findIndex((letter) => letter.version === event.version),
        1,
      );
    },
  };
  return { store, letters };
}

describe('replaying dead letters', () => {
  it('stops starting deliveries once its budget has passed on the service clock', async () => {
    // Prepare: each delivery takes ten seconds on the service's clock (and none on the system's).
    const { store, letters } = storeWithDeadLetters(3);
    let clock = Date.parse('2030-01-01T00:00:00.000Z');
    const sent: string[] = [];
    const service = new WebhookService(
      store,
      () => undefined,
      async (_webhook, _body, headers) => {
        sent.push(headers.eventId);
        clock += 10_000;
        return { ok: true, status: 204 };
      },
      () => new Date(clock),
    );

    // Act
    const result = await service.replay('t1', 'w', { limit: 3 });

    // Assess: the third delivery would start 20 s in, past the 15 s budget.
    expect(sent).toEqual(['s1:1', 's1:2']);
    expect(result).toEqual({ delivered: 2, failed: null, remaining: true });
    expect(letters.map((letter) => letter.eventId)).toEqual(['s1:3']);
  });
});
