import * as z from 'zod';
import { requireNodeId } from '../core/ids.js';
import type { JsonObject } from '../core/json.js';
import { checkAppendSize } from '../core/limits.js';

export { MAX_MESSAGES_PER_APPEND } from '../core/limits.js';

export const messageSchema = z.looseObject({
  role: z.string().min(1, 'role must be a non-empty string'),
  id: z.string().optional(),
});

/** Ids and sizes of messages about to be appended (after the schema accepted their shape). */
export function checkMessages(messages: readonly JsonObject[], field: string): void {
  messages.forEach((message, index) => {
    if (message.id !== undefined) requireNodeId(message.id, `${field}.${index}.id`);
  });
  checkAppendSize(messages, field);
}
