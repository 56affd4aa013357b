import { encodedSize, type Json, type JsonObject } from '../json/json.js';
import { AgentStateError } from '../kernel/errors.js';
import { NOTE_LIMIT_BYTES, STATE_BODY_LIMIT_BYTES } from './model.js';

/**
 * Count and size limits that come from what one write can carry, in one place, so that every
 * write is checked against them before it is attempted and none is refused by DynamoDB (a
 * `500`). DynamoDB's own limits are here as facts; the API's limits are derived from them
 * with room for the items a write carries besides the caller's.
 *
 *   one item:               at most 400 KB
 *   one TransactWriteItems: at most 100 items and 4 MB
 *   an append:              ≤ 50 messages of ≤ 256 KiB, ≤ 1 MiB together, stored in one
 *                           change of the log (one item): compressed, they and the rest of
 *                           the change must fit its 400 KB (store/log/log-items.ts says so
 *                           with a `413` before anything is written)
 *   a decision's commit:    the trigger's and the worker's new nodes (≤ 90, the trigger's
 *                           ≤ 1 MiB, the answer's ≤ 256 KiB besides its state)
 *                           + the version, the head marker, the departing head's pointer,
 *                             the session item, the decision record, the lease (≤ 10 items)
 *   the decision record:    the answer (≤ 256 KiB + a kept state ≤ 64 KiB) + the agent
 *                           config (≤ 64 KiB): under one item's 400 KB
 *
 * A layout that writes a decision in several steps still keeps to these: they are what one
 * decision may add to a session, which is also what a reader of the DecisionRequest expects.
 */

/** DynamoDB: the largest item, names and values together. */
export const ITEM_LIMIT_BYTES = 400 * 1024;

/** DynamoDB: the most items one TransactWriteItems may write. */
const TRANSACTION_ITEM_LIMIT = 100;

/** Items a decision's commit may write besides the message nodes it adds. */
const DECISION_OTHER_ITEMS = 10;

/** The most messages one decision adds to the tree: its trigger's and its worker's together. */
const DECISION_MESSAGE_LIMIT = TRANSACTION_ITEM_LIMIT - DECISION_OTHER_ITEMS;

/** The most messages one append (`POST …/messages`, a `client.messages` trigger) carries. */
export const MAX_MESSAGES_PER_APPEND = 50;

/** A message is one node item (at most 400 KB in DynamoDB, with its node's bookkeeping). */
const MESSAGE_LIMIT_BYTES = 256 * 1024;

/** The messages of one append together, as encoded JSON: what `POST …/messages` takes in one body. */
export const APPEND_LIMIT_BYTES = 1024 * 1024;

/**
 * The body of `POST …/messages`: its messages, and the new head's state it may carry (API.md
 * section 3: the state's limit plus the messages'), with the JSON around them.
 */
export const APPEND_BODY_LIMIT_BYTES = STATE_BODY_LIMIT_BYTES + APPEND_LIMIT_BYTES;

/**
 * An agent config, as encoded JSON: registered (`PUT /v1/agents`) or answered by a worker. It
 * rides on every version item and on the decision record, so it is kept small.
 */
export const AGENT_CONFIG_LIMIT_BYTES = 64 * 1024;

/**
 * What one answer carries at most of what a read may end early (a page of versions, a node's
 * notes), as JSON text. Every answer travels inside Lambda's 6 MB payload (edge/lambda-payload.ts):
 * as base64 when its text would escape to more, so a body of 4,706,304 bytes always fits beside
 * the answer's 16 KiB of status and headers. This leaves about 240 KiB of that for the rest of
 * the answer; and one version alone (a 4 MiB state and a 64 KiB agent config) fits it.
 */
export const ANSWER_ITEMS_BYTES = 4 * 1024 * 1024 + 256 * 1024;

/**
 * An agent's `stateFields`, as encoded JSON. The registration is one item of at most 400 KB:
 * this, the config and the worker keep it well within (200 fields may each declare 4,000
 * characters of description and rules and 200 agents, far more than one item holds).
 */
export const AGENT_STATE_FIELDS_LIMIT_BYTES = 128 * 1024;

/**
 * `413 payload_too_large` (with `limitBytes`) when a message, or the messages of one append
 * together, pass what one append may carry. `field` names them in the error (`messages`,
 * `trigger.messages`).
 */
export function checkAppendSize(messages: readonly JsonObject[], field: string): void {
  let total = 0;
  messages.forEach((message, index) => {
    const bytes = encodedSize(message);
    if (bytes > MESSAGE_LIMIT_BYTES) {
      throw new AgentStateError(
        'payload_too_large',
        `${field}.${index} is ${bytes} bytes of JSON; a message may be at most ${MESSAGE_LIMIT_BYTES}`,
        {
          limitBytes: MESSAGE_LIMIT_BYTES,
          field: `${field}.${index}`,
        },
      );
    }
    total += bytes;
  });
  if (total > APPEND_LIMIT_BYTES) {
    throw new AgentStateError(
      'payload_too_large',
      `${field} are ${total} bytes of JSON together; one append may carry at most ${APPEND_LIMIT_BYTES}`,
      { limitBytes: APPEND_LIMIT_BYTES, sizeBytes: total, field },
    );
  }
}

/** `413 payload_too_large` (with `limitBytes`, `sizeBytes`) for a note past NOTE_LIMIT_BYTES, before anything is read. */
export function checkNoteSize(value: Json): void {
  const bytes = encodedSize(value);
  if (bytes > NOTE_LIMIT_BYTES) {
    throw new AgentStateError('payload_too_large', `the note is ${bytes} bytes of JSON; a note may be at most ${NOTE_LIMIT_BYTES}`, {
      limitBytes: NOTE_LIMIT_BYTES,
      sizeBytes: bytes,
    });
  }
}

/**
 * `502 worker_failed` (with `limit: "messages"` and `limitCount`) when a worker answers more
 * messages than a decision may add after its trigger's: the answer cannot be applied, and the
 * worker, not the caller, chose its size. For a decision without a worker the answer is the
 * caller's `proposed`: `400 invalid_request`. Nothing is written.
 */
export function checkDecisionMessages(triggerCount: number, answerCount: number, source: 'worker' | 'caller' = 'worker'): void {
  if (triggerCount + answerCount <= DECISION_MESSAGE_LIMIT) return;
  const whose = source === 'worker' ? "the worker's answer" : 'proposed';
  throw new AgentStateError(
    source === 'worker' ? 'worker_failed' : 'invalid_request',
    `${whose} has ${answerCount} messages; after the trigger's ${triggerCount}, a decision may add ${DECISION_MESSAGE_LIMIT - triggerCount} (${DECISION_MESSAGE_LIMIT} in all)`,
    { limit: 'messages', limitCount: DECISION_MESSAGE_LIMIT, count: triggerCount + answerCount },
  );
}

/**
 * The size of an agent config, or why it is too large (`null` when it fits): the registry
 * answers `400 invalid_request`, a decision blames whoever answered it.
 */
export function agentConfigExcess(config: Json): SizeExcess | null {
  return sizeExcess(config, AGENT_CONFIG_LIMIT_BYTES);
}

/**
 * An agent's routes (API.md section 13), encoded: 20 routes of a few filters each take a few KiB;
 * with config and stateFields the registration stays one item well inside 400 KB.
 */
const AGENT_ROUTES_LIMIT_BYTES = 32 * 1024;

/** The size of an agent's `routes`, or why they are too large (`null` when they fit). */
export function routesExcess(routes: Json): SizeExcess | null {
  return sizeExcess(routes, AGENT_ROUTES_LIMIT_BYTES);
}

/** The size of an agent's `stateFields`, or why they are too large (`null` when they fit). */
export function stateFieldsExcess(fields: Readonly<Record<string, unknown>>): SizeExcess | null {
  return sizeExcess(fields as Json, AGENT_STATE_FIELDS_LIMIT_BYTES);
}

interface SizeExcess {
  detail: string;
  limitBytes: number;
  sizeBytes: number;
}

function sizeExcess(value: Json, limitBytes: number): SizeExcess | null {
  const bytes = encodedSize(value);
  if (bytes <= limitBytes) return null;
  return { detail: `is ${bytes} bytes of JSON; the limit is ${limitBytes}`, limitBytes, sizeBytes: bytes };
}

/** A session's metadata, as encoded JSON: an item of its own beside the session item, read with it (store/sessions/session-item.ts). */
const METADATA_LIMIT_BYTES = 16 * 1024;

/** `400` naming `metadata` when it is over its limit (a `POST`, or what a `PATCH` merges it into). */
export function checkMetadata(metadata: JsonObject | null): void {
  if (metadata && encodedSize(metadata) > METADATA_LIMIT_BYTES) {
    throw new AgentStateError('invalid_request', `metadata may be at most ${METADATA_LIMIT_BYTES} bytes of JSON`, { field: 'metadata' });
  }
}
