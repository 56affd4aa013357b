import { useState } from 'preact/hooks';

/**
 * A JSON value as a tree that draws only what is open: the top level at first, each object
 * or array collapsed until clicked, their members a page of ENTRIES_PAGE at a time, and long
 * strings cut at STRING_PREVIEW characters until asked for whole. A 4 MiB state opens as a
 * handful of rows, however many entries its arrays have.
 */

const ENTRIES_PAGE = 100;
const STRING_PREVIEW = 400;

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** Bytes past which a value is shown as a tree rather than as pretty-printed text. */
export const TREE_FROM_BYTES = 100_000;

export function JsonTree({ value, label }: { value: unknown; label: string }) {
  return (
    // biome-ignore lint/a11y/noNoninteractiveTabindex: a scrollable region, named, as JsonView's.
    // biome-ignore lint/a11y/useAriaPropsSupportedByRole: see above.
    <div class="json json-tree" tabIndex={0} aria-label={label}>
      <Entry name={null} value={value as Json} open />
    </div>
  );
}

function isContainer(value: Json): value is Json[] | { [key: string]: Json } {
  return typeof value === 'object' && value !== null;
}

function Entry({ name, value, open = false }: { name: string | null; value: Json; open?: boolean }) {
  const [expanded, setExpanded] = useState(open);
  const key =
    name === null ? null : (
      <>
        <span class="j-key">{name}</span>:{' '}
      </>
    );
  if (!isContainer(value)) {
    return (
      <div class="tree-row">
        {key}
        <Scalar value={value} />
      </div>
    );
  }
  const entries = Array.isArray(value) ? value.length : Object.keys(value).length;
  const [openMark, closeMark] = Array.isArray(value) ? ['[', ']'] : ['{', '}'];
  const summary = `${entries} ${Array.isArray(value) ? (entries === 1 ? 'item' : 'items') : entries === 1 ? 'key' : 'keys'}`;
  return (
    <div class="tree-node">
      <button type="button" class="tree-toggle" aria-expanded={expanded} onClick={() => setExpanded(!expanded)}>
        <span class="tree-caret" aria-hidden="true">
          {expanded ? '▾' : '▸'}
        </span>
        {key}
        {openMark}
        {expanded ? '' : ` ${summary} ${closeMark}`}
      </button>
      {expanded && <Members value={value} />}
      {expanded && <div class="tree-row">{closeMark}</div>}
    </div>
  );
}

function Members({ value }: { value: Json[] | { [key: string]: Json } }) {
  const [shown, setShown] = useState(ENTRIES_PAGE);
  const names = Array.isArray(value) ? null : Object.keys(value);
  const total = names ? names.length : (value as Json[]).length;
  const rows = [];
  for (let index = 0; index < Math.min(shown, total); index += 1) {
    const name = names ? (names[index] as string) : String(index);
    const member = names ? (value as { [key: string]: Json })[name] : (value as Json[])[index];
    rows.push(<Entry key={name} name={names ? JSON.stringify(name) : name} value={member as Json} />);
  }
  return (
    <div class="tree-members">
      {rows}
      {shown < total && (
        <button type="button" class="button small tree-more" onClick={() => setShown(shown + ENTRIES_PAGE)}>
          Show {Math.min(ENTRIES_PAGE, total - shown)} more of {total - shown}
        </button>
      )}
    </div>
  );
}

function Scalar({ value }: { value: null | boolean | number | string }) {
  const [whole, setWhole] = useState(false);
  if (typeof value !== 'string') {
    return <span class={typeof value === 'number' ? 'j-num' : 'j-lit'}>{String(value)}</span>;
  }
  const text = JSON.stringify(value);
  if (whole || text.length <= STRING_PREVIEW) return <span class="j-str">{text}</span>;
  return (
    <>
      <span class="j-str">{text.slice(0, STRING_PREVIEW)}…</span>{' '}
      <button type="button" class="button small" onClick={() => setWhole(true)}>
        {(text.length - STRING_PREVIEW).toLocaleString()} more characters
      </button>
    </>
  );
}
