import { AgentStateError } from '../kernel/errors.js';
import { newId } from '../kernel/ids.js';
import type { Page } from '../model/model.js';
import {
  type DeadLetter,
  type DeadLetterEvent,
  type DeadLetterView,
  deadLetterView,
  type WebhookRecord,
  type WebhookSender,
  type WebhookStore,
  type WebhookUrlPolicy,
  type WebhookView,
  webhookView,
} from './records.js';

/** The webhook registry (API.md section 9): registration, listing, and dead letters kept and replayed. */

/** Fan-out cost per event grows with this, so it is kept small. */
const MAX_WEBHOOKS_PER_TENANT = 20;
const MAX_REPLAY = 100;
const DEFAULT_REPLAY = 25;
/** Replays run inside an API request; stop starting deliveries after this long. */
const REPLAY_BUDGET_MS = 15_000;

export interface ReplayResult {
  /** Dead letters delivered (and removed) by this call. */
  delivered: number;
  /** The dead letter that failed again (it stays, with one more attempt), if any. */
  failed: { eventId: string; error: string } | null;
  /** Whether dead letters remain for this webhook. */
  remaining: boolean;
}

/** The webhook registry and its dead letters. */
export class WebhookService {
  constructor(
    private readonly store: WebhookStore,
    private readonly checkUrl: WebhookUrlPolicy,
    private readonly send: WebhookSender,
    private readonly now: () => Date = () => new Date(),
  ) {}

  async create(
    tenant: string,
    input: { url: string; secret?: string | null; sessionId?: string | null; agentId?: string | null },
  ): Promise<WebhookView> {
    this.checkUrl(input.url);
    const record: WebhookRecord = {
      id: newId(),
      url: input.url,
      secret: input.secret ?? null,
      sessionId: input.sessionId ?? null,
      agentId: input.agentId ?? null,
      createdAt: this.now().toISOString(),
    };
    // Counted where the webhooks are kept: creates at once never pass the limit together.
    if (!(await this.store.putWebhook(tenant, record, { limit: MAX_WEBHOOKS_PER_TENANT }))) {
      throw new AgentStateError('invalid_request', `a tenant may have at most ${MAX_WEBHOOKS_PER_TENANT} webhooks; delete one first`, {
        limit: MAX_WEBHOOKS_PER_TENANT,
      });
    }
    return webhookView(record);
  }

  async get(tenant: string, webhookId: string): Promise<WebhookView> {
    return webhookView(await this.require(tenant, webhookId));
  }

  async list(tenant: string, options: { limit: number; cursor?: string }): Promise<Page<WebhookView>> {
    const page = await this.store.listWebhooks(tenant, options);
    return { items: page.items.map(webhookView), ...(page.next ? { next: page.next } : {}) };
  }

  /** Its dead letters are no longer reachable and expire on their own (TTL). */
  async delete(tenant: string, webhookId: string): Promise<void> {
    if (!(await this.store.deleteWebhook(tenant, webhookId))) throw notFound(webhookId);
  }

  async listDeadLetters(tenant: string, webhookId: string, options: { limit: number; cursor?: string }): Promise<Page<DeadLetterView>> {
    await this.require(tenant, webhookId);
    const page = await this.store.listDeadLetters(tenant, webhookId, options);
    return { items: page.items.map(deadLetterView), ...(page.next ? { next: page.next } : {}) };
  }

  /**
   * Delivers dead letters again, oldest session-version first, one attempt each; a delivered
   * one is removed. It stops at the first failure, so a session's events are never replayed
   * out of order and a still-failing endpoint costs one timeout, not `limit` of them.
   */
  async replay(tenant: string, webhookId: string, options: { limit?: number } = {}): Promise<ReplayResult> {
    const webhook = await this.require(tenant, webhookId);
    const limit = options.limit ?? DEFAULT_REPLAY;
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_REPLAY) {
      throw new AgentStateError('invalid_request', `limit must be an integer from 1 to ${MAX_REPLAY}`, { field: 'limit' });
    }
    const started = this.now().getTime();
    const { items, next } = await this.store.listDeadLetters(tenant, webhookId, { limit });
    let delivered = 0;
    for (const letter of items) {
      if (this.now().getTime() - started > REPLAY_BUDGET_MS) return { delivered, failed: null, remaining: true };
      const result = await this.send(webhook, letter.body, { eventId: letter.eventId, attempt: letter.attempts + 1 });
      if (!result.ok) {
        await this.store.recordDeadLetter(tenant, webhookId, deadLetterEvent(letter), {
          attempts: 1,
          error: result.error,
          at: this.now().toISOString(),
        });
        return { delivered, failed: { eventId: letter.eventId, error: result.error }, remaining: true };
      }
      await this.store.deleteDeadLetter(tenant, webhookId, deadLetterEvent(letter));
      // The endpoint answers again: deliveries need not wait for the breaker's probe.
      if (delivered === 0 && webhook.breaker) await this.store.closeBreaker(tenant, webhookId);
      delivered++;
    }
    const remaining = next !== undefined && (await this.store.listDeadLetters(tenant, webhookId, { limit: 1 })).items.length > 0;
    return { delivered, failed: null, remaining };
  }

  private async require(tenant: string, webhookId: string): Promise<WebhookRecord> {
    const webhook = await this.store.getWebhook(tenant, webhookId);
    if (!webhook) throw notFound(webhookId);
    return webhook;
  }
}

function notFound(webhookId: string): AgentStateError {
  return new AgentStateError('not_found', `webhook ${webhookId} does not exist`, { webhookId });
}

function deadLetterEvent(letter: DeadLetter): DeadLetterEvent {
  return {
    id: letter.eventId,
    sessionId: letter.sessionId,
    version: letter.version,
    body: letter.body,
    ...(letter.document === undefined ? {} : { document: letter.document }),
  };
}
