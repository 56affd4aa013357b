import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import type { Api, StateView, TreeNode, Version } from './api.js';
import { DiffView } from './diff-view.js';
import { fullTime, timeAgo } from './format.js';
import { JsonTree, TREE_FROM_BYTES } from './json-tree.js';
import { JsonView } from './json-view.js';

const LINEAGE_PAGE = 25;
const TABS = [
  { id: 'state', label: 'State' },
  { id: 'agent', label: 'Agent config' },
  { id: 'lineage', label: 'Lineage' },
  { id: 'diff', label: 'Diff' },
] as const;
type TabId = (typeof TABS)[number]['id'];

interface NodePanelProps {
  api: Api;
  sessionId: string;
  node: TreeNode;
  isHead: boolean;
  latestVersion: number;
  /** Changes when the session may have changed: reread. */
  revision: number;
  onMakeHead: (nodeId: string) => Promise<void>;
  onError: (error: unknown) => void;
}

/** The selected node: its state, agent config, version lineage, and a diff of any two versions. */
export function NodePanel({ api, sessionId, node, isHead, latestVersion, revision, onMakeHead, onError }: NodePanelProps) {
  const [tab, setTab] = useState<TabId>('state');
  const [view, setView] = useState<StateView | null>(null);
  const [lineage, setLineage] = useState<{ items: Version[]; next?: string; prunedBefore?: number; loading: boolean }>({
    items: [],
    loading: true,
  });
  const [pair, setPair] = useState<{ from: number; to: number } | null>(null);
  const [switching, setSwitching] = useState(false);
  const tabRefs = useRef<Record<string, HTMLButtonElement | null>>({});

  // State and the first page of lineage, shortly after the selection settles (arrowing through
  // the tree should not send a read per row passed).
  useEffect(() => {
    const controller = new AbortController();
    const timer = setTimeout(async () => {
      try {
        const [state, page] = await Promise.all([
          api.getState(sessionId, node.id, controller.signal),
          api.listLineage(sessionId, node.id, { limit: LINEAGE_PAGE }, controller.signal),
        ]);
        setView(state);
        setLineage({ ...page, loading: false });
      } catch (error) {
        onError(error);
      }
    }, 120);
    return () => {
      clearTimeout(timer);
      controller.abort();
    };
  }, [api, sessionId, node.id, node.stateVersion, revision]);

  // A new node: compare its version with the one before it, until the user picks others.
  useEffect(() => setPair(null), [node.id]);
  const current = lineage.items[0];
  const defaultPair =
    current && current.version === node.stateVersion
      ? { from: current.prevVersion, to: current.version }
      : { from: 0, to: node.stateVersion };
  const shownPair = pair ?? defaultPair;

  const loadOlder = async () => {
    if (!lineage.next) return;
    setLineage((state) => ({ ...state, loading: true }));
    try {
      const page = await api.listLineage(sessionId, node.id, { limit: LINEAGE_PAGE, cursor: lineage.next });
      setLineage((state) => ({
        items: [...state.items, ...page.items],
        ...(page.next ? { next: page.next } : {}),
        // The newest cut: the first page that found one says it.
        ...((state.prunedBefore ?? page.prunedBefore) !== undefined ? { prunedBefore: state.prunedBefore ?? page.prunedBefore } : {}),
        loading: false,
      }));
    } catch (error) {
      onError(error);
    }
  };

  const onTabKey = (event: KeyboardEvent) => {
    const index = TABS.findIndex((entry) => entry.id === tab);
    const step = event.key === 'ArrowRight' ? 1 : event.key === 'ArrowLeft' ? -1 : 0;
    const target =
      event.key === 'Home' ? 0 : event.key === 'End' ? TABS.length - 1 : step ? (index + step + TABS.length) % TABS.length : -1;
    if (target < 0) return;
    event.preventDefault();
    const next = TABS[target] as (typeof TABS)[number];
    setTab(next.id);
    tabRefs.current[next.id]?.focus();
  };

  const stale = view && view.node !== node.id;
  // Measured once per state read: a state this large is drawn as a collapsed tree.
  const stateBytes = useMemo(() => (view ? new TextEncoder().encode(JSON.stringify(view.state)).length : 0), [view]);
  const isRoot = node.parentId === null;

  return (
    <section class="card node-panel" aria-labelledby="node-title">
      <div class="node-head">
        <div class="node-title-line">
          <span class={`role role-${(isRoot ? 'root' : (node.role ?? '')).replace(/[^\w-]/g, '')}`}>{isRoot ? 'root' : node.role}</span>
          <h2 id="node-title" class="mono">
            {node.id}
          </h2>
          {isHead && <span class="badge badge-head">HEAD</span>}
        </div>
        {node.preview && <p class="node-preview">{node.preview}</p>}
        <div class="node-actions">
          <span class="muted">
            State version <strong>{node.stateVersion}</strong>
            {view?.updatedAt ? <> · written {timeAgo(view.updatedAt)}</> : null}
          </span>
          <button
            type="button"
            class="button"
            disabled={isHead || switching}
            onClick={async () => {
              setSwitching(true);
              await onMakeHead(node.id);
              setSwitching(false);
            }}
          >
            {isHead ? 'This is the head' : 'Make head'}
          </button>
        </div>
      </div>
      <div class="tabs" role="tablist" aria-label="Node details" onKeyDown={onTabKey}>
        {TABS.map((entry) => (
          <button
            key={entry.id}
            ref={(element) => {
              tabRefs.current[entry.id] = element;
            }}
            type="button"
            role="tab"
            id={`tab-${entry.id}`}
            aria-controls={`panel-${entry.id}`}
            aria-selected={tab === entry.id}
            tabIndex={tab === entry.id ? 0 : -1}
            class="tab"
            onClick={() => setTab(entry.id)}
          >
            {entry.label}
          </button>
        ))}
      </div>
      <div class="tab-panel" role="tabpanel" id={`panel-${tab}`} aria-labelledby={`tab-${tab}`} aria-busy={!view || Boolean(stale)}>
        {tab === 'state' &&
          (view && !stale ? (
            <>
              <p class="panel-note muted">
                The state this node reads: version {view.version}
                {view.version === 0 ? ' (nothing written yet)' : ''}.
              </p>
              {stateBytes > TREE_FROM_BYTES ? (
                <>
                  <p class="panel-note muted">A large state ({formatBytes(stateBytes)}): shown collapsed; open what you need.</p>
                  <JsonTree value={view.state} label={`State at node ${node.id}`} />
                </>
              ) : (
                <JsonView value={view.state} label={`State at node ${node.id}`} />
              )}
            </>
          ) : (
            <p class="muted">Loading…</p>
          ))}
        {tab === 'agent' &&
          (view && !stale ? <JsonView value={view.agent} label={`Agent config at node ${node.id}`} /> : <p class="muted">Loading…</p>)}
        {tab === 'lineage' && (
          <Lineage
            items={lineage.items}
            {...(lineage.prunedBefore !== undefined ? { prunedBefore: lineage.prunedBefore } : {})}
            hasMore={Boolean(lineage.next)}
            loading={lineage.loading}
            onLoadOlder={loadOlder}
            onCompare={(from, to) => {
              setPair({ from, to });
              setTab('diff');
            }}
          />
        )}
        {tab === 'diff' && (
          <DiffView
            api={api}
            sessionId={sessionId}
            from={shownPair.from}
            to={shownPair.to}
            latestVersion={latestVersion}
            onChange={setPair}
            onError={onError}
          />
        )}
      </div>
    </section>
  );
}

function Lineage(props: {
  items: Version[];
  /** The session's retention cut the lineage below this version. */
  prunedBefore?: number;
  hasMore: boolean;
  loading: boolean;
  onLoadOlder: () => void;
  onCompare: (from: number, to: number) => void;
}) {
  if (props.items.length === 0)
    return <p class="muted">{props.loading ? 'Loading…' : 'No version was written on the way to this node.'}</p>;
  return (
    <>
      <p class="panel-note muted">The versions this node's state was built from, newest first.</p>
      <ol class="lineage">
        {props.items.flatMap((version) => [
          <li key={version.version} class="lineage-item">
            <span class="version">v{version.version}</span>
            <span class="lineage-what">
              <span class="cause">{version.cause}</span> at <span class="mono">{version.node}</span>
              {version.author ? <> by {version.author}</> : null}
              <span class="muted" title={fullTime(version.createdAt)}>
                {' '}
                · {timeAgo(version.createdAt)}
              </span>
            </span>
            <button type="button" class="button small" onClick={() => props.onCompare(version.prevVersion, version.version)}>
              Diff v{version.prevVersion} → v{version.version}
            </button>
          </li>,
          ...(version.version === props.prunedBefore
            ? [
                <li key={`pruned-${version.version}`} class="lineage-pruned muted" data-testid="lineage-pruned">
                  History pruned below v{version.version} by the session's retention: older versions may be missing (those a node points at
                  are kept).
                </li>,
              ]
            : []),
        ])}
      </ol>
      {props.hasMore && (
        <button type="button" class="button" disabled={props.loading} onClick={props.onLoadOlder}>
          {props.loading ? 'Loading…' : 'Load older versions'}
        </button>
      )}
    </>
  );
}

function formatBytes(bytes: number): string {
  return bytes >= 1024 * 1024 ? `${(bytes / 1024 / 1024).toFixed(1)} MiB` : `${Math.round(bytes / 1024)} KiB`;
}
