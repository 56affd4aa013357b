/**
 * The client's tagged values (docs/api.md, "Rich values": `{"$as":"Date","$v":"…"}`, a `$`-key
 * stored as `$$key`) written as what they stand for, in otherwise pretty-printed JSON:
 *
 *   "due": Date 2026-01-02T00:00:00.000Z,
 *   "tags": Map(1) { "a" => 1 },
 *
 * Each tag's own text sits between TAG_OPEN and TAG_CLOSE, so the JSON view can colour it and
 * `plainText` can drop the marks. A tagged value whose payload is malformed stays JSON.
 */
export const TAG_OPEN = '\u0001';
export const TAG_CLOSE = '\u0002';

type Tagged = { $as: string; $v?: unknown };

const mark = (text: string) => `${TAG_OPEN}${text}${TAG_CLOSE}`;

function isTagged(value: unknown): value is Tagged {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const keys = Object.keys(value);
  const tag = (value as Tagged).$as;
  if (typeof tag !== 'string' || !keys.every((key) => key === '$as' || key === '$v')) return false;
  return keys.includes('$v') || tag === 'undefined';
}

function block(open: string, close: string, lines: string[], indent: string): string {
  if (lines.length === 0) return `${open}${close}`;
  const inner = `${indent}  `;
  return `${open}\n${lines.map((line) => `${inner}${line}`).join(',\n')}\n${indent}${close}`;
}

function printTagged(value: Tagged, indent: string): string | undefined {
  const payload = value.$v;
  const inner = `${indent}  `;
  switch (value.$as) {
    case 'undefined':
      return mark('undefined');
    case 'Date':
      return typeof payload === 'string' ? mark(`Date ${payload}`) : undefined;
    case 'BigInt':
      return typeof payload === 'string' ? mark(`${payload}n`) : undefined;
    case 'Number':
      return typeof payload === 'string' ? mark(payload) : undefined;
    case 'RegExp':
      return Array.isArray(payload) && payload.length === 2 ? mark(`/${String(payload[0])}/${String(payload[1])}`) : undefined;
    case 'Map':
      if (!Array.isArray(payload) || !payload.every((entry) => Array.isArray(entry) && entry.length === 2)) return undefined;
      return block(
        `${mark(`Map(${payload.length})`)} {`,
        '}',
        payload.map((entry) => `${print(entry[0], inner)} => ${print(entry[1], inner)}`),
        indent,
      );
    case 'Set':
      if (!Array.isArray(payload)) return undefined;
      return block(
        `${mark(`Set(${payload.length})`)} [`,
        ']',
        payload.map((member) => print(member, inner)),
        indent,
      );
    default:
      // ArrayBuffer, DataView and typed arrays: their bytes as base64, under their type's name.
      return typeof payload === 'string' ? `${mark(value.$as)} ${JSON.stringify(payload)}` : undefined;
  }
}

function print(value: unknown, indent: string): string {
  if (isTagged(value)) {
    const text = printTagged(value, indent);
    if (text !== undefined) return text;
  }
  const inner = `${indent}  `;
  if (Array.isArray(value))
    return block(
      '[',
      ']',
      value.map((item) => print(item, inner)),
      indent,
    );
  if (typeof value === 'object' && value !== null) {
    const lines = Object.entries(value).map(
      ([key, member]) => `${JSON.stringify(key.startsWith('$$') ? key.slice(1) : key)}: ${print(member, inner)}`,
    );
    return block('{', '}', lines, indent);
  }
  return JSON.stringify(value) ?? 'undefined';
}

/** Pretty-printed JSON with tagged values written as values (marked, see TAG_OPEN). */
export function richText(value: unknown): string {
  return print(value, '');
}

/** The same text without the marks. */
export function plainText(text: string): string {
  return text.replaceAll(TAG_OPEN, '').replaceAll(TAG_CLOSE, '');
}
