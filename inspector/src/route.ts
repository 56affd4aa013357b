/**
 * Where the page is: `#/` the session list; `#/s/<session>` a session; `#/s/<session>/<node>` a
 * node of it; `#/memory` memory items, `#/memory/<namespace ids…>` one namespace and those below
 * it, `#/memory/<namespace ids…>?key=<key>` one item of it.
 */
export type Route =
  | { view: 'sessions' }
  | { view: 'session'; sessionId: string; nodeId: string | null }
  | { view: 'memory'; namespace: string[]; key: string | null };

export function parseRoute(hash: string): Route {
  const [where = '', search = ''] = hash.replace(/^#/, '').split('?');
  const [, kind, ...rest] = where.split('/');
  if (kind === 's' && rest[0]) {
    return { view: 'session', sessionId: decodeURIComponent(rest[0]), nodeId: rest[1] ? decodeURIComponent(rest[1]) : null };
  }
  if (kind === 'memory') {
    const key = new URLSearchParams(search).get('key');
    return { view: 'memory', namespace: rest.filter((id) => id !== '').map(decodeURIComponent), key: key || null };
  }
  return { view: 'sessions' };
}

export function sessionHref(sessionId: string, nodeId?: string | null): string {
  return `#/s/${encodeURIComponent(sessionId)}${nodeId ? `/${encodeURIComponent(nodeId)}` : ''}`;
}

export function memoryHref(namespace: readonly string[], key?: string | null): string {
  const path = namespace.map(encodeURIComponent).join('/');
  return `#/memory${path ? `/${path}` : ''}${key ? `?key=${encodeURIComponent(key)}` : ''}`;
}
