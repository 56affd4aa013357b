import { isJsonObject, type Json, type JsonObject, stringifyJson } from '../json/json.js';

/** How long a message preview may be, in characters (UTF-16 code units, never a split pair). */
const PREVIEW_CHARS = 120;

/**
 * A one-line snippet of a message for tree views (`GET …/tree?preview=1`): the text a person
 * would read first. Messages are free-form (API.md section 3), so it looks where the common
 * shapes keep their text — `content` as a string, `content` as a list of parts with `text`
 * (OpenAI, Anthropic), then `text` — and otherwise shows the message's other members as JSON.
 * Whitespace runs become one space; null for the root, or a message with nothing but its role.
 */
export function messagePreview(message: JsonObject | null, maxChars = PREVIEW_CHARS): string | null {
  if (!message) return null;
  const text = textOf(message.content) ?? textOf(message.text) ?? otherMembers(message);
  if (text === null) return null;
  const line = text.replace(/\s+/g, ' ').trim();
  if (line === '') return null;
  return line.length <= maxChars ? line : `${cutAt(line, maxChars - 1).trimEnd()}…`;
}

function textOf(value: Json | undefined): string | null {
  if (typeof value === 'string') return value;
  if (!Array.isArray(value)) return null;
  const texts = value.flatMap((part) => {
    if (typeof part === 'string') return [part];
    if (isJsonObject(part) && typeof part.text === 'string') return [part.text];
    return [];
  });
  return texts.length > 0 ? texts.join(' ') : null;
}

/** The message without the members every message has, as JSON; null when nothing is left. */
function otherMembers(message: JsonObject): string | null {
  const { id: _id, parentId: _parentId, role: _role, ...rest } = message;
  if (Object.keys(rest).length === 0) return null;
  // Bounded: a 256 KiB message is not stringified whole for 120 characters.
  return stringifyJson(rest, (_key, value: unknown) => (typeof value === 'string' && value.length > 200 ? value.slice(0, 200) : value));
}

/** The first `length` code units, one less when that would split a surrogate pair. */
function cutAt(text: string, length: number): string {
  const code = text.charCodeAt(length - 1);
  return code >= 0xd800 && code <= 0xdbff ? text.slice(0, length - 1) : text.slice(0, length);
}
