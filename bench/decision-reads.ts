/**
 * What a decision reads beyond the messages it hands its worker (issue 33: "a decision reads ≤ 3
 * read units beyond the messages it hands the worker (`{"last": 20}`), at depth 10 and 10,000
 * alike"). One agent whose worker is shown its last 20 messages, on two sessions of one tenant:
 * one of 10 messages, made as five turns of a chat (the user's message, a decision with one
 * reply, a small PATCH), and one of 10,000, made as 9,940 messages in appends of 25 and then 30
 * such turns, so that its log's newest changes look like any long conversation's. Each decision
 * measured is one more turn; its read units are the ones DynamoDB reported for every request it
 * made (ReturnConsumedCapacity, the registry read included as its first of a second is), and
 * "its messages" are the bytes of the messages the worker was shown, priced as a consistent read
 * of exactly those bytes (bytes / 4 KB).
 */

import { invalidateTenant } from '../functions/core/kernel/tenant-cache.js';
import { dependenciesFor } from '../functions/http/dependencies.js';
import { createStores } from '../functions/store/index.js';
import { dynamoDbClient } from '../functions/store/table/client.js';
import { ensureTable } from '../functions/store/table/table.js';

export interface DecisionReads {
  depth: number;
  /** Decisions measured at this depth. */
  decisions: number;
  /** Mean read units of a decision (every request it made). */
  readUnits: number;
  /** Mean units of the messages it handed its worker (their bytes / 4 KB). */
  messageUnits: number;
  /** Mean messages the worker was shown. */
  messages: number;
  /** Mean DynamoDB requests of a decision (the worker call aside). */
  requests: number;
}

const TENANT = 'reads';
const AGENT = 'last-20';
const TURNS_MEASURED = 3;

/**
 * Measures decisions at each of `depths` (10 and 10,000 on the page) on a table of its own in
 * DynamoDB Local at `endpoint`. `appendSize`: the messages of each append before the chat turns
 * (25 on the page). A decision reads the 48 newest changes of the log at most, all of them chat
 * turns at depth 1,000 and deeper whatever the appends before them, so the test's larger appends
 * (half the requests to build depth 10,000) leave its figures as they are.
 */
export async function measureDecisionReads(
  endpoint: string,
  depths: readonly number[] = [10, 10_000],
  { appendSize = 25 }: { appendSize?: number } = {},
): Promise<DecisionReads[]> {
  const tableName = `decision-reads-${Date.now().toString(36)}`;
  let readUnits = 0;
  let requests = 0;
  let shownBytes = 0;
  let shownMessages = 0;
  const client = dynamoDbClient({ AGENTSTATE_DYNAMODB_ENDPOINT: endpoint });
  client.middlewareStack.add(
    (next, context) => async (args) => {
      (args.input as { ReturnConsumedCapacity?: string }).ReturnConsumedCapacity ??= 'TOTAL';
      const result = await next(args);
      requests++;
      if (/Get|Query|Scan/.test(String(context.commandName))) {
        const consumed = (result.output as { ConsumedCapacity?: unknown }).ConsumedCapacity;
        for (const entry of ([] as Array<{ CapacityUnits?: number }>).concat((consumed as never) ?? []))
          readUnits += entry.CapacityUnits ?? 0;
      }
      return result;
    },
    { step: 'initialize', name: 'decisionReads' },
  );
  await ensureTable(client, tableName);
  const deps = dependenciesFor(createStores(client, tableName), {
    invokeWorker: async (_worker, body) => {
      const request = JSON.parse(body) as { state: { turns?: number } | null; messages: unknown[] };
      shownBytes += Buffer.byteLength(JSON.stringify(request.messages));
      shownMessages += request.messages.length;
      const turns = (request.state?.turns ?? 0) + 1;
      return { state: { turns }, messages: [{ role: 'assistant', content: `answer ${turns}: ${'a few words '.repeat(6)}` }] };
    },
  });
  try {
    await deps.agents.putAgent(TENANT, AGENT, { worker: { url: 'module:examples/worker.ts', messages: { last: 20 } } });
    const turn = async (scope: { tenant: string; sessionId: string }, n: number) => {
      await deps.sessions.appendMessages(scope, { messages: [{ role: 'user', content: `question ${n}: ${'some words '.repeat(6)}` }] });
      const before = { readUnits, requests };
      invalidateTenant('registry', TENANT);
      await deps.decide.decide(scope, { agentId: AGENT, trigger: { type: 'user.turn', turn: n } });
      const cost = { readUnits: readUnits - before.readUnits, requests: requests - before.requests };
      await deps.sessions.patchState(scope, { lastTurn: n });
      return cost;
    };
    const results: DecisionReads[] = [];
    for (const depth of depths) {
      const scope = { tenant: TENANT, sessionId: `depth-${depth}` };
      await deps.sessions.createSession(TENANT, { sessionId: scope.sessionId, agentId: AGENT });
      // Ten messages: two turns, then the three measured; deeper: appends, then 30 turns.
      const chatTurns = depth <= 10 ? 2 : 30;
      const appended = Math.max(0, depth - 2 * (chatTurns + TURNS_MEASURED));
      for (let made = 0; made < appended; made += appendSize) {
        const messages = Array.from({ length: Math.min(appendSize, appended - made) }, (_, index) => ({
          role: index % 2 === 0 ? 'user' : 'assistant',
          content: `message ${made + index}: ${'some words '.repeat(6)}`,
        }));
        await deps.sessions.appendMessages(scope, { messages });
      }
      for (let n = 1; n <= chatTurns; n++) await turn(scope, n);
      let measured = { readUnits: 0, requests: 0 };
      shownBytes = 0;
      shownMessages = 0;
      for (let n = 1; n <= TURNS_MEASURED; n++) {
        const cost = await turn(scope, chatTurns + n);
        measured = { readUnits: measured.readUnits + cost.readUnits, requests: measured.requests + cost.requests };
      }
      results.push({
        depth,
        decisions: TURNS_MEASURED,
        readUnits: measured.readUnits / TURNS_MEASURED,
        messageUnits: shownBytes / 4096 / TURNS_MEASURED,
        messages: shownMessages / TURNS_MEASURED,
        requests: measured.requests / TURNS_MEASURED,
      });
    }
    return results;
  } finally {
    client.destroy();
  }
}

/** The rows the partition-load section shows under its table. */
export function decisionReadsText(rows: readonly DecisionReads[]): string {
  const units = (value: number) => value.toFixed(2);
  const lines = rows.map(
    (row) =>
      `| ${row.depth.toLocaleString('en-US')} | ${units(row.readUnits)} | ${row.messages.toFixed(0)} | ${units(row.messageUnits)} | **${units(row.readUnits - row.messageUnits)}** | ${row.requests.toFixed(1)} |`,
  );
  return `| depth | read units of a decision | messages shown | their units (bytes / 4 KB) | beyond its messages (target ≤ 3) | DynamoDB requests |
| --: | --: | --: | --: | --: | --: |
${lines.join('\n')}`;
}
