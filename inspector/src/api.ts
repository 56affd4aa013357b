// The API's shapes, as the typed client declares them (type-only: nothing of the client is
// bundled into the page).
import type {
  DecisionSummary,
  MemoryItem,
  Session,
  SessionSummary,
  StateChangedEvent,
  StateView,
  TreeNode,
  Version,
  VersionList,
} from '@agentstate/client';

/** The API as the inspector uses it: same origin as the page, `Authorization: Bearer <key>`. */

export type { DecisionSummary, MemoryItem, Session, SessionSummary, StateChangedEvent, StateView, TreeNode, Version };

/** A problem+json answer (or a network failure, status 0). */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

export interface Page<T> {
  items: T[];
  next?: string;
}

export class Api {
  constructor(private readonly apiKey: string) {}

  async request<T>(
    method: string,
    path: string,
    options: { query?: Record<string, string | number | undefined>; body?: unknown; signal?: AbortSignal } = {},
  ): Promise<T> {
    const url = new URL(path, location.origin);
    for (const [name, value] of Object.entries(options.query ?? {})) {
      if (value !== undefined) url.searchParams.set(name, String(value));
    }
    let response: Response;
    try {
      response = await fetch(url, {
        method,
        headers: {
          authorization: `Bearer ${this.apiKey}`,
          ...(options.body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) }),
        ...(options.signal ? { signal: options.signal } : {}),
      });
    } catch (error) {
      if ((error as Error).name === 'AbortError') throw error;
      throw new ApiError(0, 'network', 'The API could not be reached.');
    }
    const text = await response.text();
    const body: unknown = text === '' ? undefined : JSON.parse(text);
    if (!response.ok) {
      const problem = (body ?? {}) as { code?: string; detail?: string; title?: string };
      throw new ApiError(response.status, problem.code ?? 'error', problem.detail ?? problem.title ?? response.statusText);
    }
    return body as T;
  }

  async listSessions(query: { limit?: number; cursor?: string; prefix?: string }, signal?: AbortSignal): Promise<Page<SessionSummary>> {
    const page = await this.request<{ sessions: SessionSummary[]; next?: string }>('GET', '/v1/sessions', {
      query,
      ...(signal ? { signal } : {}),
    });
    return { items: page.sessions, ...(page.next ? { next: page.next } : {}) };
  }

  getSession(sessionId: string, signal?: AbortSignal): Promise<Session> {
    return this.request('GET', `/v1/sessions/${encodeURIComponent(sessionId)}`, signal ? { signal } : {});
  }

  /** The whole tree: a tree of more nodes than one answer holds comes in parts, each after the `next` of the one before. */
  async getTree(sessionId: string, signal?: AbortSignal): Promise<{ head: string; nodes: TreeNode[] }> {
    const read = (cursor?: string) =>
      this.request<{ head: string; nodes: TreeNode[]; next?: string }>('GET', `/v1/sessions/${encodeURIComponent(sessionId)}/tree`, {
        query: { preview: 1, ...(cursor === undefined ? {} : { cursor }) },
        ...(signal ? { signal } : {}),
      });
    const { next, ...tree } = await read();
    for (let cursor = next; cursor !== undefined; ) {
      const part = await read(cursor);
      tree.nodes.push(...part.nodes);
      cursor = part.next;
    }
    return tree;
  }

  getState(sessionId: string, node: string, signal?: AbortSignal): Promise<StateView> {
    return this.request('GET', `/v1/sessions/${encodeURIComponent(sessionId)}/state`, { query: { node }, ...(signal ? { signal } : {}) });
  }

  async listLineage(
    sessionId: string,
    node: string,
    query: { limit: number; cursor?: string },
    signal?: AbortSignal,
  ): Promise<Page<Version> & { prunedBefore?: number }> {
    const page = await this.request<VersionList>('GET', `/v1/sessions/${encodeURIComponent(sessionId)}/versions`, {
      query: { node, ...query },
      ...(signal ? { signal } : {}),
    });
    // `pruned`: the session's retention cut history below that version (older ones may be missing).
    return {
      items: page.versions,
      ...(page.next ? { next: page.next } : {}),
      ...(page.pruned ? { prunedBefore: page.pruned.before } : {}),
    };
  }

  /** The session's latest decisions: which agent decided each, and why (routes, handoffs). */
  async listDecisions(sessionId: string, limit: number, signal?: AbortSignal): Promise<DecisionSummary[]> {
    const page = await this.request<{ decisions: DecisionSummary[] }>('GET', `/v1/sessions/${encodeURIComponent(sessionId)}/decisions`, {
      query: { limit: String(limit) },
      ...(signal ? { signal } : {}),
    });
    return page.decisions;
  }

  /** Version 0 is the empty state: it is not stored, so it is made here. */
  async getVersion(sessionId: string, version: number, signal?: AbortSignal): Promise<Pick<Version, 'version' | 'state' | 'agent'>> {
    if (version === 0) return { version: 0, state: null, agent: null };
    return this.request('GET', `/v1/sessions/${encodeURIComponent(sessionId)}/versions/${version}`, signal ? { signal } : {});
  }

  setHead(sessionId: string, nodeId: string): Promise<{ head: string }> {
    return this.request('PUT', `/v1/sessions/${encodeURIComponent(sessionId)}/head`, { body: { nodeId } });
  }

  /** The namespaces at or below `prefix`, cut to `maxDepth` ids (each cut listed once). */
  async listNamespaces(query: { prefix: string[]; maxDepth?: number; cursor?: string }, signal?: AbortSignal): Promise<Page<string[]>> {
    const page = await this.request<{ namespaces: string[][]; next?: string }>('GET', '/v1/memory', {
      query: { prefix: query.prefix.join('/') || undefined, maxDepth: query.maxDepth, cursor: query.cursor, limit: 100 },
      ...(signal ? { signal } : {}),
    });
    return { items: page.namespaces, ...(page.next ? { next: page.next } : {}) };
  }

  /** Items at or below `namespacePrefix`, newest first, matching `filter`. */
  async searchMemory(
    request: { namespacePrefix: string[]; filter?: unknown; limit: number; cursor?: string },
    signal?: AbortSignal,
  ): Promise<Page<MemoryItem>> {
    const page = await this.request<{ items: MemoryItem[]; next?: string }>('POST', '/v1/memory/search', {
      body: request,
      ...(signal ? { signal } : {}),
    });
    return { items: page.items, ...(page.next ? { next: page.next } : {}) };
  }

  /** The item's versions, newest first: the live one, then those it replaced. */
  async listMemoryVersions(
    namespace: string[],
    key: string,
    query: { limit: number; cursor?: string },
    signal?: AbortSignal,
  ): Promise<Page<MemoryItem>> {
    const page = await this.request<{ versions: MemoryItem[]; next?: string }>('GET', '/v1/memory/versions', {
      query: { namespace: namespace.join('/'), key, ...query },
      ...(signal ? { signal } : {}),
    });
    return { items: page.versions, ...(page.next ? { next: page.next } : {}) };
  }

  /** Where the WebSocket API is (functions/http/handlers/inspector.ts). */
  static async config(): Promise<{ webSocketUrl: string }> {
    const response = await fetch(new URL('/inspector/config.json', location.origin));
    if (!response.ok) throw new ApiError(response.status, 'config', 'The inspector configuration could not be read.');
    return (await response.json()) as { webSocketUrl: string };
  }
}
