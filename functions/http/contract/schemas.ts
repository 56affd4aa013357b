import * as z from 'zod';
import { type ErrorCode, errorStatus } from '../../core/kernel/errors.js';
import { FIELD_TYPES } from '../../core/model/fields.js';
import { idSchema } from '../edge/id-schema.js';
import { jsonValue } from '../edge/request.js';

/**
 * What the routes answer, as zod schemas: the response half of the OpenAPI document
 * (document.ts), whose request half is the very schemas the handlers parse bodies with. Each
 * schema named in `components` becomes `#/components/schemas/<name>`; e2e tests validate every
 * answer of the real server against the document (test/helpers/contract.ts), so a field the
 * code adds, drops or retypes without saying so here fails them.
 *
 * Objects are closed (an undocumented member fails validation) except where the API stores
 * what it was sent: messages, states, configs, metadata, problems' extras.
 */

const jsonObject = z.record(z.string(), jsonValue);
const time = z.iso.datetime().meta({ description: 'ISO 8601 UTC with milliseconds', examples: ['2025-06-01T10:00:00.000Z'] });
const version = z.number().int().min(0);
const count = z.number().int().min(0);
/** `next` of a page: present while there may be more; pass it back as `cursor`. */
const next = z.string().optional().meta({ description: 'Present while there may be more; pass it back as `cursor`.' });

const health = z.object({ ok: z.boolean() });

const retention = z.object({ keepVersions: z.optional(z.number().int().min(1)), keepDays: z.optional(z.number().int().min(1)) }).nullable();
const sessionSummary = z.object({
  sessionId: idSchema,
  agentId: z.nullable(idSchema),
  userId: z.nullable(idSchema),
  metadata: jsonObject.nullable(),
  createdAt: time,
  updatedAt: time.meta({ description: 'Last activity; may trail the latest state write by a moment.' }),
  ttlSeconds: z
    .number()
    .int()
    .min(1)
    .nullable()
    .meta({ description: 'Idle expiry: the session expires this long after its last write (null: none).' }),
  expiresAt: time.nullable().meta({
    description:
      'When the session expires unless written again (null: never). In lists, from its activity: up to 20 s early for an idle expiry.',
  }),
  retention: retention.meta({ description: 'Which versions the session keeps (null: every one).' }),
});
const session = sessionSummary.extend({
  head: z.string().meta({ description: 'The current head node (`root` for a new session).' }),
  version: version.meta({ description: 'The latest recorded version (0: none); always exact.' }),
});
const sessionList = z.object({ sessions: z.array(sessionSummary), next });

const storedMessage = z.looseObject({ id: z.string(), parentId: z.string(), role: z.string().min(1) });
const messageNode = z.object({
  id: z.string(),
  parentId: z.string().nullable(),
  depth: z.number().int().min(0),
  role: z.string().nullable(),
  stateVersion: version,
  createdAt: time,
});
const appendResult = z.object({
  nodes: z.array(messageNode),
  head: z.string(),
  version: version.optional().meta({ description: 'With `state` or `replaceState`: the version the new head points at.' }),
  state: z.optional(jsonValue).meta({ description: "With `state` or `replaceState`: the new head's state." }),
  changed: z.boolean().optional().meta({ description: 'With `state` or `replaceState`: whether a version was recorded.' }),
});
const messagePath = z.object({
  messages: z.array(storedMessage).meta({ description: 'Root → node, oldest first, root excluded.' }),
  ancestry: z.array(z.string()).meta({
    description:
      'Node ids from `root` to the node, both included; with `last`, the ids of `messages` (and `root` first when nothing is omitted).',
  }),
  omitted: z.optional(z.number()).meta({ description: 'With `last`: how many messages of the path come before `messages`.' }),
});
const treeNode = messageNode.omit({ createdAt: true }).extend({
  preview: z.string().nullable().optional().meta({ description: 'With `?preview=1`: a one-line snippet (null for `root`).' }),
});
const nodeNotes = z.record(z.string(), jsonValue).meta({ description: "A node's notes: key → value (docs/api.md, a note beside a node)." });
/** `notesNext` of a read that carries notes: present when more notes are left than the answer holds. */
const notesNext = z
  .string()
  .optional()
  .meta({ description: 'Present when more notes are left than this answer holds: pass it as `cursor` to `GET …/notes` (the same nodes).' });
const tree = z.object({
  head: z.string(),
  nodes: z.array(treeNode),
  next,
  notes: z
    .record(z.string(), nodeNotes)
    .optional()
    .meta({ description: 'With `?notes=1`: the notes of each node that has any, by node id.' }),
  notesNext,
});
const nodePage = z.object({
  head: z.string(),
  version: version.meta({ description: "The session's newest version when the page was read." }),
  nodes: z.array(messageNode).meta({ description: 'By id, from the last.' }),
  next,
});
const notePage = z.object({
  notes: z.record(z.string(), nodeNotes).meta({ description: 'Notes by node id, then key, in that order.' }),
  next,
});
const noteResult = z.object({ sessionId: idSchema, node: z.string(), key: z.string() });
const headResult = z.object({ head: z.string() });

const stateView = z.object({
  sessionId: idSchema,
  node: z.string(),
  version,
  state: jsonValue,
  agent: jsonValue,
  updatedAt: time.nullable(),
  notes: nodeNotes.optional().meta({ description: "With `?notes=1`: the node's notes." }),
  notesNext,
});
const writeResult = z.object({
  sessionId: idSchema,
  node: z.string(),
  version,
  prevVersion: version,
  state: jsonValue,
  changed: z.boolean(),
});
const cause = z.enum(['patch', 'replace', 'decide', 'commit']);
const versionRecord = z.object({
  version,
  node: z.string(),
  prevVersion: version,
  cause,
  author: z.string().nullable(),
  decisionId: z.string().optional(),
  createdAt: time,
  state: jsonValue,
  agent: jsonValue,
});
const versionList = z.object({
  versions: z.array(versionRecord),
  next,
  pruned: z.object({ before: version }).optional().meta({
    description:
      "Present when the session's retention pruned history: versions older than `before` may be missing (those a node points at are listed).",
  }),
  notes: z
    .record(z.string(), nodeNotes)
    .optional()
    .meta({ description: 'With `?notesOf=`: the notes of each named node that has any, by node id.' }),
  notesNext,
});
const routingHop = z.union([
  z.object({
    from: idSchema,
    to: idSchema,
    via: z.literal('route'),
    index: z.number().int().meta({ description: "The route's place in `from`'s routes." }),
  }),
  z.object({ from: idSchema, to: idSchema, via: z.literal('handoff'), reason: z.string().nullable() }),
]);
const decisionSummary = z.object({
  decisionId: z.string(),
  agentId: z.nullable(idSchema).meta({ description: 'The agent whose worker decided.' }),
  routedFrom: z.nullable(idSchema).meta({ description: 'The agent the decision started at, when another decided.' }),
  routing: z
    .array(routingHop)
    .meta({ description: 'The hops that led to `agentId`, in order; empty when the agent it started at decided.' }),
  version,
  createdAt: time,
});
const decisionList = z.object({ decisions: z.array(decisionSummary), next });

const fieldScope = z.union([z.literal('private'), z.literal('public'), z.object({ agents: z.array(idSchema) })]);
const fieldDeclaration = z.object({
  type: z.enum(FIELD_TYPES),
  description: z.string().optional(),
  updateRules: z.string().optional(),
  read: fieldScope,
  write: fieldScope,
  migrate: z.literal('clear').optional(),
});
const agent = z.object({
  agentId: idSchema,
  parentId: z.nullable(idSchema),
  worker: z
    .object({
      url: z.string(),
      timeoutMs: z.number().int().nullable(),
      hasSecret: z.boolean(),
      // Absent when the worker is shown every message (the default).
      messages: z.object({ last: z.number().int() }).optional(),
    })
    .nullable(),
  config: jsonValue,
  stateFields: z.record(z.string(), fieldDeclaration).nullable(),
  lifetime: z
    .object({ ttlSeconds: z.number().int().min(1).nullable().optional(), retention: retention.optional() })
    .nullable()
    .meta({ description: "What the agent's new sessions live by (API.md section 12), over the deployment's defaults." }),
  documents: z
    .object({ shared: z.literal('write').optional() })
    .nullable()
    .meta({ description: '`{"shared": "write"}`: a key limited to this agent may write the tenant\'s `shared` document.' }),
  routes: z
    .array(
      z.object({
        when: jsonObject.meta({ description: "A filter over the state's top-level fields (section 10's operators and `$exists`)." }),
        to: idSchema,
      }),
    )
    .optional()
    .meta({ description: 'Tried in order at each decision of its sessions (API.md section 13); absent when none.' }),
  createdAt: time,
  updatedAt: time,
});
const agentList = z.object({ agents: z.array(agent), next });

const decideResult = z.object({
  decisionId: z.string(),
  decision: jsonObject.meta({ description: "The worker's answer as it gave it (`proposed` without a worker)." }),
  state: jsonValue,
  agent: jsonValue,
  version,
  changed: z.boolean(),
  head: z.string(),
});

const documentView = z.object({ version, state: jsonValue, updatedAt: time.nullable() });
const runDocument = documentView.extend({ sessionId: idSchema, runId: idSchema });
const profileDocument = documentView.extend({ userId: idSchema });
const commitResult = z.object({
  sessionId: idSchema,
  node: z.string(),
  version,
  state: jsonValue,
  changed: z.boolean(),
  run: documentView.extend({ runId: idSchema }).optional(),
  profile: documentView.extend({ userId: idSchema }).optional(),
  shared: documentView.optional(),
});

/** One RFC 6902 operation, as an event of a large state carries its change (`jsonPatch`). */
const jsonPatchOperation = z.union([
  z.object({ op: z.enum(['add', 'replace', 'test']), path: z.string(), value: jsonValue }),
  z.object({ op: z.literal('remove'), path: z.string() }),
  z.object({ op: z.enum(['move', 'copy']), path: z.string(), from: z.string() }),
]);
const stateChangedEvent = z.object({
  id: z.string().meta({ description: '`<sessionId>:<version>`, the same on every redelivery' }),
  type: z.literal('state.changed'),
  sessionId: idSchema,
  node: z.string(),
  version,
  prevVersion: version,
  cause,
  author: z.string().nullable(),
  decisionId: z.string().nullable(),
  next: z.optional(jsonValue).meta({ description: 'the state this version recorded; left out when `truncated` and in `mode: "patch"`' }),
  prev: z.optional(jsonValue).meta({ description: 'the state of `prevVersion`; left out as `next` is' }),
  patch: z
    .optional(jsonValue)
    .meta({ description: 'the RFC 7396 merge patch turning `prev` into `next`; left out past 64 KiB or when no merge patch can' }),
  jsonPatch: z
    .array(jsonPatchOperation)
    .optional()
    .meta({ description: 'on events of large states: the same change as RFC 6902 operations; left out as `patch` is' }),
  agent: z.optional(jsonValue),
  occurredAt: time,
  truncated: z
    .literal(true)
    .optional()
    .meta({ description: '`next` and `prev` together passed 64 KiB (or the channel is smaller than the event): they are left out' }),
  viewError: z.object({ code: z.string(), fields: z.array(z.unknown()) }).optional(),
});
const documentChangedEvent = z.object({
  id: z.string(),
  type: z.enum(['run.changed', 'profile.changed', 'shared.changed']),
  scope: z.enum(['run', 'profile', 'shared']),
  sessionId: idSchema,
  runId: z.optional(idSchema),
  userId: z.optional(idSchema),
  version,
  prevVersion: version,
  cause: z.literal('commit'),
  author: z.string().nullable(),
  next: z.optional(jsonValue),
  prev: z.optional(jsonValue),
  patch: z.optional(jsonValue),
  occurredAt: time,
  truncated: z.literal(true).optional(),
});
const memoryChangedEvent = z.object({
  id: z.string(),
  type: z.literal('memory.changed'),
  namespace: z.array(idSchema).min(1).max(8),
  key: idSchema,
  version: version.meta({ description: "The item's version after the change; a delete is the version after the last put." }),
  prevVersion: version,
  cause: z.enum(['put', 'delete']),
  author: z.string().nullable(),
  next: jsonObject
    .nullable()
    .optional()
    .meta({ description: 'the value after the change (null for a delete); left out as on `state.changed`' }),
  prev: jsonObject.nullable().optional().meta({ description: 'the value of `prevVersion` (null for a new item); left out as `next` is' }),
  patch: z.optional(jsonValue).meta({ description: 'the RFC 7396 merge patch turning `prev` into `next` (null for a delete)' }),
  createdAt: time,
  expiresAt: time.optional(),
  occurredAt: time,
  truncated: z.literal(true).optional(),
});
const sessionExpiredEvent = z.object({
  id: z.string().meta({ description: '`expired/<sessionId>/<life>`' }),
  type: z.literal('session.expired'),
  sessionId: idSchema,
  version: version.meta({ description: 'The last version of the life that expired (0: none).' }),
  agentId: z.nullable(idSchema),
  userId: z.nullable(idSchema),
  expiredAt: time.meta({ description: 'The moment the session expired; it has read as unknown since.' }),
  occurredAt: time.meta({ description: 'When the expiry was carried out (the first write after it, or the sweep within 48 h).' }),
});
const userErasedEvent = z.object({
  id: z.string().meta({ description: '`erased/<erasureId>`' }),
  type: z.literal('user.erased'),
  sessionId: z.literal('').meta({ description: 'Empty: an erasure is of no one session.' }),
  erasureId: z.string(),
  userId: idSchema,
  sessions: count,
  memoryItems: count,
  documents: count,
  occurredAt: time.meta({ description: 'When the erasure was done.' }),
});
const changeEvent = z.union([stateChangedEvent, documentChangedEvent, sessionExpiredEvent, userErasedEvent, memoryChangedEvent]);

const erasureStarted = z.object({ erasureId: z.string() });
const erasure = z.object({
  erasureId: z.string(),
  status: z.enum(['running', 'done']),
  sessions: count.meta({ description: 'Sessions erased (closed, while running).' }),
  memoryItems: count.meta({ description: 'Memory items erased.' }),
  documents: count.meta({ description: "Documents erased: the user's profile." }),
  createdAt: time,
  finishedAt: time.optional(),
});

const webhook = z.object({
  id: z.string(),
  url: z.string(),
  sessionId: z.nullable(idSchema),
  agentId: z.optional(idSchema),
  hasSecret: z.boolean(),
  createdAt: time,
});
const webhookList = z.object({ webhooks: z.array(webhook), next });
const deadLetter = z.object({
  eventId: z.string(),
  sessionId: z.union([idSchema, z.literal('')]).meta({ description: 'The session of the event; empty for a memory event.' }),
  version,
  attempts: z.number().int().min(0).meta({ description: 'Delivery attempts; 0 for an event held back behind an earlier failure.' }),
  lastError: z.string(),
  firstFailedAt: time,
  lastFailedAt: time,
  event: changeEvent,
});
const deadLetterList = z.object({ deadLetters: z.array(deadLetter), next });
const replayResult = z.object({
  delivered: z.number().int().min(0),
  failed: z.object({ eventId: z.string(), error: z.string() }).nullable(),
  remaining: z.boolean(),
});

const errorCodes = Object.keys(errorStatus) as ErrorCode[];
const memoryItem = z.object({
  namespace: z.array(idSchema).min(1).max(8),
  key: idSchema,
  value: jsonObject,
  version: z.number().int().min(1).meta({ description: "The item's writes, 1, 2, 3, … since it was created." }),
  createdAt: time,
  updatedAt: time,
  expiresAt: time.optional().meta({ description: 'Present for an item put with `ttlSeconds`; never returned after it.' }),
  embedding: z
    .array(z.number())
    .optional()
    .meta({ description: "The item's embedding as stored (32-bit floats), only with `includeEmbedding`." }),
  score: z
    .number()
    .optional()
    .meta({ description: "In a search with `vector`: the cosine of the item's embedding and the vector, 1 = same direction." }),
});
const memoryItemList = z.object({ items: z.array(memoryItem), next });
const memoryNamespaceList = z.object({ namespaces: z.array(z.array(idSchema).min(1).max(8)), next });
const memoryVersionList = z.object({ versions: z.array(memoryItem), next });

/** RFC 9457, with the API's `code` and whatever members the error adds (`currentVersion`, `limitBytes`, `field`, …). */
const problem = z.looseObject({
  type: z.string(),
  title: z.string(),
  status: z.number().int(),
  code: z.enum(errorCodes),
  detail: z.string(),
});

/** The schemas the document names, `#/components/schemas/<name>`. */
export const components = {
  Json: jsonValue,
  Health: health,
  Session: session,
  SessionSummary: sessionSummary,
  SessionList: sessionList,
  StoredMessage: storedMessage,
  MessageNode: messageNode,
  AppendResult: appendResult,
  MessagePath: messagePath,
  TreeNode: treeNode,
  Tree: tree,
  NodePage: nodePage,
  HeadResult: headResult,
  NoteResult: noteResult,
  NotePage: notePage,
  StateView: stateView,
  WriteResult: writeResult,
  Version: versionRecord,
  VersionList: versionList,
  DecisionList: decisionList,
  FieldDeclaration: fieldDeclaration,
  Agent: agent,
  AgentList: agentList,
  DecideResult: decideResult,
  DocumentView: documentView,
  RunDocument: runDocument,
  ProfileDocument: profileDocument,
  CommitResult: commitResult,
  StateChangedEvent: stateChangedEvent,
  DocumentChangedEvent: documentChangedEvent,
  MemoryChangedEvent: memoryChangedEvent,
  SessionExpiredEvent: sessionExpiredEvent,
  UserErasedEvent: userErasedEvent,
  ErasureStarted: erasureStarted,
  Erasure: erasure,
  ChangeEvent: changeEvent,
  JsonPatchOperation: jsonPatchOperation,
  Webhook: webhook,
  WebhookList: webhookList,
  DeadLetter: deadLetter,
  DeadLetterList: deadLetterList,
  ReplayResult: replayResult,
  MemoryItem: memoryItem,
  MemoryItemList: memoryItemList,
  MemoryNamespaceList: memoryNamespaceList,
  MemoryVersionList: memoryVersionList,
  Problem: problem,
} satisfies Record<string, z.core.$ZodType>;

export type ComponentName = keyof typeof components;
