/**
 * The partition-load measurement (issue 33): many conversations of one tenant driven through
 * the real HTTP API of `npm start` (startLocalServer: the handlers, the change hook and the
 * webhook hook on the table's stream), with every DynamoDB request priced per partition key by
 * a recording proxy (dynamodb-recorder.ts) and every index write priced from the stream
 * (index-writes.ts). A turn is what a chat client sends for one exchange, each write with its
 * own `Idempotency-Key` as @agentstate/client does by default:
 *
 *   POST  /v1/sessions/{sid}/messages   the user's message
 *   POST  /v1/sessions/{sid}/decide     the worker (in-process) answers with one reply and a state
 *   PATCH /v1/sessions/{sid}/state      a small merge patch
 *   GET   /v1/sessions/{sid}/state, GET /v1/sessions/{sid}/messages
 *
 * Keys are sorted by who shares them: a key that names a conversation (its session or its user)
 * takes only that conversation's turns; an `Idempotency-Key` record only its request's; every
 * other key is the tenant's, shared by all its conversations, and its cost per turn is what
 * bounds the tenant: DynamoDB gives one partition key about 1,000 write and 3,000 read units a
 * second, in the table and in every index alike.
 */
import { randomUUID } from 'node:crypto';
import { dependenciesFor, useDependencies } from '../functions/http/dependencies.js';
import { keysFromEnv } from '../functions/http/edge/auth.js';
import { startLocalServer } from '../functions/local/server.js';
import { createStores } from '../functions/store/index.js';
import { dynamoDbClient } from '../functions/store/table/client.js';
import { type DecisionReads, decisionReadsText, measureDecisionReads } from './decision-reads.js';
import { type KeyCharge, type RecordedRequest, startDynamoDbRecorder } from './dynamodb-recorder.js';
import { IndexWriteTap } from './index-writes.js';

/** What DynamoDB gives one partition key a second (table and every index alike). */
const PARTITION_LIMITS = { readUnits: 3_000, writeUnits: 1_000 };

export interface PartitionLoadOptions {
  conversations: number;
  turnsEach: number;
  /**
   * Bytes of session metadata each conversation is created with, beside its one listed string
   * (`plan`): in a nested object, so that the session is in the same lists whatever the size. @default 0
   */
  metadataBytes?: number;
  /** Runs the same load again with this many bytes of session metadata, after the first (`PartitionLoad.withMetadata`). */
  compareMetadataBytes?: number;
  /** The depths to measure a decision's reads at, after the load (decision-reads.ts); none when absent. */
  decisionDepths?: readonly number[];
}

/** Who shares a key: every conversation of the tenant, one conversation, or one request. */
export type KeyScope = 'tenant' | 'conversation' | 'request';

export interface KeyLoad {
  key: string;
  /** `table` or an index's name. */
  where: string;
  scope: KeyScope;
  /** The key with its conversation's or request's id (and a shard number) put as a placeholder. */
  family: string;
  readUnits: number;
  writeUnits: number;
  /** Requests (or index writes) that touched it. */
  reads: number;
  writes: number;
}

export interface PartitionLoad {
  conversations: number;
  turns: number;
  /** How long the turns took, from the first request to the last answer. */
  seconds: number;
  /** Every key touched during the turns (and by the hooks that followed them). */
  keys: KeyLoad[];
  table: { readUnits: number; writeUnits: number };
  indexes: { readUnits: number; writeUnits: number };
  /** DynamoDB requests by operation, and the failed ones by error. */
  requests: Record<string, number>;
  /** Units by what spent them: an operation, a transaction's item by its kind, or `index write`. */
  byOperation: Record<string, { readUnits: number; writeUnits: number }>;
  errors: Record<string, number>;
  /** A decision's reads beyond the messages it hands its worker, at depth 10 and 10,000 (decision-reads.ts). */
  decisions?: DecisionReads[];
  /** The same load with `compareMetadataBytes` of session metadata: what a turn costs when the sessions carry that much. */
  withMetadata?: { metadataBytes: number; load: PartitionLoad };
}

const TENANT = 'load';
const API_KEY = 'load-key';
const AGENT = 'load-agent';
const conversationId = (index: number) => `conv-${index}`;
const userId = (index: number) => `user-${index}`;

/** Runs the load on a server of its own (one per process: it configures the handlers through the environment). */
export async function measurePartitionLoad(options: PartitionLoadOptions): Promise<PartitionLoad> {
  const { compareMetadataBytes, ...first } = options;
  const load = await measureOnce(first);
  if (compareMetadataBytes === undefined) return load;
  const { decisionDepths: _, ...same } = first;
  return {
    ...load,
    withMetadata: { metadataBytes: compareMetadataBytes, load: await measureOnce({ ...same, metadataBytes: compareMetadataBytes }) },
  };
}

async function measureOnce(options: PartitionLoadOptions): Promise<PartitionLoad> {
  const tableName = `partition-load-${Date.now().toString(36)}`;
  const server = await startLocalServer({ port: 0, dataDir: 'memory', apiKeys: `${TENANT}:${API_KEY}`, tableName });
  const recorder = await startDynamoDbRecorder(server.dynamoDb.endpoint);
  // The hooks build their stores from the environment on their first batch: through the proxy too.
  const endpointBefore = process.env.AGENTSTATE_DYNAMODB_ENDPOINT;
  process.env.AGENTSTATE_DYNAMODB_ENDPOINT = recorder.url;
  const client = dynamoDbClient({ AGENTSTATE_DYNAMODB_ENDPOINT: recorder.url });
  const tap = new IndexWriteTap(client, tableName, server.dynamoDb.endpoint);
  useDependencies(
    dependenciesFor(createStores(client, tableName), { resolveKey: keysFromEnv(`${TENANT}:${API_KEY}`), invokeWorker: replyWorker }),
  );
  try {
    await tap.open();
    const api = apiOf(server.url);
    await api('PUT', `/v1/agents/${AGENT}`, { worker: { url: 'module:examples/worker.ts' }, config: { model: 'fast' } });
    const metadata = { plan: 'pro', ...(options.metadataBytes ? { details: { notes: 'x'.repeat(options.metadataBytes) } } : {}) };
    for (let index = 0; index < options.conversations; index++) {
      await api('POST', '/v1/sessions', { sessionId: conversationId(index), agentId: AGENT, userId: userId(index), metadata });
    }
    // What the set-up cost is not the turns' (creating a session is once per conversation).
    await settle();
    recorder.take();
    await tap.take();

    const started = performance.now();
    await Promise.all(
      Array.from({ length: options.conversations }, async (_, index) => {
        const path = `/v1/sessions/${conversationId(index)}`;
        for (let turn = 1; turn <= options.turnsEach; turn++) {
          await api('POST', `${path}/messages`, { messages: [{ role: 'user', content: `question ${turn}: ${'some words '.repeat(6)}` }] });
          await api('POST', `${path}/decide`, { agentId: AGENT, trigger: { type: 'user.turn', turn } });
          await api('PATCH', `${path}/state`, { lastTurn: turn });
          await api('GET', `${path}/state`);
          await api('GET', `${path}/messages`);
        }
      }),
    );
    const seconds = (performance.now() - started) / 1000;
    // The hooks read the stream every 100 ms: what the turns made them do belongs to the turns.
    await settle();
    const requests = recorder.take();
    const charges = [...requests.flatMap((request) => request.charges), ...(await tap.take())];
    const load = summarize(options.conversations, options.conversations * options.turnsEach, seconds, requests, charges);
    return options.decisionDepths === undefined
      ? load
      : { ...load, decisions: await measureDecisionReads(server.dynamoDb.endpoint, options.decisionDepths) };
  } finally {
    useDependencies(undefined);
    if (endpointBefore === undefined) delete process.env.AGENTSTATE_DYNAMODB_ENDPOINT;
    else process.env.AGENTSTATE_DYNAMODB_ENDPOINT = endpointBefore;
    tap.close();
    client.destroy();
    await server.stop();
    await recorder.close();
  }
}

/** The worker: one reply and a state change for any trigger, as a chat agent answers a turn. */
async function replyWorker(_worker: unknown, body: string): Promise<unknown> {
  const request = JSON.parse(body) as { state: { turns?: number } | null };
  const turns = (request.state?.turns ?? 0) + 1;
  return {
    state: { ...(request.state ?? {}), turns },
    messages: [{ role: 'assistant', content: `answer ${turns}: ${'a few words '.repeat(6)}` }],
  };
}

function apiOf(url: string) {
  return async (method: string, path: string, body?: unknown): Promise<unknown> => {
    const write = method !== 'GET';
    const response = await fetch(`${url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${API_KEY}`,
        ...(write ? { 'content-type': 'application/json', 'idempotency-key': randomUUID() } : {}),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await response.text();
    if (!response.ok) throw new Error(`${method} ${path} answered ${response.status}: ${text}`);
    return text ? JSON.parse(text) : undefined;
  };
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 1_500));

function scopeOf(key: string): KeyScope {
  if (/\bconv-\d+\b|\buser-\d+\b/.test(key)) return 'conversation';
  if (key.startsWith(`I#${TENANT}#`)) return 'request';
  return 'tenant';
}

function familyOf(key: string): string {
  return key
    .replace(/\bconv-\d+\b/g, '<session>')
    .replace(/\buser-\d+\b/g, '<user>')
    .replace(new RegExp(`^I#${TENANT}#.*`), `I#${TENANT}#<key>`)
    .replace(/#\d+$/, '#<shard>');
}

function summarize(
  conversations: number,
  turns: number,
  seconds: number,
  requests: RecordedRequest[],
  charges: KeyCharge[],
): PartitionLoad {
  const byKey = new Map<string, KeyLoad>();
  const table = { readUnits: 0, writeUnits: 0 };
  const indexes = { readUnits: 0, writeUnits: 0 };
  const byOperation: PartitionLoad['byOperation'] = {};
  for (const charge of charges) {
    const id = `${charge.where} ${charge.key}`;
    let load = byKey.get(id);
    if (!load) {
      load = {
        key: charge.key,
        where: charge.where,
        scope: scopeOf(charge.key),
        family: familyOf(charge.key),
        readUnits: 0,
        writeUnits: 0,
        reads: 0,
        writes: 0,
      };
      byKey.set(id, load);
    }
    load.readUnits += charge.readUnits;
    load.writeUnits += charge.writeUnits;
    if (charge.writeUnits > 0 || charge.operation === 'index write') load.writes++;
    else load.reads++;
    const spent = byOperation[charge.operation] ?? { readUnits: 0, writeUnits: 0 };
    byOperation[charge.operation] = spent;
    spent.readUnits += charge.readUnits;
    spent.writeUnits += charge.writeUnits;
    const total = charge.where === 'table' ? table : indexes;
    total.readUnits += charge.readUnits;
    total.writeUnits += charge.writeUnits;
  }
  const counted: Record<string, number> = {};
  const errors: Record<string, number> = {};
  for (const request of requests) {
    counted[request.operation] = (counted[request.operation] ?? 0) + 1;
    if (request.error) errors[request.error] = (errors[request.error] ?? 0) + 1;
  }
  return { conversations, turns, seconds, keys: [...byKey.values()], table, indexes, requests: counted, byOperation, errors };
}

/** A key's units per turn of the tenant, and the turns a second its partition allows. */
function keyCeiling(load: KeyLoad, turns: number): { readPerTurn: number; writePerTurn: number; turnsPerSecond: number } {
  const readPerTurn = load.readUnits / turns;
  const writePerTurn = load.writeUnits / turns;
  const turnsPerSecond = Math.min(
    readPerTurn > 0 ? PARTITION_LIMITS.readUnits / readPerTurn : Number.POSITIVE_INFINITY,
    writePerTurn > 0 ? PARTITION_LIMITS.writeUnits / writePerTurn : Number.POSITIVE_INFINITY,
  );
  return { readPerTurn, writePerTurn, turnsPerSecond };
}

/** The section's sizes: the issue's "40–100 conversations of one tenant". */
export const PARTITION_LOAD = { conversations: 40, turnsEach: 10, decisionDepths: [10, 10_000], compareMetadataBytes: 2_048 };

interface FamilyRow {
  where: string;
  family: string;
  scope: KeyScope;
  keys: number;
  readPerTurn: number;
  writePerTurn: number;
  /** The hottest key of the family, per turn of the tenant. */
  hottest: { readPerTurn: number; writePerTurn: number; turnsPerSecond: number };
}

/** Keys grouped by their shape, each with its hottest key. */
function familyRows(load: PartitionLoad): FamilyRow[] {
  const families = new Map<string, FamilyRow>();
  for (const key of load.keys) {
    const id = `${key.where} ${key.family}`;
    const ceiling = keyCeiling(key, load.turns);
    const row = families.get(id) ?? {
      where: key.where,
      family: key.family,
      scope: key.scope,
      keys: 0,
      readPerTurn: 0,
      writePerTurn: 0,
      hottest: { readPerTurn: 0, writePerTurn: 0, turnsPerSecond: Number.POSITIVE_INFINITY },
    };
    row.keys++;
    row.readPerTurn += ceiling.readPerTurn;
    row.writePerTurn += ceiling.writePerTurn;
    if (ceiling.turnsPerSecond < row.hottest.turnsPerSecond || row.keys === 1) row.hottest = ceiling;
    families.set(id, row);
  }
  return [...families.values()].sort((a, b) => a.hottest.turnsPerSecond - b.hottest.turnsPerSecond);
}

/** The turns a second the tenant's shared keys allow: the lowest ceiling among them. */
function tenantCeiling(load: PartitionLoad): number {
  return Math.min(...load.keys.filter((key) => key.scope === 'tenant').map((key) => keyCeiling(key, load.turns).turnsPerSecond));
}

const units = (value: number) => (value === 0 ? '0' : value < 0.01 ? value.toFixed(4) : value.toFixed(2));
const rate = (value: number) => (Number.isFinite(value) ? Math.round(value).toLocaleString('en-US') : 'no limit');

/** The section of docs/benchmarks.md. */
export function partitionLoadSection(load: PartitionLoad): string {
  const perTurn = (value: number) => units(value / load.turns);
  const requests = Object.values(load.requests).reduce((sum, count) => sum + count, 0);
  const who: Record<KeyScope, string> = {
    tenant: 'every conversation',
    conversation: 'one conversation',
    request: 'one request',
  };
  const rows = familyRows(load).map((row) => {
    // A conversation's own key takes that conversation's turns only: its limit is per conversation.
    const ceiling =
      row.scope === 'tenant'
        ? rate(row.hottest.turnsPerSecond)
        : row.scope === 'conversation'
          ? `${rate(row.hottest.turnsPerSecond / load.conversations)} per conversation`
          : '—';
    return `| \`${row.family}\` | ${row.where} | ${who[row.scope]} | ${row.keys} | ${units(row.readPerTurn)} | ${units(row.writePerTurn)} | ${units(row.hottest.readPerTurn)} / ${units(row.hottest.writePerTurn)} | ${ceiling} |`;
  });
  const ceiling = tenantCeiling(load);
  const spentText = Object.entries(load.byOperation)
    .sort(([, a], [, b]) => b.writeUnits + b.readUnits - (a.writeUnits + a.readUnits))
    .map(([name, spent]) => `\`${name}\` ${perTurn(spent.writeUnits)} / ${perTurn(spent.readUnits)}`)
    .join(', ');
  const errors = Object.entries(load.errors)
    .map(([name, count]) => `${count} ${name}`)
    .join(', ');
  return `## Partition load: one tenant, many conversations

${load.conversations} conversations of one tenant, ${load.turns / load.conversations} turns each, at once, through the HTTP API of
\`npm start\` (bench/partition-load.ts; \`npm run bench -- --only=partition\` prints it,
\`--partition-only\` writes this section). A turn is what a chat client sends: the user's message
(\`POST messages\`), a decision whose worker answers with one reply and a state (\`POST decide\`),
a small \`PATCH\` of the state, \`GET state\` and \`GET messages\`, each write with its own
\`Idempotency-Key\`. A recording proxy between the server and DynamoDB Local prices every request
per partition key, the change hook's and the webhook hook's included, as AWS would bill it: the
table's units as DynamoDB Local reports them (\`ReturnConsumedCapacity: INDEXES\`; a batch's split
over its keys) where it follows AWS's rules, and by those rules where it does not
(bench/capacity-rules.ts, the same estimator as the other sections' meter): every item of a
transaction at twice its larger size before or after in started KB (a \`ConditionCheck\` too; DynamoDB
Local rounds a transaction's total and prices checks in 4 KB steps), a cancelled transaction as if
it had written, a write whose condition failed at the item that is there, a read that found
nothing at its minimum. Every index write is priced from the stream's two images (a moved index
key is a delete and a put of the entry, each one unit per started KB of what the index projects).
${load.turns} turns took
${load.seconds.toFixed(1)} s (${rate(load.turns / load.seconds)} turns/s on this machine).

| key | table or index | shared by | keys | RCU per turn | WCU per turn | hottest key (RCU / WCU per turn) | turns/s its partition allows |
| --- | --- | --- | --: | --: | --: | --: | --: |
${rows.join('\n')}

A partition key gets about ${PARTITION_LIMITS.writeUnits.toLocaleString('en-US')} write and ${PARTITION_LIMITS.readUnits.toLocaleString('en-US')} read units a second, in the table and in every index
alike; "turns/s its partition allows" divides those by the hottest key's units per turn of
the whole tenant. For a key of one conversation (or one request) that is a bound on that
conversation alone. **The tenant's ceiling** (the lowest among the keys every conversation
shares): **${rate(ceiling)} turns/s** (target ≥ 20,000). What every conversation shares
costs time, not turns (a cached read once a second, an activity move once an interval), so
its units per turn fall as the tenant's rate rises, and the ceiling shown is a lower bound.

The whole table, per turn: **${perTurn(load.table.writeUnits + load.indexes.writeUnits)} write units** (${perTurn(load.table.writeUnits)} in the table, ${perTurn(load.indexes.writeUnits)} in
indexes; target ≤ 12) and **${perTurn(load.table.readUnits + load.indexes.readUnits)} read units** (target ≤ 8), in ${units(requests / load.turns)} DynamoDB
requests${errors ? ` (of which failed: ${errors})` : ''}. By what spent them, per turn (write / read units): ${spentText}.
The indexes' share (and the session items' in the table)
depends on how long the run took: a session's activity moves at most once every 20 s from when
it was made, just before its turns, so a session whose turns took less moves none.

No conversation here is followed over WebSocket. The change hook looks up a session's
followers (\`W#<tenant>#<session>\`, a strongly consistent \`Query\`: a read unit per session and
stream batch) only when one of the batch's versions carries a subscription's mark
(docs/architecture.md, "Looking for followers only where someone follows"): a followed
conversation's turn reads about two units more, one for each version it makes; before the
mark, every conversation's did (2.00 of 9.43 read units a turn).
${load.withMetadata ? withMetadataText(load.withMetadata) : ''}${load.decisions ? decisionsText(load.decisions) : ''}`;
}

function withMetadataText({ metadataBytes, load }: NonNullable<PartitionLoad['withMetadata']>): string {
  const perTurn = (value: number) => units(value / load.turns);
  const spent = Object.entries(load.byOperation)
    .sort(([, a], [, b]) => b.writeUnits + b.readUnits - (a.writeUnits + a.readUnits))
    .map(([name, units]) => `\`${name}\` ${perTurn(units.writeUnits)} / ${perTurn(units.readUnits)}`)
    .join(', ');
  return `
**The same load with ${(metadataBytes / 1024).toLocaleString('en-US')} KB of session metadata** (each session made with it, in the
same lists: the bytes are in a nested object, no string of its own), ${load.turns} turns in ${load.seconds.toFixed(1)} s: **${perTurn(load.table.writeUnits + load.indexes.writeUnits)} write units** a turn (${perTurn(load.table.writeUnits)} in the table, ${perTurn(load.indexes.writeUnits)} in indexes) and
**${perTurn(load.table.readUnits + load.indexes.readUnits)} read units**. By what spent them (write / read units): ${spent}.
A session's metadata is an item of its own beside the session item (docs/architecture.md, "The
session item and its metadata"): the writes that move the session's activity, and the first
change's transaction, rewrite the small session item only. Before, when the session item carried
the metadata, the same two loads cost 11.40 and 12.00 write units a turn (measured on efc1e90).
`;
}

function decisionsText(rows: readonly DecisionReads[]): string {
  return `
**A decision's reads beyond the messages it hands its worker** (bench/decision-reads.ts): an
agent shown its last 20 messages, on a session of 10 messages (chat turns: the user's message,
a decision with one reply, a small \`PATCH\`) and one of 10,000 (appends of 25, then 30 such
turns); each row the mean of three more turns' decisions, every request a decision makes
counted (the registry read too, as its instance's first of a second), the messages priced as a
consistent read of their bytes:

${decisionReadsText(rows)}
`;
}
