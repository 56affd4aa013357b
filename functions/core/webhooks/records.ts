import type { WireEvent } from '../events/events.js';
import { parseJson } from '../json/json.js';
import type { Page } from '../model/model.js';
import type { WebhookBreaker } from './breaker.js';

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
  /** Present while its endpoint's breaker is open or half-open (breaker.ts); never shown to clients. */
  breaker?: WebhookBreaker;
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
  /**
   * Puts the webhook if the tenant has fewer than `limit`, counted so that creates at once
   * never pass it together; false (nothing put) when it has that many.
   */
  putWebhook(tenant: string, webhook: WebhookRecord, options: { limit: number }): Promise<boolean>;
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
  /** Opens (or reopens) the webhook's breaker as `breaker` says; nothing for a deleted webhook. */
  openBreaker(tenant: string, webhookId: string, breaker: WebhookBreaker): Promise<void>;
  /**
   * Claims the probe of a half-open breaker until `until`: `claimed` for the one delivery that
   * may try the endpoint; `closed` when another delivery's probe got through meanwhile (the
   * endpoint works: deliver as usual); `taken` when the breaker is open again or another
   * delivery holds the probe.
   */
  claimProbe(tenant: string, webhookId: string, options: { now: number; until: number }): Promise<ProbeClaim>;
  /** Closes the breaker after a delivery got through; nothing for a deleted webhook. */
  closeBreaker(tenant: string, webhookId: string): Promise<void>;
}

/** What a claim of a half-open breaker's probe found (`WebhookStore.claimProbe`). */
export type ProbeClaim = 'claimed' | 'closed' | 'taken';

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

/** One event for one webhook, ready to send. */
export interface QueuedDelivery {
  tenant: string;
  webhook: WebhookRecord;
  /** Deliveries of the same lane go in order, one at a time (`laneOf`). */
  lane: string;
  /** The event as it goes out (`body`), and where its dead letter sorts. */
  event: DeadLetterEvent;
}

/** Where the stream's webhook consumer hands deliveries over. */
export interface WebhookQueue {
  /**
   * Takes deliveries, each lane's in order. Resolves with the indexes of those it could not
   * take (and every later one of their lanes): the stream retries their records.
   */
  enqueue(deliveries: readonly QueuedDelivery[], options?: { deadline?: number }): Promise<{ failed: number[] }>;
}

/**
 * The lane of a webhook and one stream of events (`stream`: the session for thread events,
 * else the document or memory item). JSON arrays: identifiers may hold any character but `#`
 * and `/`, tenants too.
 */
export function laneOf(tenant: string, webhookId: string, stream: readonly string[]): string {
  return JSON.stringify([tenant, webhookId, ...stream]);
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

export function deadLetterView(letter: DeadLetter): DeadLetterView {
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
