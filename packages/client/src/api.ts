import { sleep } from './backoff.js';
import { AgentStateError } from './errors.js';
import { type CallOptions, type HttpRequest, type HttpResponse, type HttpTransport, path } from './http.js';
import { MemoryRoutes } from './memory.js';
import type {
  Agent,
  AgentList,
  AppendMessagesRequest,
  AppendMessagesResult,
  CommitRequest,
  CommitResult,
  CopySessionRequest,
  CreateSessionRequest,
  CreateWebhookRequest,
  DeadLetter,
  DeadLetterList,
  DecideRequest,
  DecideResult,
  DecisionList,
  DecisionSummary,
  DocumentView,
  Erasure,
  ErasureStarted,
  HeadResult,
  Health,
  Json,
  JsonPatchOperation,
  MessageNode,
  MessagePath,
  NodeNotes,
  NodePage,
  NodesQuery,
  NotePage,
  NoteResult,
  NotesQuery,
  PageQuery,
  ProfileDocument,
  PutAgentRequest,
  ReplayResult,
  RunDocument,
  Session,
  SessionList,
  SessionListQuery,
  SessionSummary,
  StateQuery,
  StateView,
  Tree,
  TreeQuery,
  UpdateSessionRequest,
  Version,
  VersionList,
  VersionsQuery,
  Webhook,
  WebhookList,
  WriteResult,
} from './types.js';

/** How long `users.erase` goes on sending the `DELETE` again while the server answers that the erasure is still closing. */
const ERASE_PATIENCE_MS = 5 * 60_000;
/** The pause before each resend (the server itself waits up to 12 s before it answers so). */
const ERASE_PAUSE_MS = 1_000;

/** Options of a state write: the node to write at and the version it must still be at. */
export interface WriteOptions extends CallOptions {
  /** The node to write at; default: the head. */
  node?: string;
  /** `If-Match`: write only if the node is still at this version, else `412 version_mismatch`. */
  ifMatch?: number;
}

/** `PUT /v1/agents/{id}` answers the agent and whether it was new (`201`). */
export interface PutAgentResult {
  agent: Agent;
  created: boolean;
}

/** Follows `next` from page to page, yielding every item. */
async function* pages<T, P extends { next?: string }>(
  fetchPage: (cursor: string | undefined) => Promise<P>,
  items: (page: P) => T[],
): AsyncGenerator<T, void, undefined> {
  let cursor: string | undefined;
  do {
    const page = await fetchPage(cursor);
    yield* items(page);
    cursor = page.next;
  } while (cursor !== undefined);
}

/**
 * Every route of the HTTP API (docs/api.md), typed, over the transport. Bodies are raw JSON
 * here; the codec applies on session handles and typed keys (client.ts, keys.ts).
 */
export class AgentStateApi {
  /** Memory items (docs/api.md §7c), raw JSON; see `client.memory(namespace)` for the codec. */
  readonly memoryItems: MemoryRoutes;

  constructor(protected readonly http: HttpTransport) {
    this.memoryItems = new MemoryRoutes(http);
  }

  /**
   * Any request, with the client's key, retries, idempotency and errors; answers status,
   * headers and parsed body. For routes this version of the client does not wrap.
   */
  async request<T = unknown>(request: HttpRequest, options?: CallOptions): Promise<HttpResponse<T>> {
    return this.http.request<T>(request, options);
  }

  /**
   * `answer` with every note of `nodes` (of every node when undefined): when it left some for
   * `GET …/notes` (`notesNext`, docs/api.md "notes in parts"), reads them, part after part, into
   * its `notes`. An answer that holds them all costs no request.
   */
  private async withEveryNote<A extends { notes?: Record<string, NodeNotes>; notesNext?: string }>(
    sessionId: string,
    nodes: readonly string[] | undefined,
    answer: A,
    options?: CallOptions,
  ): Promise<A> {
    if (answer.notesNext === undefined) return answer;
    const { notesNext, ...rest } = answer;
    const notes: Record<string, NodeNotes> = { ...answer.notes };
    for (let cursor: string | undefined = notesNext; cursor !== undefined; ) {
      const part = await this.tree.notes(sessionId, { ...(nodes === undefined ? {} : { nodes }), cursor }, options);
      for (const [node, more] of Object.entries(part.notes)) {
        // Defined, not assigned: a node named `__proto__` is data.
        Object.defineProperty(notes, node, { value: { ...notes[node], ...more }, enumerable: true, writable: true, configurable: true });
      }
      cursor = part.next;
    }
    return { ...rest, notes } as unknown as A;
  }

  /** `GET /health` (no key needed, but sent anyway). */
  async health(options?: CallOptions): Promise<Health> {
    return (await this.http.request<Health>({ method: 'GET', path: '/health' }, options)).body;
  }

  /** Sessions (docs/api.md §2). */
  readonly sessions = {
    /** `POST /v1/sessions` → 201. `409 session_exists` when the id is taken. */
    create: async (request: CreateSessionRequest = {}, options?: CallOptions): Promise<Session> =>
      (await this.http.request<Session>({ method: 'POST', path: '/v1/sessions', body: request }, options)).body,
    /** `GET /v1/sessions`: one page, most recently active first; `userId`, `agentId` or `metadata` filter it. */
    list: async (query: SessionListQuery = {}, options?: CallOptions): Promise<SessionList> => {
      const { metadata, ...rest } = query;
      const filters = Object.fromEntries(Object.entries(metadata ?? {}).map(([key, value]) => [`metadata.${key}`, value]));
      return (await this.http.request<SessionList>({ method: 'GET', path: '/v1/sessions', query: { ...rest, ...filters } }, options)).body;
    },
    /** Every session, following `next`. */
    iterate: (query: Omit<SessionListQuery, 'cursor'> = {}, options?: CallOptions): AsyncGenerator<SessionSummary, void, undefined> =>
      pages(
        (cursor) => this.sessions.list({ ...query, ...(cursor ? { cursor } : {}) }, options),
        (page) => page.sessions,
      ),
    /** `GET /v1/sessions/{sid}`. `404 session_not_found`. */
    get: async (sessionId: string, options?: CallOptions): Promise<Session> =>
      (await this.http.request<Session>({ method: 'GET', path: path`/v1/sessions/${sessionId}` }, options)).body,
    /**
     * `PATCH /v1/sessions/{sid}`: merge-patches the metadata, sets the user and the agent, and
     * changes the lifetime (`ttlSeconds`, `expiresAt`, `retention`; `null` removes one). A write: it
     * restarts an idle expiry. `404 session_not_found` (also once the session expired), `400`
     * naming a bad field, `403 forbidden` for `userId` or `agentId` from a key limited to agents.
     */
    update: async (sessionId: string, changes: UpdateSessionRequest, options?: CallOptions): Promise<Session> =>
      (await this.http.request<Session>({ method: 'PATCH', path: path`/v1/sessions/${sessionId}`, body: changes }, options)).body,
    /** `DELETE /v1/sessions/{sid}` → 204: erases nodes, messages, versions. */
    delete: async (sessionId: string, options?: CallOptions): Promise<void> => {
      await this.http.request<undefined>({ method: 'DELETE', path: path`/v1/sessions/${sessionId}` }, options);
    },
    /**
     * `POST /v1/sessions/{sid}/copy` → 201: a new session whose nodes read what they read in
     * this one (a path, or the whole tree), independent afterwards.
     */
    copy: async (sessionId: string, request: CopySessionRequest = {}, options?: CallOptions): Promise<Session> =>
      (await this.http.request<Session>({ method: 'POST', path: path`/v1/sessions/${sessionId}/copy`, body: request }, options)).body,
  };

  /** Messages (docs/api.md §3). */
  readonly messages = {
    /**
     * `POST /v1/sessions/{sid}/messages` → 201: appends a chain and moves the head to its end;
     * with `state` or `replaceState`, writes the new head's state in the same change
     * (`ifMatch`: the version the parent's state must be at).
     */
    append: async (
      sessionId: string,
      request: AppendMessagesRequest,
      options: CallOptions & { ifMatch?: number } = {},
    ): Promise<AppendMessagesResult> =>
      (
        await this.http.request<AppendMessagesResult>(
          { method: 'POST', path: path`/v1/sessions/${sessionId}/messages`, body: request, ifMatch: options.ifMatch },
          options,
        )
      ).body,
    /**
     * `GET /v1/sessions/{sid}/messages?node=&last=`: the path root → node (default: the head);
     * with `last`, its last `last` messages only, and how many came before them (`omitted`).
     */
    path: async (sessionId: string, query: { node?: string; last?: number } = {}, options?: CallOptions): Promise<MessagePath> =>
      (
        await this.http.request<MessagePath>(
          { method: 'GET', path: path`/v1/sessions/${sessionId}/messages`, query: { ...query } },
          options,
        )
      ).body,
  };

  /** The message tree (docs/api.md §3). */
  readonly tree = {
    /** `GET /v1/sessions/{sid}/tree`: the head and every node (with `preview`, their snippets). */
    get: async (sessionId: string, query: TreeQuery = {}, options?: CallOptions): Promise<Tree> => {
      const read = (cursor?: string) =>
        this.http.request<Tree>(
          {
            method: 'GET',
            path: path`/v1/sessions/${sessionId}/tree`,
            // A later part carries nodes only: the notes go on from the first part's `notesNext`.
            query: { ...(query.preview ? { preview: 1 } : {}), ...(query.notes && !cursor ? { notes: 1 } : {}), cursor },
          },
          options,
        );
      const { next, ...tree } = (await read()).body;
      // More nodes than one answer holds: the rest, part after part (docs/api.md, "the whole tree").
      for (let cursor = next; cursor !== undefined; ) {
        const part = (await read(cursor)).body;
        tree.nodes.push(...part.nodes);
        cursor = part.next;
      }
      return this.withEveryNote(sessionId, undefined, tree, options);
    },
    /**
     * `GET /v1/sessions/{sid}/notes?nodes=&cursor=`: one part of the notes of some nodes (every
     * node without `nodes`), with `next` while more are left; what goes on from a `notesNext`.
     */
    notes: async (sessionId: string, query: NotesQuery = {}, options?: CallOptions): Promise<NotePage> =>
      (
        await this.http.request<NotePage>(
          {
            method: 'GET',
            path: path`/v1/sessions/${sessionId}/notes`,
            query: { ...(query.nodes === undefined ? {} : { nodes: query.nodes.join(',') }), cursor: query.cursor },
          },
          options,
        )
      ).body,
    /**
     * `GET /v1/sessions/{sid}/nodes?limit=&before=&cursor=`: one page of the message nodes by id,
     * from the last (`root` is not one), with `next` while more are left; a page reads about what
     * it carries, however long the session, where `get` reads every node.
     */
    nodes: async (sessionId: string, query: NodesQuery = {}, options?: CallOptions): Promise<NodePage> =>
      (
        await this.http.request<NodePage>(
          {
            method: 'GET',
            path: path`/v1/sessions/${sessionId}/nodes`,
            query: { limit: query.limit, before: query.before, cursor: query.cursor },
          },
          options,
        )
      ).body,
    /** `GET /v1/sessions/{sid}/nodes/{nid}` */
    node: async (sessionId: string, nodeId: string, options?: CallOptions): Promise<MessageNode> =>
      (await this.http.request<MessageNode>({ method: 'GET', path: path`/v1/sessions/${sessionId}/nodes/${nodeId}` }, options)).body,
    /**
     * `PUT /v1/sessions/{sid}/nodes/{nid}/notes/{key}`: a JSON value kept beside the node (outside
     * its state and history; one blind write that never waits for the session's other writes).
     */
    putNote: async (sessionId: string, nodeId: string, key: string, value: Json, options?: CallOptions): Promise<NoteResult> =>
      (
        await this.http.request<NoteResult>(
          { method: 'PUT', path: path`/v1/sessions/${sessionId}/nodes/${nodeId}/notes/${key}`, body: value },
          options,
        )
      ).body,
    /** `PUT /v1/sessions/{sid}/head`: switch branch. */
    setHead: async (sessionId: string, nodeId: string, options?: CallOptions): Promise<HeadResult> =>
      (await this.http.request<HeadResult>({ method: 'PUT', path: path`/v1/sessions/${sessionId}/head`, body: { nodeId } }, options)).body,
  };

  /** State (docs/api.md §4); raw JSON, see `session()` for the codec. */
  readonly state = {
    /** `GET /v1/sessions/{sid}/state?node=|version=`. An unknown session reads `null` at version 0. */
    get: async <S = Json>(sessionId: string, query: StateQuery = {}, options?: CallOptions): Promise<StateView<S>> => {
      const view = (
        await this.http.request<StateView<S>>(
          {
            method: 'GET',
            path: path`/v1/sessions/${sessionId}/state`,
            query: { node: query.node, version: query.version, ...(query.notes ? { notes: 1 } : {}) },
          },
          options,
        )
      ).body;
      if (view.notesNext === undefined) return view;
      const { notesNext, ...rest } = view;
      const byNode = await this.withEveryNote(sessionId, [view.node], { notes: { [view.node]: view.notes ?? {} }, notesNext }, options);
      return { ...rest, notes: byNode.notes?.[view.node] ?? {} };
    },
    /** `PATCH /v1/sessions/{sid}/state`: an RFC 7396 merge patch. */
    patch: async <S = Json>(sessionId: string, patch: Json, options: WriteOptions = {}): Promise<WriteResult<S>> =>
      (
        await this.http.request<WriteResult<S>>(
          {
            method: 'PATCH',
            path: path`/v1/sessions/${sessionId}/state`,
            query: { node: options.node },
            body: patch,
            contentType: 'application/merge-patch+json',
            ifMatch: options.ifMatch,
          },
          options,
        )
      ).body,
    /**
     * `PATCH /v1/sessions/{sid}/state` with RFC 6902 operations (`application/json-patch+json`):
     * applied in order, all or nothing; one that cannot apply is `409 patch_conflict`. Appends
     * (`"path": "/log/-"`) send only what they add, however large the array.
     */
    jsonPatch: async <S = Json>(sessionId: string, operations: JsonPatchOperation[], options: WriteOptions = {}): Promise<WriteResult<S>> =>
      (
        await this.http.request<WriteResult<S>>(
          {
            method: 'PATCH',
            path: path`/v1/sessions/${sessionId}/state`,
            query: { node: options.node },
            body: operations as unknown as Json,
            contentType: 'application/json-patch+json',
            ifMatch: options.ifMatch,
          },
          options,
        )
      ).body,
    /** `PUT /v1/sessions/{sid}/state`: the whole new state (`{}` clears). */
    replace: async <S = Json>(sessionId: string, state: Json, options: WriteOptions = {}): Promise<WriteResult<S>> =>
      (
        await this.http.request<WriteResult<S>>(
          {
            method: 'PUT',
            path: path`/v1/sessions/${sessionId}/state`,
            query: { node: options.node },
            body: state,
            ifMatch: options.ifMatch,
          },
          options,
        )
      ).body,
  };

  /** History (docs/api.md §5). */
  readonly versions = {
    /** `GET /v1/sessions/{sid}/versions?node=&notesOf=`: one page, newest first. */
    list: async <S = Json>(sessionId: string, query: VersionsQuery = {}, options?: CallOptions): Promise<VersionList<S>> => {
      const { notesOf, ...rest } = query;
      const page = (
        await this.http.request<VersionList<S>>(
          {
            method: 'GET',
            path: path`/v1/sessions/${sessionId}/versions`,
            query: { ...rest, ...(notesOf === undefined ? {} : { notesOf: notesOf.join(',') }) },
          },
          options,
        )
      ).body;
      return this.withEveryNote(sessionId, notesOf, page, options);
    },
    /** Every version, newest first, following `next`. */
    iterate: <S = Json>(
      sessionId: string,
      query: Omit<VersionsQuery, 'cursor'> = {},
      options?: CallOptions,
    ): AsyncGenerator<Version<S>, void, undefined> =>
      pages(
        (cursor) => this.versions.list<S>(sessionId, { ...query, ...(cursor ? { cursor } : {}) }, options),
        (page) => page.versions,
      ),
    /** `GET /v1/sessions/{sid}/versions/{v}`. `404 version_not_found`; `410 version_pruned` when retention removed it. */
    get: async <S = Json>(sessionId: string, version: number, options?: CallOptions): Promise<Version<S>> =>
      (await this.http.request<Version<S>>({ method: 'GET', path: path`/v1/sessions/${sessionId}/versions/${version}` }, options)).body,
  };

  /** Who decided each turn, and why (docs/api.md §7d). */
  readonly decisions = {
    /** `GET /v1/sessions/{sid}/decisions`: one page, newest first. */
    list: async (sessionId: string, query: PageQuery = {}, options?: CallOptions): Promise<DecisionList> =>
      (
        await this.http.request<DecisionList>(
          { method: 'GET', path: path`/v1/sessions/${sessionId}/decisions`, query: { ...query } },
          options,
        )
      ).body,
    /** Every decision, newest first, following `next`. */
    iterate: (sessionId: string, options?: CallOptions): AsyncGenerator<DecisionSummary, void, undefined> =>
      pages(
        (cursor) => this.decisions.list(sessionId, cursor ? { cursor } : {}, options),
        (page) => page.decisions,
      ),
  };

  /** The agent registry (docs/api.md §6). */
  readonly agents = {
    /** `PUT /v1/agents/{agentId}`: register or replace (201 when new). */
    put: async (agentId: string, request: PutAgentRequest, options?: CallOptions): Promise<PutAgentResult> => {
      const response = await this.http.request<Agent>({ method: 'PUT', path: path`/v1/agents/${agentId}`, body: request }, options);
      return { agent: response.body, created: response.status === 201 };
    },
    /** `GET /v1/agents/{agentId}`. `404 agent_not_found`. */
    get: async (agentId: string, options?: CallOptions): Promise<Agent> =>
      (await this.http.request<Agent>({ method: 'GET', path: path`/v1/agents/${agentId}` }, options)).body,
    /** `GET /v1/agents`: one page, ordered by id. */
    list: async (query: PageQuery = {}, options?: CallOptions): Promise<AgentList> =>
      (await this.http.request<AgentList>({ method: 'GET', path: '/v1/agents', query: { ...query } }, options)).body,
    /** Every agent, following `next`. */
    iterate: (query: Omit<PageQuery, 'cursor'> = {}, options?: CallOptions): AsyncGenerator<Agent, void, undefined> =>
      pages(
        (cursor) => this.agents.list({ ...query, ...(cursor ? { cursor } : {}) }, options),
        (page) => page.agents,
      ),
  };

  /**
   * `POST /v1/sessions/{sid}/decide` (docs/api.md §7): runs one decision through the agent's
   * worker. `409 decision_in_progress` while another decision of the session runs.
   */
  async decide<S = Json>(sessionId: string, request: DecideRequest, options?: CallOptions): Promise<DecideResult<S>> {
    return (
      await this.http.request<DecideResult<S>>({ method: 'POST', path: path`/v1/sessions/${sessionId}/decide`, body: request }, options)
    ).body;
  }

  /** Commits and their documents (docs/api.md §7a). */
  readonly commits = {
    /** `POST /v1/sessions/{sid}/commits?node=`: a batch of keyed commands, atomically. */
    commit: async <S = Json>(
      sessionId: string,
      request: CommitRequest,
      options: CallOptions & { node?: string } = {},
    ): Promise<CommitResult<S>> =>
      (
        await this.http.request<CommitResult<S>>(
          { method: 'POST', path: path`/v1/sessions/${sessionId}/commits`, query: { node: options.node }, body: request },
          options,
        )
      ).body,
    /** `GET /v1/sessions/{sid}/runs/{runId}/state` */
    run: async (sessionId: string, runId: string, options?: CallOptions): Promise<RunDocument> =>
      (await this.http.request<RunDocument>({ method: 'GET', path: path`/v1/sessions/${sessionId}/runs/${runId}/state` }, options)).body,
    /** `GET /v1/profiles/{userId}/state` */
    profile: async (userId: string, options?: CallOptions): Promise<ProfileDocument> =>
      (await this.http.request<ProfileDocument>({ method: 'GET', path: path`/v1/profiles/${userId}/state` }, options)).body,
    /** `GET /v1/shared/state` */
    shared: async (options?: CallOptions): Promise<DocumentView> =>
      (await this.http.request<DocumentView>({ method: 'GET', path: '/v1/shared/state' }, options)).body,
  };

  /** Users (docs/api.md §12). */
  readonly users = {
    /**
     * `DELETE /v1/users/{userId}` → 202: erases the user's sessions, profile and memory under
     * `users/<userId>`; none of it is readable once this answers. Follow it with
     * `erasures.get`. A call while an erasure of the user is under way joins it (same
     * `erasureId`). For a user too large to close within the server's wait (12 s a request),
     * the server answers `409 conflict` with the `erasureId` while the erasure goes on; this
     * sends the request again (a second apart) for up to 5 minutes, and throws that
     * `AgentStateError` (its `erasureId` set) only past them. A key limited to agents gets
     * `403 forbidden`.
     */
    erase: async (userId: string, options?: CallOptions): Promise<ErasureStarted> => {
      const started = Date.now();
      for (;;) {
        try {
          return (await this.http.request<ErasureStarted>({ method: 'DELETE', path: path`/v1/users/${userId}` }, options)).body;
        } catch (error) {
          const closing = AgentStateError.is(error, 'conflict') && typeof error.erasureId === 'string';
          if (!closing || Date.now() - started >= ERASE_PATIENCE_MS) throw error;
          await sleep(ERASE_PAUSE_MS, options?.signal);
        }
      }
    },
  };

  /** Erasures of users (docs/api.md §12). */
  readonly erasures = {
    /** `GET /v1/erasures/{erasureId}`: `running` or `done`, and the counts of what it erased. */
    get: async (erasureId: string, options?: CallOptions): Promise<Erasure> =>
      (await this.http.request<Erasure>({ method: 'GET', path: path`/v1/erasures/${erasureId}` }, options)).body,
  };

  /** Webhooks of change events (API.md §9). */
  readonly webhooks = {
    /** `POST /v1/webhooks` → 201. */
    create: async (request: CreateWebhookRequest, options?: CallOptions): Promise<Webhook> =>
      (await this.http.request<Webhook>({ method: 'POST', path: '/v1/webhooks', body: request }, options)).body,
    /** `GET /v1/webhooks`: one page, newest first. */
    list: async (query: PageQuery = {}, options?: CallOptions): Promise<WebhookList> =>
      (await this.http.request<WebhookList>({ method: 'GET', path: '/v1/webhooks', query: { ...query } }, options)).body,
    /** `GET /v1/webhooks/{id}` */
    get: async (webhookId: string, options?: CallOptions): Promise<Webhook> =>
      (await this.http.request<Webhook>({ method: 'GET', path: path`/v1/webhooks/${webhookId}` }, options)).body,
    /** `DELETE /v1/webhooks/{id}` → 204. */
    delete: async (webhookId: string, options?: CallOptions): Promise<void> => {
      await this.http.request<undefined>({ method: 'DELETE', path: path`/v1/webhooks/${webhookId}` }, options);
    },
    /** `GET /v1/webhooks/{id}/dead-letters`: one page. */
    deadLetters: async (webhookId: string, query: PageQuery = {}, options?: CallOptions): Promise<DeadLetterList> =>
      (
        await this.http.request<DeadLetterList>(
          { method: 'GET', path: path`/v1/webhooks/${webhookId}/dead-letters`, query: { ...query } },
          options,
        )
      ).body,
    /** Every dead letter, following `next`. */
    iterateDeadLetters: (
      webhookId: string,
      query: Omit<PageQuery, 'cursor'> = {},
      options?: CallOptions,
    ): AsyncGenerator<DeadLetter, void, undefined> =>
      pages(
        (cursor) => this.webhooks.deadLetters(webhookId, { ...query, ...(cursor ? { cursor } : {}) }, options),
        (page) => page.deadLetters,
      ),
    /** `POST /v1/webhooks/{id}/dead-letters/replay` */
    replay: async (webhookId: string, request: { limit?: number } = {}, options?: CallOptions): Promise<ReplayResult> =>
      (
        await this.http.request<ReplayResult>(
          { method: 'POST', path: path`/v1/webhooks/${webhookId}/dead-letters/replay`, body: request },
          options,
        )
      ).body,
  };

  /** The latest version of a session, or 0 when it does not exist (yet). */
  async latestVersion(sessionId: string, options?: CallOptions): Promise<number> {
    try {
      return (await this.sessions.get(sessionId, options)).version;
    } catch (error) {
      if (AgentStateError.is(error, 'session_not_found')) return 0;
      throw error;
    }
  }
}
