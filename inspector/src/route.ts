/** Where the page is: `#/` the session list; `#/s/<session>` a session; `#/s/<session>/<node>` a node of it. */
export type Route = { view: 'sessions' } | { view: 'session'; sessionId: string; nodeId: string | null };

export function parseRoute(hash: string): Route {
  const [, kind, session, node] = hash.replace(/^#/, '').split('/');
  if (kind === 's' && session) {
    return { view: 'session', sessionId: decodeURIComponent(session), nodeId: node ? decodeURIComponent(node) : null };
  }
  return { view: 'sessions' };
}

export function sessionHref(sessionId: string, nodeId?: string | null): string {
  return `#/s/${encodeURIComponent(sessionId)}${nodeId ? `/${encodeURIComponent(nodeId)}` : ''}`;
}
