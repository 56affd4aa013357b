import { useEffect, useRef, useState } from 'preact/hooks';
import { type Api, ApiError, type SessionSummary } from './api.js';
import { fullTime, timeAgo } from './format.js';
import { sessionHref } from './route.js';

const PAGE_SIZE = 50;
/** A prefix only filters a page after it is read (docs/api.md), so a search reads on a while pages come back empty. */
const SEARCH_READS = 10;
const ID_PATTERN = /^[A-Za-z0-9._:~@-]{1,128}$/;

interface ListState {
  sessions: SessionSummary[];
  next: string | undefined;
  loading: boolean;
  error: string | null;
}

/** The tenant's sessions, most recently active first, searchable by the start of their id. */
export function SessionList({ api, onUnauthorized }: { api: Api; onUnauthorized: () => void }) {
  const [query, setQuery] = useState('');
  const [search, setSearch] = useState('');
  const [list, setList] = useState<ListState>({ sessions: [], next: undefined, loading: true, error: null });
  const controller = useRef<AbortController | null>(null);

  // Typing settles for a moment before a search is sent.
  useEffect(() => {
    const timer = setTimeout(() => setSearch(query.trim()), 250);
    return () => clearTimeout(timer);
  }, [query]);

  const load = async (cursor: string | undefined, previous: SessionSummary[]) => {
    controller.current?.abort();
    const current = new AbortController();
    controller.current = current;
    setList((state) => ({ ...state, loading: true, error: null }));
    if (search !== '' && !ID_PATTERN.test(search)) {
      return setList({ sessions: [], next: undefined, loading: false, error: 'Session ids use A–Z a–z 0–9 . _ : ~ @ - only.' });
    }
    try {
      const found = [...previous];
      let next = cursor;
      let reads = 0;
      do {
        const page = await api.listSessions(
          { limit: PAGE_SIZE, ...(next ? { cursor: next } : {}), ...(search ? { prefix: search } : {}) },
          current.signal,
        );
        found.push(...page.items);
        next = page.next;
        reads += 1;
      } while (search && next && found.length - previous.length < PAGE_SIZE && reads < SEARCH_READS);
      setList({ sessions: found, next, loading: false, error: null });
    } catch (error) {
      if ((error as Error).name === 'AbortError') return;
      if (error instanceof ApiError && error.status === 401) return onUnauthorized();
      setList((state) => ({ ...state, loading: false, error: (error as Error).message }));
    }
  };

  useEffect(() => {
    void load(undefined, []);
    return () => controller.current?.abort();
  }, [search]);

  return (
    <main class="page">
      <div class="page-head">
        <h1>Sessions</h1>
        <div class="search">
          <label for="session-search">Search by session id</label>
          <input
            id="session-search"
            type="search"
            placeholder="Start of a session id"
            autoComplete="off"
            spellcheck={false}
            value={query}
            onInput={(event) => setQuery((event.target as HTMLInputElement).value)}
          />
        </div>
      </div>
      {list.error && (
        <p class="error" role="alert">
          {list.error}
        </p>
      )}
      <div class="card table-card">
        <table class="sessions" aria-busy={list.loading}>
          <caption class="visually-hidden">Sessions, most recently active first</caption>
          <thead>
            <tr>
              <th scope="col">Session</th>
              <th scope="col">Agent</th>
              <th scope="col">User</th>
              <th scope="col">Last active</th>
              <th scope="col">Created</th>
            </tr>
          </thead>
          <tbody>
            {list.sessions.map((session) => (
              <tr key={session.sessionId}>
                <th scope="row">
                  <a class="mono" href={sessionHref(session.sessionId)}>
                    {session.sessionId}
                  </a>
                </th>
                <td>{session.agentId ?? <span class="muted">—</span>}</td>
                <td>{session.userId ?? <span class="muted">—</span>}</td>
                <td title={fullTime(session.updatedAt)}>{timeAgo(session.updatedAt)}</td>
                <td title={fullTime(session.createdAt)}>{timeAgo(session.createdAt)}</td>
              </tr>
            ))}
          </tbody>
        </table>
        {!list.loading && list.sessions.length === 0 && !list.error && (
          <p class="empty">{search ? `No session id starts with “${search}”.` : 'No sessions yet.'}</p>
        )}
        <div class="table-foot" aria-live="polite">
          {list.loading ? (
            <span class="muted">Loading…</span>
          ) : list.next ? (
            <button type="button" class="button" onClick={() => void load(list.next, list.sessions)}>
              {search ? 'Search further' : 'Load more'}
            </button>
          ) : (
            list.sessions.length > 0 && <span class="muted">{list.sessions.length} shown · end of list</span>
          )}
        </div>
      </div>
    </main>
  );
}
