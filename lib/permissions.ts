import type { RouteGroup } from '../functions/http/contract/routes.js';

/**
 * The DynamoDB actions a function may be granted. `TransactWriteItems` is not an IAM action:
 * a transaction needs the action of each of its items (Put → PutItem, Update → UpdateItem,
 * Delete → DeleteItem, ConditionCheck → ConditionCheckItem). `Scan` is deliberately absent:
 * no Lambda ever scans the table (only the admin CLI lists keys, with the caller's own
 * credentials, and it queries the index rather than scanning).
 */
type TableAction =
  | 'dynamodb:GetItem'
  | 'dynamodb:BatchGetItem'
  | 'dynamodb:Query'
  | 'dynamodb:PutItem'
  | 'dynamodb:UpdateItem'
  | 'dynamodb:DeleteItem'
  | 'dynamodb:BatchWriteItem'
  | 'dynamodb:ConditionCheckItem';

/** What one function may do to the table and its indexes. */
export interface TableAccess {
  /** Actions on the table itself (resource: the table ARN). */
  readonly table: readonly TableAction[];
  /** Actions on the sessions index (resource: that one index's ARN, never `index/*`). */
  readonly sessionsIndex: readonly TableAction[];
  /** Actions on the memory index `byMemoryRecency` (that one index's ARN); none when absent. */
  readonly memoryIndex?: readonly TableAction[];
  /** Actions on the retention index `byPruneDue` (that one index's ARN); none when absent. */
  readonly pruneDueIndex?: readonly TableAction[];
}

/**
 * Every route group runs the same middleware stack (functions/http/api.ts), and every group
 * but `health` records Idempotency-Key claims: PutItem (claim), UpdateItem (complete),
 * DeleteItem (release) on `I#…` items.
 */
const idempotency: readonly TableAction[] = ['dynamodb:PutItem', 'dynamodb:UpdateItem', 'dynamodb:DeleteItem'];

/**
 * Every group that writes to a session may find the tombstone of a delete that died halfway
 * (docs/architecture.md, "Deleting a session") and must finish that delete before its own
 * write: the session's items go in BatchWriteItem deletes. test/deployed/least-privilege.test.ts
 * drives that path through each of these functions. The same action puts the node index a
 * write owes before its claim, and deletes it again when the claim finds its life closed by a
 * delete (store/log/unclaimed-writes.ts).
 */
const finishDelete: TableAction = 'dynamodb:BatchWriteItem';

/**
 * Least privilege, reviewable in one place: route group → the DynamoDB actions its handler
 * uses. test/deployed/least-privilege.test.ts proves the table both ways on the synthesized
 * stack: every bundle, driven through its paths with only its own role, is never refused a
 * call, and every grant here is used by one. And every end-to-end test (test/e2e) runs its
 * server behind test/helpers/iam-gate.ts, which holds each DynamoDB call of every path the
 * suite drives to the role of the function that made it: a refused call fails the file.
 *
 * Typed as a record over every `RouteGroup`, so adding a group to functions/http/contract/routes.ts
 * fails type checking until its access is declared here — on purpose: a new group's
 * permissions are a review decision, never a default.
 *
 * | group    | reads                          | writes                                         |
 * |----------|--------------------------------|------------------------------------------------|
 * | health   | —                              | —                                              |
 * | sessions | Get (item), Query (the session | Put (create), Transact Put (create with its    |
 * |          | with its metadata, tip, items, | metadata and list entries), Transact Put+Update|
 * |          | index: the lists, the write    | (+Delete: a PATCH; its metadata's item; of the |
 * |          | queue's tickets), BatchGet     | user: the old user's profile fence too),       |
 * |          | (the sessions a list shows)    | BatchWrite (delete the session's items),       |
 * |          |                                | Put/Delete (a queue ticket), idempotency       |
 * | tree     | Get, BatchGet (nodes), Query   | Put (the log's next change), BatchWrite (the   |
 * |          | (tip, node index, path ranges, | node index; a dead delete), Update (pointers,  |
 * |          | the write queue's tickets)     | touch), Transact Put+Update (a first write     |
 * |          |                                | with the session upsert), Put/Delete (a queue  |
 * |          |                                | ticket), idempotency                           |
 * | state    | Get, BatchGet (lineage,        | Put (the log's next change), BatchWrite,       |
 * |          | pieces), Query (tip, versions, | Update (pointers, touch), Transact (a first    |
 * |          | the write queue's tickets)     | write), Put/Delete (a queue ticket), idempot.  |
 * | agents   | Get (agent, parents, registry  | Put (agent), Transact Put+Put (an agent and    |
 * |          | version), Query (list; index:  | the registry's version), idempotency           |
 * |          | the sessions a type change     |                                                |
 * |          | checks), BatchGet              |                                                |
 * |          | (their states' pieces)         |                                                |
 * | decide   | Get (session, agent), BatchGet | Put (the lease and the commit: changes of the  |
 * |          | (nodes named by the trigger or | log), Update (failed attempt, pointers, touch),|
 * |          | the answer), Query (tip and    | BatchWrite (node index, decision record; a     |
 * |          | path, decision record, agents) | dead delete), Transact (a first write)         |
 * | commits  | Get (session, documents,       | Transact Put+Update+ConditionCheck (tip,       |
 * |          | versions), BatchGet (a state's | run/profile/shared documents), Update (a blind |
 * |          | pieces), Query (tip, agents,   | commit's profile or shared document, key by    |
 * |          | the write queue's tickets)     | key), Put (that document put whole near its    |
 * |          |                                | limit), BatchWrite (a dead delete), Put/Delete |
 * |          |                                | (a queue ticket), idempotency                  |
 * | webhooks | Get (webhook, its places),     | Put (webhook), Delete (webhook, a replayed     |
 * |          | Query (webhooks, dead letters) | dead letter), Update (its place, a failed      |
 * |          |                                | replay), idempotency                           |
 * | memory   | Get (item), BatchGet (search  | Update (put, delete: one UpdateItem each),     |
 * |          | matches), Query (namespaces,   | idempotency                                    |
 * |          | versions; memory index: search)|                                                |
 * | inspector| —                              | —                                              |
 */
export const routeGroupAccess = {
  health: { table: [], sessionsIndex: [] },
  sessions: {
    table: ['dynamodb:GetItem', 'dynamodb:BatchGetItem', 'dynamodb:Query', 'dynamodb:BatchWriteItem', ...idempotency],
    sessionsIndex: ['dynamodb:Query'],
  },
  tree: {
    table: ['dynamodb:GetItem', 'dynamodb:BatchGetItem', 'dynamodb:Query', finishDelete, ...idempotency],
    sessionsIndex: [],
  },
  state: {
    table: ['dynamodb:GetItem', 'dynamodb:BatchGetItem', 'dynamodb:Query', finishDelete, ...idempotency],
    sessionsIndex: [],
  },
  agents: {
    // A type change that stored values may not fit reads the agent's sessions (found on the
    // sessions index) and their states, a large one in pieces (BatchGet).
    // A registration the registry's rules concern puts the agent and the registry's version in
    // one transaction (two PutItems; PutItem is granted with idempotency's).
    table: ['dynamodb:GetItem', 'dynamodb:BatchGetItem', 'dynamodb:Query', ...idempotency],
    sessionsIndex: ['dynamodb:Query'],
  },
  decide: {
    // ConditionCheck: the lease on a session nothing was written to checks that its item has not expired.
    table: ['dynamodb:GetItem', 'dynamodb:BatchGetItem', 'dynamodb:Query', 'dynamodb:ConditionCheckItem', finishDelete, ...idempotency],
    sessionsIndex: [],
  },
  commits: {
    // BatchGet: a state stored in pieces (over ~4 KiB compressed) is read piece by piece.
    // UpdateItem and PutItem (granted with idempotency's): a blind commit's profile or shared
    // document, written key by key, or put whole when near its limit (document-store.ts).
    table: ['dynamodb:GetItem', 'dynamodb:BatchGetItem', 'dynamodb:Query', 'dynamodb:ConditionCheckItem', finishDelete, ...idempotency],
    sessionsIndex: [],
  },
  webhooks: {
    table: ['dynamodb:GetItem', 'dynamodb:Query', ...idempotency],
    sessionsIndex: [],
  },
  memory: {
    table: ['dynamodb:GetItem', 'dynamodb:BatchGetItem', 'dynamodb:Query', ...idempotency],
    sessionsIndex: [],
    memoryIndex: ['dynamodb:Query'],
  },
  // Static files bundled with the function; the page reads data through the other routes.
  inspector: { table: [], sessionsIndex: [] },
} as const satisfies Record<RouteGroup, TableAccess>;

/**
 * The change hook, the stream's live consumer (functions/streams/change-hook.ts): Query (a version's state, for `prev`: the last change
 * under its key's prefix in the session's log; a session's WebSocket followers, a tenant's
 * agents for the typed fields of events sent as an agent; a memory namespace's live items),
 * Update (a session's activity; an erasure; retention: a pruned version stripped, a change given its TTL,
 * the run's marker), Put (the memory namespace list, a memory item's replaced
 * versions), Delete (the records of a WebSocket connection that is gone, a namespace left
 * empty; what an erasure closed, a user's profile's tombstone), BatchWrite (the replaced versions of a deleted memory item;
 * the items of sessions an erasure closed). Reading the stream
 * itself is granted on the stream's ARN by the event source mapping, not here.
 */
export const liveHookAccess: TableAccess = {
  // GetItem: the sweep of a session whose item TTL removed reads what is left of it (session-delete.ts),
  // which it erases as a DELETE does (Query, UpdateItem of the fence, DeleteItem, BatchWriteItem), and
  // so does it the rest of an erase a DELETE handed to it, and, on its schedule, the erase of a
  // DELETE whose eraser died holding its fence (the session item read too);
  // a memory namespace's entry is read for its count of creations before the hook forgets it (namespace-entries.ts).
  // Query on the sessions index and BatchGetItem: a user's erasure closes the sessions of the
  // user's list, page by page, and reads their items and its records by key (erasure-close.ts);
  // its profile step is a TransactWriteItems of a PutItem (the profile's tombstone) and an
  // UpdateItem, and its end a DeleteItem of that tombstone; retention reads
  // the versions it keeps of a session with large states, for their splice chains (history-prune.ts).
  table: [
    'dynamodb:GetItem',
    'dynamodb:BatchGetItem',
    'dynamodb:Query',
    'dynamodb:PutItem',
    'dynamodb:UpdateItem',
    'dynamodb:DeleteItem',
    'dynamodb:BatchWriteItem',
  ],
  sessionsIndex: ['dynamodb:Query'],
  // Its scheduled sweep (every minute) finds the sessions whose history is due for a retention
  // run without a write, and the fences of deletes whose eraser's hold ended (store/log/prune-due.ts).
  pruneDueIndex: ['dynamodb:Query'],
};

/**
 * The webhook hook, the stream's webhook consumer (functions/streams/webhook-hook.ts): Get
 * (the sealing key's wrapped data key, to open webhook secrets), Query (a version's state, for
 * `prev`; a tenant's webhooks and agents). It only queues deliveries (sqs:SendMessage on the
 * webhook queue, granted in lib/agent-state.ts).
 */
export const webhookHookAccess: TableAccess = {
  table: ['dynamodb:GetItem', 'dynamodb:Query'],
  sessionsIndex: [],
};

/**
 * The delivery hook, the webhook queue's consumer (functions/streams/delivery-hook.ts): Get
 * (the sealing key's wrapped data key; the webhook of each delivery), Update (dead letters).
 */
export const deliveryHookAccess: TableAccess = {
  table: ['dynamodb:GetItem', 'dynamodb:UpdateItem'],
  sessionsIndex: [],
};

/**
 * The WebSocket API's function (functions/ws/handler.ts): Get (the API key at `$connect`, a
 * connection), Put (a connection; a follow's mark, the log's next change), Update (a node's
 * pointer the change before the mark left), Delete (`$disconnect`), Transact Update+Put and
 * Update+Delete (a subscribe and an unsubscribe: the connection's list and the follower), Query (the session's tip, before its mark), BatchWrite (the
 * node index the change before the mark owes). A follow that finds a delete that died halfway
 * finishes it first, as every write into a session does (`finishDelete`).
 */
export const webSocketAccess: TableAccess = {
  table: ['dynamodb:GetItem', 'dynamodb:Query', 'dynamodb:PutItem', 'dynamodb:UpdateItem', 'dynamodb:DeleteItem', finishDelete],
  sessionsIndex: [],
};

/** The API key authorizer reads one `K#<sha256>` item per uncached request, nothing else. */
export const authorizerAccess: TableAccess = { table: ['dynamodb:GetItem'], sessionsIndex: [] };

/**
 * Route groups that call agents' workers. A worker registered as `lambda:<function arn>`
 * (API.md section 6) is invoked by the function of these groups only, and only if its ARN is
 * listed in the construct's `allowedWorkerFunctionArns`. The `decide` group does not exist
 * yet; when it is added to `routeGroups`, it picks this up with no change to the construct.
 */
export const workerCallingGroups: readonly string[] = ['decide'];

/** Route groups that check worker URLs where agents are registered (no invoke permission). */
export const workerCheckingGroups: readonly string[] = ['agents'];

/**
 * Route groups served without an API key: `GET /health` (API.md section 1) and the inspector
 * page's static files, which hold no data (the page sends the key the user signs in with).
 */
export const publicGroups: readonly string[] = ['health', 'inspector'];

/** The access a route group was declared with; throws for a group missing from the table. */
export function accessOf(group: string): TableAccess {
  const access = (routeGroupAccess as Record<string, TableAccess>)[group];
  if (!access) {
    throw new Error(`route group "${group}" has no table access declared in lib/permissions.ts (routeGroupAccess)`);
  }
  return access;
}
