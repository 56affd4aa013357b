import type { WebhookBreaker } from '../../functions/core/webhooks/breaker.js';
import type { WebhookRecord, WebhookStore } from '../../functions/core/webhooks/records.js';

/**
 * Webhook breakers kept in memory, as the webhook store keeps them on each webhook's item
 * (store/events/webhook-store.ts), with the same conditions: for unit tests whose webhooks are
 * fakes. `withBreaker` gives a webhook as a read of its item would, breaker included.
 */
export function memoryBreakers(): Pick<WebhookStore, 'openBreaker' | 'claimProbe' | 'closeBreaker'> & {
  breakers: Map<string, WebhookBreaker>;
  withBreaker(tenant: string, webhook: WebhookRecord): WebhookRecord;
} {
  const breakers = new Map<string, WebhookBreaker>();
  const key = (tenant: string, webhookId: string) => `${tenant} ${webhookId}`;
  return {
    breakers,
    withBreaker: (tenant, webhook) => {
      const breaker = breakers.get(key(tenant, webhook.id));
      return breaker ? { ...webhook, breaker } : webhook;
    },
    openBreaker: async (tenant, webhookId, breaker) => {
      breakers.set(key(tenant, webhookId), { failures: breaker.failures, openUntil: breaker.openUntil });
    },
    claimProbe: async (tenant, webhookId, { now, until }) => {
      const breaker = breakers.get(key(tenant, webhookId));
      if (!breaker) return 'closed';
      if (breaker.openUntil > now || (breaker.probeUntil !== undefined && breaker.probeUntil > now)) return 'taken';
      breaker.probeUntil = until;
      return 'claimed';
    },
    closeBreaker: async (tenant, webhookId) => {
      breakers.delete(key(tenant, webhookId));
    },
  };
}
