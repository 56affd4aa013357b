import * as z from 'zod/mini';
import type { JsonObject } from '../../core/json/json.js';
import { requireNodeId } from '../../core/kernel/ids.js';
import { checkAppendSize } from '../../core/model/limits.js';

export { MAX_MESSAGES_PER_APPEND } from '../../core/model/limits.js';

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
