import { EventBridgeClient, PutEventsCommand, type PutEventsRequestEntry } from '@aws-sdk/client-eventbridge';
import type { EventPublisher } from '../core/events/events.js';
import { serializeWithin } from '../core/events/events.js';
import { type Sleep, sleep } from '../core/webhooks/delivery.js';
import { AWS_CALL_TIMEOUTS } from '../store/table/client.js';

const EVENT_SOURCE = 'agentstate';
/** PutEvents takes at most 10 entries and 256 KB in one request. */
const MAX_ENTRIES = 10;
const MAX_REQUEST_BYTES = 256 * 1024;
/** Room for Source, DetailType and Time in an entry's size. */
const ENTRY_OVERHEAD_BYTES = 128;
const ATTEMPTS = 3;

/**
 * The change hook's EventBridge client: each attempt bounded (AWS_CALL_TIMEOUTS), and only
 * one per send, since the publisher retries the entries that failed itself. A bus endpoint
 * that hangs fails the entries it holds in seconds, and only those records are retried.
 */
export function eventBridgeClient(): EventBridgeClient {
  return new EventBridgeClient({ maxAttempts: 1, requestHandler: AWS_CALL_TIMEOUTS });
}

/**
 * Puts change events on the stack's EventBridge bus: source `agentstate`, detail-type the
 * event's type (`state.changed`, `run.changed`, `profile.changed`, `shared.changed`), detail = the event plus its `tenant` (the bus is the operator's, shared by
 * every tenant, so rules need the tenant to route on). An event too large for an entry goes
 * without its states (`truncated: true`). Entries that fail are retried twice; the indexes of
 * those that still fail are returned for the stream to retry.
 */
export function eventBridgePublisher(client: EventBridgeClient, busName: string, wait: Sleep = sleep): EventPublisher {
  return async (events) => {
    const entries = events.map(({ tenant, event }): { entry: PutEventsRequestEntry; bytes: number } => {
      const detail = serializeWithin(Object.assign({}, event, { tenant }), MAX_REQUEST_BYTES - ENTRY_OVERHEAD_BYTES);
      return {
        entry: { EventBusName: busName, Source: EVENT_SOURCE, DetailType: event.type, Detail: detail, Time: new Date(event.occurredAt) },
        bytes: Buffer.byteLength(detail, 'utf8') + ENTRY_OVERHEAD_BYTES,
      };
    });
    const failed: number[] = [];
    for (const chunk of chunks(entries)) {
      let pending = chunk;
      for (let attempt = 1; pending.length > 0; attempt++) {
        if (attempt > 1) await wait(100 * 2 ** attempt);
        let results: Array<{ ErrorCode?: string }>;
        try {
          const output = await client.send(
            new PutEventsCommand({ Entries: pending.map((index) => (entries[index] as { entry: PutEventsRequestEntry }).entry) }),
          );
          results = output.Entries ?? [];
        } catch (error) {
          console.warn('agentstate: PutEvents failed', String(error));
          results = pending.map(() => ({ ErrorCode: 'RequestFailed' }));
        }
        // Entries answer in request order; one with an ErrorCode was not put.
        pending = pending.filter((_, position) => results[position]?.ErrorCode !== undefined || results[position] === undefined);
        if (attempt >= ATTEMPTS) {
          failed.push(...pending);
          break;
        }
      }
    }
    return failed;
  };
}

/** Entry indexes in requests of at most 10 entries and 256 KB. */
function chunks(entries: ReadonlyArray<{ bytes: number }>): number[][] {
  const result: number[][] = [];
  let current: number[] = [];
  let bytes = 0;
  entries.forEach((entry, index) => {
    if (current.length === MAX_ENTRIES || (current.length > 0 && bytes + entry.bytes > MAX_REQUEST_BYTES)) {
      result.push(current);
      current = [];
      bytes = 0;
    }
    current.push(index);
    bytes += entry.bytes;
  });
  if (current.length > 0) result.push(current);
  return result;
}
