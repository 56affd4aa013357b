import { useCallback, useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { Api, ApiError, type DecisionSummary, type Session, type StateChangedEvent, type TreeNode } from './api.js';
import { fullTime, timeAgo } from './format.js';
import { followSession, type LiveStatus } from './live.js';
import { NodePanel } from './node-panel.js';
import { sessionHref } from './route.js';
import { layoutTree } from './tree-layout.js';
import { TreeView } from './tree-view.js';

interface SessionViewProps {
  api: Api;
  apiKey: string;
  sessionId: string;
  /** From the address; null: the head. */
  nodeId: string | null;
  onUnauthorized: () => void;
}

/**
 * Appends and head moves record no version and so send no event (docs/api.md, change events):
 * a light check of the session (head, version) notices them while the tab is visible.
 */
const STRUCTURE_CHECK_MS = 5000;
const FEED_LENGTH = 30;

/** One session: its tree on the left, the selected node on the right, live changes below. */
export function SessionView({ api, apiKey, sessionId, nodeId, onUnauthorized }: SessionViewProps) {
  const [session, setSession] = useState<Session | null>(null);
  const [tree, setTree] = useState<{ head: string; nodes: TreeNode[] } | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [live, setLive] = useState<LiveStatus>('connecting');
  const [feed, setFeed] = useState<StateChangedEvent[]>([]);
  const [notice, setNotice] = useState<string | null>(null);
  // Bumped whenever something may have changed, so the node panel rereads.
  const [revision, setRevision] = useState(0);
  const known = useRef<{ head: string; version: number } | null>(null);

  // Through a ref: a new callback from the parent must not count as a new session to load.
  const unauthorized = useRef(onUnauthorized);
  unauthorized.current = onUnauthorized;
  const fail = useCallback((failure: unknown) => {
    if ((failure as Error).name === 'AbortError') return;
    if (failure instanceof ApiError && failure.status === 401) return unauthorized.current();
    setError((failure as Error).message);
  }, []);

  const reload = useCallback(async () => {
    try {
      const [nextSession, nextTree] = await Promise.all([api.getSession(sessionId), api.getTree(sessionId)]);
      known.current = { head: nextSession.head, version: nextSession.version };
      setSession(nextSession);
      setTree(nextTree);
      setRevision((value) => value + 1);
      setError(null);
    } catch (failure) {
      fail(failure);
    }
  }, [api, sessionId, fail]);

  useEffect(() => {
    setSession(null);
    setTree(null);
    setFeed([]);
    known.current = null;
    void reload();
  }, [reload]);

  // Live: every state.changed event of this session; the tree and the open node are reread.
  useEffect(() => {
    let stop: (() => void) | undefined;
    let cancelled = false;
    let debounce: ReturnType<typeof setTimeout> | undefined;
    const rereadSoon = () => {
      clearTimeout(debounce);
      debounce = setTimeout(() => void reload(), 150);
    };
    Api.config()
      .then(({ webSocketUrl }) => {
        if (cancelled) return;
        stop = followSession({
          webSocketUrl,
          apiKey,
          sessionId,
          onStatus: setLive,
          onEvent: (event) => {
            setFeed((events) => (events.some((seen) => seen.id === event.id) ? events : [event, ...events].slice(0, FEED_LENGTH)));
            rereadSoon();
          },
          onResubscribed: rereadSoon,
        });
      })
      .catch(() => setLive('offline'));
    return () => {
      cancelled = true;
      clearTimeout(debounce);
      stop?.();
    };
  }, [apiKey, sessionId, reload]);

  useEffect(() => {
    const timer = setInterval(async () => {
      if (document.visibilityState !== 'visible' || !known.current) return;
      try {
        const current = await api.getSession(sessionId);
        if (current.head !== known.current.head || current.version !== known.current.version) await reload();
      } catch {
        // The next check tries again; a real failure shows on the next action.
      }
    }, STRUCTURE_CHECK_MS);
    return () => clearInterval(timer);
  }, [api, sessionId, reload]);

  const rows = useMemo(() => (tree ? layoutTree(tree.nodes, tree.head) : []), [tree]);
  const selectedId = nodeId ?? tree?.head ?? null;
  const selected = useMemo(() => tree?.nodes.find((node) => node.id === selectedId) ?? null, [tree, selectedId]);
  // Replaces the address rather than adding to history: arrowing through a tree is not navigation.
  const select = useCallback((id: string) => location.replace(sessionHref(sessionId, id)), [sessionId]);

  const makeHead = async (id: string) => {
    try {
      await api.setHead(sessionId, id);
      setNotice(`The head is now ${id}.`);
      await reload();
    } catch (failure) {
      fail(failure);
    }
  };

  const forks = rows.filter((row) => row.branches > 0).length;

  return (
    <main class="session-page">
      <div class="session-head">
        <div>
          <a class="back" href="#/">
            ← Sessions
          </a>
          <h1 class="mono" title={sessionId}>
            {sessionId}
          </h1>
          {session && (
            <dl class="facts">
              <div>
                <dt>Agent</dt>
                <dd>{session.agentId ?? '—'}</dd>
              </div>
              <div>
                <dt>User</dt>
                <dd>{session.userId ?? '—'}</dd>
              </div>
              <div>
                <dt>Head</dt>
                <dd>
                  <a class="mono" href={sessionHref(sessionId, session.head)}>
                    {session.head}
                  </a>
                </dd>
              </div>
              <div>
                <dt>Version</dt>
                <dd data-testid="session-version">{session.version}</dd>
              </div>
              <div>
                <dt>Expires</dt>
                <dd data-testid="session-expires" title={expiryTitle(session)}>
                  {session.expiresAt ? timeAgo(session.expiresAt) : 'never'}
                </dd>
              </div>
              <div>
                <dt>History</dt>
                <dd data-testid="session-retention" title={retentionTitle(session)}>
                  {retentionText(session)}
                </dd>
              </div>
              <div>
                <dt>Nodes</dt>
                <dd>
                  {rows.length}
                  {forks > 0 ? ` · ${forks} fork${forks === 1 ? '' : 's'}` : ''}
                </dd>
              </div>
              <div>
                <dt>Last active</dt>
                <dd title={fullTime(session.updatedAt)}>{timeAgo(session.updatedAt)}</dd>
              </div>
            </dl>
          )}
        </div>
        <LiveBadge status={live} />
      </div>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      <p class="visually-hidden" role="status">
        {notice}
      </p>
      <div class="session-body">
        <section class="card tree-card" aria-labelledby="tree-title">
          <div class="card-head">
            <h2 id="tree-title">Message tree</h2>
            <span class="legend muted" aria-hidden="true">
              <span class="legend-dot on" /> head's branch <span class="legend-dot" /> other branches
            </span>
          </div>
          {tree ? <TreeView rows={rows} selectedId={selectedId} onSelect={select} /> : <p class="empty">Loading…</p>}
        </section>
        <div class="side">
          {selected && session ? (
            <NodePanel
              api={api}
              sessionId={sessionId}
              node={selected}
              isHead={tree?.head === selected.id}
              latestVersion={session.version}
              revision={revision}
              onMakeHead={makeHead}
              onError={fail}
            />
          ) : (
            tree && <p class="card empty">{selectedId ? `No node ${selectedId} in this session.` : ''}</p>
          )}
          <Decisions api={api} sessionId={sessionId} revision={revision} onError={fail} />
          <LiveFeed events={feed} sessionId={sessionId} />
        </div>
      </div>
    </main>
  );
}

/** How many of the latest decisions the card shows. */
const DECISIONS_SHOWN = 20;

/** Which agent decided each turn, and why: the session agent itself, a route, or a handoff. */
function Decisions({
  api,
  sessionId,
  revision,
  onError,
}: {
  api: Api;
  sessionId: string;
  revision: number;
  onError: (failure: unknown) => void;
}) {
  const [decisions, setDecisions] = useState<DecisionSummary[] | null>(null);
  useEffect(() => {
    const controller = new AbortController();
    api.listDecisions(sessionId, DECISIONS_SHOWN, controller.signal).then(setDecisions, onError);
    return () => controller.abort();
  }, [api, sessionId, revision, onError]);
  return (
    <section class="card decisions" aria-labelledby="decisions-title">
      <div class="card-head">
        <h2 id="decisions-title">Decisions</h2>
      </div>
      <ol class="feed-list">
        {decisions === null && <li class="muted">Loading…</li>}
        {decisions?.length === 0 && <li class="muted">No decision was made in this session yet.</li>}
        {decisions?.map((decision) => (
          <li key={decision.decisionId} class="feed-item decision-item">
            <span>
              <span class="version">v{decision.version}</span> <span class="mono">{decision.agentId ?? 'no agent'}</span>
              <span class="why">{` decided${whyDecided(decision)}`}</span>
            </span>
            <span class="muted" title={fullTime(decision.createdAt)}>
              {timeAgo(decision.createdAt)}
            </span>
          </li>
        ))}
      </ol>
    </section>
  );
}

/** Why the deciding agent decided, in words: its own session, or each hop that led to it. */
function whyDecided(decision: Pick<DecisionSummary, 'routing'>): string {
  if (decision.routing.length === 0) return " (the session's agent)";
  const hops = decision.routing.map((hop) =>
    hop.via === 'route' ? `${hop.from} routed it (route ${hop.index})` : `${hop.from} handed it off${hop.reason ? `: ${hop.reason}` : ''}`,
  );
  return `: ${hops.join(', then ')}`;
}

function LiveBadge({ status }: { status: LiveStatus }) {
  const text = { connecting: 'Connecting…', live: 'Live', reconnecting: 'Reconnecting…', offline: 'Offline' }[status];
  return (
    <span class={`live-badge live-${status}`} role="status" aria-label={`Live updates: ${text}`}>
      <span class="live-dot" aria-hidden="true" />
      {text}
    </span>
  );
}

function LiveFeed({ events, sessionId }: { events: StateChangedEvent[]; sessionId: string }) {
  return (
    <section class="card feed" aria-labelledby="feed-title">
      <div class="card-head">
        <h2 id="feed-title">Live changes</h2>
      </div>
      <ol class="feed-list" aria-live="polite" aria-relevant="additions">
        {events.length === 0 && <li class="muted">Changes to this session appear here as they happen.</li>}
        {events.map((event) => (
          <li key={event.id} class="feed-item">
            <a href={sessionHref(sessionId, event.node)}>
              <span class="version">v{event.version}</span> <span class="cause">{event.cause}</span> at{' '}
              <span class="mono">{event.node}</span>
              {event.author ? ` by ${event.author}` : ''}
            </a>
            <span class="muted" title={fullTime(event.occurredAt)}>
              {timeAgo(event.occurredAt)}
            </span>
          </li>
        ))}
      </ol>
    </section>
  );
}

/** What a session's expiry is made of, for the title of its "Expires" (docs/api.md §2a). */
function expiryTitle(session: Session): string {
  if (!session.expiresAt) return 'kept until deleted';
  const idle = session.ttlSeconds === null ? '' : `, ${session.ttlSeconds} s after its last write`;
  return `${fullTime(session.expiresAt)}${idle}`;
}

/** What the session's retention keeps, in a few words (every version when it has none). */
function retentionText(session: Session): string {
  const retention = session.retention;
  if (!retention) return 'every version';
  const windows = [
    ...(retention.keepVersions !== undefined ? [`newest ${retention.keepVersions}`] : []),
    ...(retention.keepDays !== undefined ? [`${retention.keepDays} d`] : []),
  ];
  return windows.length > 0 ? `keeps ${windows.join(' + ')}` : 'keeps what nodes point at';
}

function retentionTitle(session: Session): string {
  if (!session.retention) return 'No retention: every version is kept until the session is deleted or expires';
  return 'Older versions are pruned; every version a node or the head points at is kept';
}
