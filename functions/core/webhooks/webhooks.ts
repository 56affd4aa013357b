import type { WireEvent } from '../events/events.js';
import { parseJson } from '../json/json.js';
import { AgentStateError } from '../kernel/errors.js';
import { newId } from '../kernel/ids.js';
import type { Page } from '../model/model.js';

/**
 * Webhooks (API.md section 9): per tenant, optionally limited to one session. Every change
 * event of a matching session is POSTed to the URL; a delivery that still fails after its
 * bounded attempts becomes a dead letter of that webhook, visible and replayable, so that a
 * failing endpoint is never silently skipped and never holds back anyone else.
 */

export interface WebhookRecord {
  id: string;
  url: string;
  /** Signs deliveries (`X-AgentState-Signature`); never returned. */
  secret: string | null;
  /** Only this session's events; null for every session of the tenant. */
  sessionId: string | null;
  /**
   * Events as this agent may see them (typed fields, API.md section 7): `next` and `prev`
   * only with the fields it may read. Absent or null: whole events.
   */
  agentId?: string | null;
  createdAt: string;
}

/** A webhook as clients see it: whether it has a secret, never the secret. */
export interface WebhookView {
  id: string;
  url: string;
  sessionId: string | null;
  /** Present only for a webhook registered with an agent. */
  agentId?: string;
  hasSecret: boolean;
  createdAt: string;
}

/** An event a webhook did not take, kept until it is replayed (or expires after 14 days). */
export interface DeadLetter {
  webhookId: string;
  eventId: string;
  sessionId: string;
  version: number;
  /** For a document event, which document (`run#<runId>`, `profile#<userId>`, `shared`). */
  document?: string;
  /** The exact body that was (and will again be) delivered. */
  body: string;
  /** Delivery attempts so far, over every try and replay. */
  attempts: number;
  lastError: string;
  firstFailedAt: string;
  lastFailedAt: string;
}

export interface DeadLetterView {
  eventId: string;
  sessionId: string;
  version: number;
  attempts: number;
  lastError: string;
  firstFailedAt: string;
  lastFailedAt: string;
  event: WireEvent;
}

/**
 * An event as its dead letter keeps it: a session's thread events and each of its documents'
 * events are kept apart (`document`), each in version order.
 */
export interface DeadLetterEvent {
  id: string;
  sessionId: string;
  version: number;
  /** Absent for a thread event (`state.changed`); see `DeadLetter.document`. */
  document?: string;
  body: string;
}

export interface DeliveryFailure {
  /** Attempts made this time (0 when the delivery was not tried; see `lastError`). */
  attempts: number;
  error: string;
  at: string;
}

export interface WebhookStore {
  putWebhook(tenant: string, webhook: WebhookRecord): Promise<void>;
  getWebhook(tenant: string, webhookId: string): Promise<WebhookRecord | null>;
  /** Newest first. */
  listWebhooks(tenant: string, options: { limit: number; cursor?: string }): Promise<Page<WebhookRecord>>;
  /** Every webhook of the tenant, for delivery (a tenant has at most `MAX_WEBHOOKS_PER_TENANT`). */
  allWebhooks(tenant: string): Promise<WebhookRecord[]>;
  /** False when there was none. */
  deleteWebhook(tenant: string, webhookId: string): Promise<boolean>;
  /** Records (or updates, for a redelivered event) the dead letter of one event. */
  recordDeadLetter(tenant: string, webhookId: string, event: DeadLetterEvent, failure: DeliveryFailure): Promise<void>;
  /** In replay order: by session, then version. */
  listDeadLetters(tenant: string, webhookId: string, options: { limit: number; cursor?: string }): Promise<Page<DeadLetter>>;
  deleteDeadLetter(tenant: string, webhookId: string, event: Omit<DeadLetterEvent, 'id' | 'body'>): Promise<void>;
}

/** What one HTTP delivery came to. */
export type DeliveryResult = { ok: true; status: number } | { ok: false; error: string };

/** POSTs `body` to the webhook once (signing it when the webhook has a secret). Never throws. */
export type WebhookSender = (
  webhook: Pick<WebhookRecord, 'url' | 'secret'>,
  body: string,
  headers: { eventId: string; attempt: number },
) => Promise<DeliveryResult>;

/** Checks a webhook URL where it is registered; throws `invalid_request`. */
export type WebhookUrlPolicy = (url: string) => void;

/**
 * How hard a delivery is tried before it becomes a dead letter. The attempt timeout lives in
 * the sender (5 s); with it, a dead endpoint costs at most ~3 × 5 s + 1.25 s per batch.
 */
export interface DeliveryPolicy {
  attempts: number;
  /** Waits before the 2nd, 3rd, … attempt (full jitter is applied to each). */
  backoffMs: readonly number[];
}

export const DEFAULT_DELIVERY_POLICY: DeliveryPolicy = { attempts: 3, backoffMs: [250, 1000] };

/** Fan-out cost per event grows with this, so it is kept small. */
const MAX_WEBHOOKS_PER_TENANT = 20;
const MAX_REPLAY = 100;
const DEFAULT_REPLAY = 25;
/** Replays run inside an API request; stop starting deliveries after this long. */
const REPLAY_BUDGET_MS = 15_000;

export type Sleep = (ms: number) => Promise<void>;
export const sleep: Sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Delivers one body with up to `attempts` tries and backoff between them. Resolves with the
 * last failure rather than throwing: the caller decides where a failure goes.
 */
export async function deliverWithRetries(
  send: WebhookSender,
  webhook: Pick<WebhookRecord, 'url' | 'secret'>,
  body: string,
  eventIdValue: string,
  options: {
    attempts: number;
    backoffMs: readonly number[];
    sleep?: Sleep;
    /** Epoch ms by which the last attempt must have started, on `now`'s clock. */
    deadline?: number;
    now?: () => Date;
  },
): Promise<{ ok: true; attempts: number } | { ok: false; attempts: number; error: string }> {
  const wait = options.sleep ?? sleep;
  const now = options.now ?? (() => new Date());
  let error = 'not attempted';
  for (let attempt = 1; attempt <= options.attempts; attempt++) {
    if (attempt > 1) {
      const base = options.backoffMs[Math.min(attempt - 2, options.backoffMs.length - 1)] ?? 0;
      const delay = base / 2 + Math.random() * (base / 2);
      // Out of time: what is left becomes a dead letter now rather than a timed-out batch.
      if (options.deadline !== undefined && now().getTime() + delay >= options.deadline) return { ok: false, attempts: attempt - 1, error };
      await wait(delay);
    }
    const result = await send(webhook, body, { eventId: eventIdValue, attempt });
    if (result.ok) return { ok: true, attempts: attempt };
    error = result.error;
  }
  return { ok: false, attempts: options.attempts, error };
}

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
    const existing = await this.store.allWebhooks(tenant);
    // Best effort under concurrent creates; the limit is about fan-out cost, not security.
    if (existing.length >= MAX_WEBHOOKS_PER_TENANT) {
      throw new AgentStateError('invalid_request', `a tenant may have at most ${MAX_WEBHOOKS_PER_TENANT} webhooks; delete one first`, {
        limit: MAX_WEBHOOKS_PER_TENANT,
      });
    }
    const record: WebhookRecord = {
      id: newId(),
      url: input.url,
      secret: input.secret ?? null,
      sessionId: input.sessionId ?? null,
      agentId: input.agentId ?? null,
      createdAt: this.now().toISOString(),
    };
    await this.store.putWebhook(tenant, record);
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

export function webhookView(webhook: WebhookRecord): WebhookView {
  return {
    id: webhook.id,
    url: webhook.url,
    sessionId: webhook.sessionId,
    ...(webhook.agentId ? { agentId: webhook.agentId } : {}),
    hasSecret: webhook.secret !== null,
    createdAt: webhook.createdAt,
  };
}

function deadLetterView(letter: DeadLetter): DeadLetterView {
  return {
    eventId: letter.eventId,
    sessionId: letter.sessionId,
    version: letter.version,
    attempts: letter.attempts,
    lastError: letter.lastError,
    firstFailedAt: letter.firstFailedAt,
    lastFailedAt: letter.lastFailedAt,
    event: parseJson(letter.body) as unknown as WireEvent,
  };
}
