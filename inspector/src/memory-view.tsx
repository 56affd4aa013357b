import { useEffect, useRef, useState } from 'preact/hooks';
import { type Api, ApiError, type MemoryItem, type Page } from './api.js';
import { fullTime, timeAgo } from './format.js';
import { JsonView } from './json-view.js';
import { memoryHref } from './route.js';

const SEARCH_PAGE = 25;
const VERSIONS_PAGE = 10;

interface Listing<T> {
  items: T[];
  next: string | undefined;
  loading: boolean;
  error: string | null;
}

const empty = <T,>(): Listing<T> => ({ items: [], next: undefined, loading: true, error: null });

/**
 * Memory items (docs/api.md §7c): the namespaces under the one open (`GET /v1/memory`), a
 * search of it and everything below it with a filter (`POST /v1/memory/search`), and an item
 * with its versions, newest first (`GET /v1/memory/versions`).
 */
export function MemoryView(props: { api: Api; namespace: string[]; itemKey: string | null; onUnauthorized: () => void }) {
  const { api, namespace, itemKey, onUnauthorized } = props;
  const path = namespace.join('/');
  const fail = (error: unknown, set: (message: string) => void) => {
    if ((error as Error).name === 'AbortError') return;
    if (error instanceof ApiError && error.status === 401) return onUnauthorized();
    set((error as Error).message);
  };

  return (
    <main class="page memory-page">
      <div class="page-head">
        <div>
          <h1>Memory</h1>
          <nav class="crumbs" aria-label="Namespace">
            <a href={memoryHref([])}>all namespaces</a>
            {namespace.map((id, index) => (
              <span key={namespace.slice(0, index + 1).join('/')}>
                {' / '}
                <a class="mono" href={memoryHref(namespace.slice(0, index + 1))}>
                  {id}
                </a>
              </span>
            ))}
          </nav>
        </div>
      </div>
      <div class="session-body">
        <div class="side">
          <Namespaces key={`ns:${path}`} api={api} namespace={namespace} fail={fail} />
          <Search key={`search:${path}`} api={api} namespace={namespace} selected={itemKey} fail={fail} />
        </div>
        <div class="side">
          {itemKey && namespace.length > 0 ? (
            <ItemPanel key={`item:${path}:${itemKey}`} api={api} namespace={namespace} itemKey={itemKey} fail={fail} />
          ) : (
            <p class="card empty">Open an item of the search to see its value and versions.</p>
          )}
        </div>
      </div>
    </main>
  );
}

type Fail = (error: unknown, set: (message: string) => void) => void;

/** The namespaces one level below the open one (those that hold items, there or deeper). */
function Namespaces({ api, namespace, fail }: { api: Api; namespace: string[]; fail: Fail }) {
  const [list, setList] = useState<Listing<string[]>>(empty);
  const controller = useRef<AbortController | null>(null);
  const load = async (cursor: string | undefined, previous: string[][]) => {
    controller.current?.abort();
    const current = new AbortController();
    controller.current = current;
    setList((state) => ({ ...state, loading: true, error: null }));
    try {
      const page = await api.listNamespaces(
        { prefix: namespace, maxDepth: Math.min(namespace.length + 1, 8), ...(cursor ? { cursor } : {}) },
        current.signal,
      );
      const children = page.items.filter((each) => each.length > namespace.length);
      setList({ items: [...previous, ...children], next: page.next, loading: false, error: null });
    } catch (error) {
      fail(error, (message) => setList((state) => ({ ...state, loading: false, error: message })));
    }
  };
  useEffect(() => {
    void load(undefined, []);
    return () => controller.current?.abort();
  }, []);

  return (
    <section class="card" aria-labelledby="namespaces-title">
      <div class="card-head">
        <h2 id="namespaces-title">Namespaces</h2>
      </div>
      {list.error && (
        <p class="error" role="alert">
          {list.error}
        </p>
      )}
      <ul class="namespace-list" aria-busy={list.loading}>
        {list.items.map((child) => (
          <li key={child.join('/')}>
            <a class="mono" href={memoryHref(child)}>
              {child.join('/')}
            </a>
          </li>
        ))}
      </ul>
      {!list.loading && list.items.length === 0 && !list.error && <p class="empty">No namespaces below this one.</p>}
      {list.next && (
        <div class="table-foot">
          <button type="button" class="button" onClick={() => void load(list.next, list.items)}>
            More namespaces
          </button>
        </div>
      )}
    </section>
  );
}

/** Items of the open namespace and below, newest first, with an optional filter (JSON). */
function Search({ api, namespace, selected, fail }: { api: Api; namespace: string[]; selected: string | null; fail: Fail }) {
  const [filterText, setFilterText] = useState('');
  const [list, setList] = useState<Listing<MemoryItem>>(empty);
  const controller = useRef<AbortController | null>(null);

  const run = async (cursor: string | undefined, previous: MemoryItem[]) => {
    let filter: unknown;
    if (filterText.trim() !== '') {
      try {
        filter = JSON.parse(filterText);
      } catch (error) {
        return setList({ items: [], next: undefined, loading: false, error: `The filter is not JSON: ${(error as Error).message}` });
      }
    }
    controller.current?.abort();
    const current = new AbortController();
    controller.current = current;
    setList((state) => ({ ...state, loading: true, error: null }));
    try {
      const page: Page<MemoryItem> = await api.searchMemory(
        { namespacePrefix: namespace, limit: SEARCH_PAGE, ...(filter === undefined ? {} : { filter }), ...(cursor ? { cursor } : {}) },
        current.signal,
      );
      setList({ items: [...previous, ...page.items], next: page.next, loading: false, error: null });
    } catch (error) {
      fail(error, (message) => setList({ items: [], next: undefined, loading: false, error: message }));
    }
  };
  useEffect(() => {
    void run(undefined, []);
    return () => controller.current?.abort();
  }, []);

  return (
    <section class="card table-card" aria-labelledby="search-title">
      <div class="card-head">
        <h2 id="search-title">Items</h2>
        <span class="muted">newest first, here and below</span>
      </div>
      <form
        class="memory-filter"
        onSubmit={(event) => {
          event.preventDefault();
          void run(undefined, []);
        }}
      >
        <label for="memory-filter">Filter (JSON)</label>
        <textarea
          id="memory-filter"
          rows={2}
          spellcheck={false}
          placeholder='{"topic": "travel", "score": {"$gte": 0.5}}'
          value={filterText}
          onInput={(event) => setFilterText((event.target as HTMLTextAreaElement).value)}
        />
        <button type="submit" class="button primary">
          Search
        </button>
      </form>
      {list.error && (
        <p class="error" role="alert">
          {list.error}
        </p>
      )}
      <table class="sessions" aria-busy={list.loading}>
        <caption class="visually-hidden">Memory items, newest first</caption>
        <thead>
          <tr>
            <th scope="col">Key</th>
            <th scope="col">Namespace</th>
            <th scope="col">Version</th>
            <th scope="col">Updated</th>
          </tr>
        </thead>
        <tbody>
          {list.items.map((item) => (
            <tr key={`${item.namespace.join('/')}/${item.key}`} aria-current={selected === item.key ? 'true' : undefined}>
              <th scope="row">
                <a class="mono" href={memoryHref(item.namespace, item.key)}>
                  {item.key}
                </a>
              </th>
              <td class="mono">{item.namespace.join('/')}</td>
              <td>{item.version}</td>
              <td title={fullTime(item.updatedAt)}>{timeAgo(item.updatedAt)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {!list.loading && list.items.length === 0 && !list.error && <p class="empty">No items match.</p>}
      <div class="table-foot" aria-live="polite">
        {list.loading ? (
          <span class="muted">Searching…</span>
        ) : list.next ? (
          <button type="button" class="button" onClick={() => void run(list.next, list.items)}>
            More items
          </button>
        ) : (
          list.items.length > 0 && <span class="muted">{list.items.length} shown · end of results</span>
        )}
      </div>
    </section>
  );
}

/** One item: its value, and its versions newest first (the live one, then those it replaced). */
function ItemPanel({ api, namespace, itemKey, fail }: { api: Api; namespace: string[]; itemKey: string; fail: Fail }) {
  const [versions, setVersions] = useState<Listing<MemoryItem>>(empty);
  const [shown, setShown] = useState<number | null>(null);
  const controller = useRef<AbortController | null>(null);
  const load = async (cursor: string | undefined, previous: MemoryItem[]) => {
    controller.current?.abort();
    const current = new AbortController();
    controller.current = current;
    setVersions((state) => ({ ...state, loading: true, error: null }));
    try {
      const page = await api.listMemoryVersions(
        namespace,
        itemKey,
        { limit: VERSIONS_PAGE, ...(cursor ? { cursor } : {}) },
        current.signal,
      );
      setVersions({ items: [...previous, ...page.items], next: page.next, loading: false, error: null });
    } catch (error) {
      const absent = error instanceof ApiError && error.status === 404;
      fail(error, (message) =>
        setVersions({
          items: [],
          next: undefined,
          loading: false,
          error: absent ? `No item ${itemKey} in ${namespace.join('/')}.` : message,
        }),
      );
    }
  };
  useEffect(() => {
    void load(undefined, []);
    return () => controller.current?.abort();
  }, []);

  const item = versions.items[0];
  const picked = versions.items.find((each) => each.version === shown) ?? item;
  return (
    <section class="card" aria-labelledby="item-title">
      <div class="node-head">
        <h2 id="item-title" class="mono">
          {itemKey}
        </h2>
        {item && (
          <dl class="facts">
            <div>
              <dt>Namespace</dt>
              <dd class="mono">{item.namespace.join('/')}</dd>
            </div>
            <div>
              <dt>Version</dt>
              <dd data-testid="item-version">{item.version}</dd>
            </div>
            <div>
              <dt>Created</dt>
              <dd title={fullTime(item.createdAt)}>{timeAgo(item.createdAt)}</dd>
            </div>
            <div>
              <dt>Updated</dt>
              <dd title={fullTime(item.updatedAt)}>{timeAgo(item.updatedAt)}</dd>
            </div>
            <div>
              <dt>Expires</dt>
              <dd title={item.expiresAt ? fullTime(item.expiresAt) : undefined}>{item.expiresAt ? fullTime(item.expiresAt) : 'never'}</dd>
            </div>
          </dl>
        )}
      </div>
      {versions.error && (
        <p class="error" role="alert">
          {versions.error}
        </p>
      )}
      {picked && (
        <div class="tab-panel">
          <p class="panel-note muted">{picked === item ? 'The current value' : `Version ${picked.version}, replaced later`}</p>
          <JsonView value={picked.value} label={`Value of ${itemKey} at version ${picked.version}`} />
        </div>
      )}
      {item && (
        <div class="tab-panel">
          <h3 class="panel-note">Versions</h3>
          <ol class="lineage" aria-label={`Versions of ${itemKey}`}>
            {versions.items.map((each) => (
              <li key={each.version} class="lineage-item">
                <span class="version">v{each.version}</span>
                <span class="lineage-what muted" title={fullTime(each.updatedAt)}>
                  {timeAgo(each.updatedAt)}
                </span>
                <button
                  type="button"
                  class="button quiet"
                  aria-pressed={picked?.version === each.version}
                  onClick={() => setShown(each.version)}
                >
                  Show v{each.version}
                </button>
              </li>
            ))}
          </ol>
          {versions.next && (
            <button type="button" class="button" onClick={() => void load(versions.next, versions.items)}>
              Older versions
            </button>
          )}
          <p class="muted panel-note">
            Replaced versions are kept 30 days by default (the change hook records each a moment after the write).
          </p>
        </div>
      )}
    </section>
  );
}
