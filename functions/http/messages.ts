import * as z from 'zod/mini';
import { requireNodeId } from '../core/ids.js';
import type { JsonObject } from '../core/json.js';
import { checkAppendSize } from '../core/limits.js';

export { MAX_MESSAGES_PER_APPEND } from '../core/limits.js';

export const messageSchema = z.looseObject({
  role: z.string().check(z.minLength(1, 'role must be a non-empty string')),
  id: z.optional(z.string()),
});

/** Ids and sizes of messages about to be appended (after the schema accepted their shape). */
export function checkMessages(messages: readonly JsonObject[], field: string): void {
  messages.forEach((message, index) => {
    if (message.id !== undefined) requireNodeId(message.id, `${field}.${index}.id`);
  });
  checkAppendSize(messages, field);
}
