import * as z from 'zod';
import { AgentStateError } from '../core/errors.js';
import { requireNodeId } from '../core/ids.js';
import { encodedSize, type JsonObject } from '../core/json.js';

/** One append is one atomic write; 50 messages keep it well inside a DynamoDB transaction. */
export const MAX_MESSAGES_PER_APPEND = 50;
/** A message is one item (at most 400 KB in DynamoDB, with its node's bookkeeping). */
const MESSAGE_LIMIT_BYTES = 256 * 1024;

export const messageSchema = z.looseObject({
  role: z.string().min(1, 'role must be a non-empty string'),
  id: z.string().optional(),
});

/** Ids and sizes of messages about to be appended (after the schema accepted their shape). */
export function checkMessages(messages: readonly JsonObject[], field: string): void {
  messages.forEach((message, index) => {
    if (message.id !== undefined) requireNodeId(message.id, `${field}.${index}.id`);
    const bytes = encodedSize(message);
    if (bytes > MESSAGE_LIMIT_BYTES) {
      throw new AgentStateError(
        'payload_too_large',
        `${field}.${index} is ${bytes} bytes of JSON; a message may be at most ${MESSAGE_LIMIT_BYTES}`,
        { limitBytes: MESSAGE_LIMIT_BYTES },
      );
    }
  });
}
