import { useCallback, useEffect, useMemo, useState } from 'preact/hooks';
import { Api, ApiError } from './api.js';
import { MemoryView } from './memory-view.js';
import { memoryHref, parseRoute, type Route } from './route.js';
import { SessionList } from './session-list.js';
import { SessionView } from './session-view.js';

/** The key lives in sessionStorage: gone when the tab closes, never in localStorage or a cookie. */
const KEY_STORAGE = 'agentstate.inspector.apiKey';

function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(location.hash));
  useEffect(() => {
    const onChange = () => setRoute(parseRoute(location.hash));
    addEventListener('hashchange', onChange);
    return () => removeEventListener('hashchange', onChange);
  }, []);
  return route;
}

export function App() {
  const [apiKey, setApiKey] = useState(() => sessionStorage.getItem(KEY_STORAGE));
  const route = useRoute();
  const api = useMemo(() => (apiKey ? new Api(apiKey) : null), [apiKey]);

  const signOut = useCallback(() => {
    sessionStorage.removeItem(KEY_STORAGE);
    setApiKey(null);
  }, []);

  return (
    <div class="app">
      <header class="topbar">
        <a class="brand" href="#/">
          <span class="brand-mark" aria-hidden="true" />
          agentstate <span class="brand-sub">inspector</span>
        </a>
        {api && (
          <nav class="topnav" aria-label="Sections">
            <a href="#/" aria-current={route.view !== 'memory' ? 'page' : undefined}>
              Sessions
            </a>
            <a href={memoryHref([])} aria-current={route.view === 'memory' ? 'page' : undefined}>
              Memory
            </a>
            <button type="button" class="button quiet" onClick={signOut}>
              Sign out
            </button>
          </nav>
        )}
      </header>
      {!api || !apiKey ? (
        <SignIn
          onSignedIn={(key) => {
            sessionStorage.setItem(KEY_STORAGE, key);
            setApiKey(key);
          }}
        />
      ) : route.view === 'memory' ? (
        <MemoryView key={route.namespace.join('/')} api={api} namespace={route.namespace} itemKey={route.key} onUnauthorized={signOut} />
      ) : route.view === 'session' ? (
        <SessionView api={api} apiKey={apiKey} sessionId={route.sessionId} nodeId={route.nodeId} onUnauthorized={signOut} />
      ) : (
        <SessionList api={api} onUnauthorized={signOut} />
      )}
    </div>
  );
}

function SignIn({ onSignedIn }: { onSignedIn: (key: string) => void }) {
  const [key, setKey] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [checking, setChecking] = useState(false);

  const submit = async (event: Event) => {
    event.preventDefault();
    const candidate = key.trim();
    if (!candidate) return setError('Enter an API key.');
    setChecking(true);
    setError(null);
    try {
      // One cheap authenticated read tells a wrong key from a right one.
      await new Api(candidate).listSessions({ limit: 1 });
      onSignedIn(candidate);
    } catch (failure) {
      setError(failure instanceof ApiError && failure.status === 401 ? 'That key was not accepted.' : (failure as Error).message);
    } finally {
      setChecking(false);
    }
  };

  return (
    <main class="signin">
      <form class="card signin-card" onSubmit={submit} aria-describedby="signin-help">
        <h1>Sign in</h1>
        <p id="signin-help" class="muted">
          Use an API key of this agentstate. It is kept in this browser tab only, and sent to this API only.
        </p>
        <label for="api-key">API key</label>
        <input
          id="api-key"
          name="api-key"
          type="password"
          autoComplete="off"
          spellcheck={false}
          value={key}
          onInput={(event) => setKey((event.target as HTMLInputElement).value)}
          aria-invalid={error ? true : undefined}
          aria-errormessage={error ? 'signin-error' : undefined}
          // biome-ignore lint/a11y/noAutofocus: the sign-in form is the whole page until a key is given; its one field takes focus.
          autoFocus
        />
        {error && (
          <p id="signin-error" class="error" role="alert">
            {error}
          </p>
        )}
        <button type="submit" class="button primary" disabled={checking}>
          {checking ? 'Checking…' : 'Sign in'}
        </button>
      </form>
    </main>
  );
}
