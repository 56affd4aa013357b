import { useEffect, useState } from 'preact/hooks';
import type { Api } from './api.js';
import { pretty } from './format.js';
import { type Change, diffJson, formatPath, jsonPatchOf, pointerOf } from './json-diff.js';
import { JsonTree } from './json-tree.js';

interface DiffViewProps {
  api: Api;
  sessionId: string;
  from: number;
  to: number;
  latestVersion: number;
  onChange: (pair: { from: number; to: number }) => void;
  onError: (error: unknown) => void;
}

/** Any two versions of the session, compared: state and agent config, path by path. */
export function DiffView({ api, sessionId, from, to, latestVersion, onChange, onError }: DiffViewProps) {
  const [draft, setDraft] = useState({ from: String(from), to: String(to) });
  // The changes carry the pair they were computed for: between a new pair's first render and
  // its effect, the old diff is still in state, and must not show under the new pair's title.
  const [diff, setDiff] = useState<{ from: number; to: number; changes: Change[] } | null>(null);
  const changes = diff && diff.from === from && diff.to === to ? diff.changes : null;
  const [invalid, setInvalid] = useState<string | null>(null);

  useEffect(() => setDraft({ from: String(from), to: String(to) }), [from, to]);

  useEffect(() => {
    const controller = new AbortController();
    setDiff(null);
    Promise.all([api.getVersion(sessionId, from, controller.signal), api.getVersion(sessionId, to, controller.signal)])
      .then(([before, after]) =>
        setDiff({ from, to, changes: diffJson({ state: before.state, agent: before.agent }, { state: after.state, agent: after.agent }) }),
      )
      .catch(onError);
    return () => controller.abort();
  }, [api, sessionId, from, to]);

  const submit = (event: Event) => {
    event.preventDefault();
    const next = { from: Number(draft.from), to: Number(draft.to) };
    const valid = (value: number) => Number.isInteger(value) && value >= 0 && value <= latestVersion;
    if (!valid(next.from) || !valid(next.to)) return setInvalid(`Versions go from 0 to ${latestVersion}.`);
    setInvalid(null);
    onChange(next);
  };

  // The state's changes, with paths inside the state (the diff also compares the agent config).
  const stateChanges = changes?.filter((change) => change.path[0] === 'state').map((change) => ({ ...change, path: change.path.slice(1) }));
  const counts = changes && {
    added: changes.filter((change) => change.kind === 'added').length,
    removed: changes.filter((change) => change.kind === 'removed').length,
    changed: changes.filter((change) => change.kind === 'changed').length,
  };

  return (
    <div class="diff">
      <form class="diff-form" onSubmit={submit}>
        <label>
          From version
          <input
            type="number"
            min={0}
            max={latestVersion}
            value={draft.from}
            onInput={(event) => setDraft({ ...draft, from: (event.target as HTMLInputElement).value })}
          />
        </label>
        <label>
          To version
          <input
            type="number"
            min={0}
            max={latestVersion}
            value={draft.to}
            onInput={(event) => setDraft({ ...draft, to: (event.target as HTMLInputElement).value })}
          />
        </label>
        <button type="submit" class="button">
          Compare
        </button>
      </form>
      {invalid && (
        <p class="error" role="alert">
          {invalid}
        </p>
      )}
      <div aria-live="polite" aria-busy={changes === null}>
        {changes === null ? (
          <p class="muted">Comparing…</p>
        ) : changes.length === 0 ? (
          <p class="diff-summary">
            v{from} and v{to} are identical.
          </p>
        ) : (
          <>
            <p class="diff-summary">
              v{from} → v{to}: {changes.length} difference{changes.length === 1 ? '' : 's'}
              <span class="muted">
                {' '}
                ({counts?.added} added, {counts?.removed} removed, {counts?.changed} changed)
              </span>
            </p>
            <ul class="changes">
              {changes.map((change) => (
                <li key={`${change.kind}:${formatPath(change.path)}`} class={`change change-${change.kind}`}>
                  <div class="change-head">
                    <span class={`change-kind kind-${change.kind}`}>{change.kind}</span>
                    <code class="change-path">{formatPath(change.path)}</code>
                    {change.path[0] === 'state' && (
                      <code class="change-pointer muted" title="JSON Pointer in the state">
                        {pointerOf(change.path.slice(1)) || '""'}
                      </code>
                    )}
                  </div>
                  {change.kind !== 'added' && <ChangeValue value={change.before} side="before" />}
                  {change.kind !== 'removed' && <ChangeValue value={change.after} side="after" />}
                </li>
              ))}
            </ul>
            {stateChanges && stateChanges.length > 0 && (
              <details class="json-patch">
                <summary>
                  The state's change as JSON Patch (RFC 6902): {stateChanges.length} operation{stateChanges.length === 1 ? '' : 's'}
                </summary>
                <PatchText changes={stateChanges} />
              </details>
            )}
          </>
        )}
      </div>
    </div>
  );
}

/** Values past this many characters are shown as a collapsed tree: a change may be a whole 4 MiB state. */
const VALUE_TEXT_LIMIT = 20_000;
const PATCH_TEXT_LIMIT = 200_000;

function ChangeValue({ value, side }: { value: unknown; side: 'before' | 'after' }) {
  const text = pretty(value);
  if (text.length > VALUE_TEXT_LIMIT) return <JsonTree value={value} label={side} />;
  return (
    // biome-ignore lint/a11y/useAriaPropsSupportedByRole: names the two sides of a change for a screen reader.
    <pre class={`change-value ${side}`} aria-label={side}>
      {text}
    </pre>
  );
}

/** The changes as the operations that make them, in an order that applies (cut when very long). */
function PatchText({ changes }: { changes: Change[] }) {
  const text = JSON.stringify(jsonPatchOf(changes), null, 2);
  return (
    // biome-ignore lint/a11y/useAriaPropsSupportedByRole: names the operations for a screen reader.
    <pre class="change-value" aria-label="JSON Patch">
      {text.length > PATCH_TEXT_LIMIT ? `${text.slice(0, PATCH_TEXT_LIMIT)}\n… (${text.length - PATCH_TEXT_LIMIT} more characters)` : text}
    </pre>
  );
}
