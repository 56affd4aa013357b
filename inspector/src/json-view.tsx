import type { JSX } from 'preact';
import { plainText, richText, TAG_CLOSE, TAG_OPEN } from './rich-values.js';

/** Values larger than this are shown as plain text: colouring megabytes of JSON is not worth a frozen tab. */
const HIGHLIGHT_LIMIT = 200_000;
const TOKEN = /("(?:[^"\\]|\\.)*")(\s*:)?|\b(true|false|null)\b|(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)/g;

/**
 * Pretty-printed JSON with keys, strings, numbers and literals told apart by colour, and the
 * client's tagged values (a `Date`, a `Map`, …) shown as those values (rich-values.ts).
 */
export function JsonView({ value, label }: { value: unknown; label: string }) {
  const text = value === undefined ? '(absent)' : richText(value);
  return (
    // A scrollable region is focusable so that keyboard users can scroll it, and named so that
    // they know which state they are in (the browser tests find it by that name).
    // biome-ignore lint/a11y/noNoninteractiveTabindex: see above.
    // biome-ignore lint/a11y/useAriaPropsSupportedByRole: see above.
    <pre class="json" tabIndex={0} aria-label={label}>
      <code>{text.length > HIGHLIGHT_LIMIT ? plainText(text) : highlightMarked(text)}</code>
    </pre>
  );
}

/** Tagged values' own text in their colour, the JSON around them as JSON. */
function highlightMarked(text: string): Array<string | JSX.Element> {
  const parts: Array<string | JSX.Element> = [];
  text.split(TAG_OPEN).forEach((piece, index) => {
    if (index === 0) {
      parts.push(...highlight(piece, 'start'));
      return;
    }
    const [tag = '', rest = ''] = piece.split(TAG_CLOSE);
    parts.push(
      <span key={`tag-${index}`} class="j-tag">
        {tag}
      </span>,
      ...highlight(rest, `after-${index}`),
    );
  });
  return parts;
}

function highlight(text: string, prefix = ''): Array<string | JSX.Element> {
  const parts: Array<string | JSX.Element> = [];
  let last = 0;
  let count = 0;
  const nextKey = () => `${prefix}-${count++}`;
  for (const match of text.matchAll(TOKEN)) {
    const index = match.index ?? 0;
    if (index > last) parts.push(text.slice(last, index));
    const [whole, string, colon, literal, number] = match;
    if (string !== undefined) {
      parts.push(
        <span key={nextKey()} class={colon ? 'j-key' : 'j-str'}>
          {string}
        </span>,
      );
      if (colon) parts.push(colon);
    } else if (literal !== undefined) {
      parts.push(
        <span key={nextKey()} class="j-lit">
          {literal}
        </span>,
      );
    } else if (number !== undefined) {
      parts.push(
        <span key={nextKey()} class="j-num">
          {number}
        </span>,
      );
    } else {
      parts.push(whole);
    }
    last = index + whole.length;
  }
  if (last < text.length) parts.push(text.slice(last));
  return parts;
}
