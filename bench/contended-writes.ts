/**
 * Many blind writers on one target at once (issue 33, API.md section 8): 100 clients commit
 * commutative keys to one shared document, one profile, one thread, PATCH distinct keys at one
 * node off the head, and append turns (messages with a state patch) under one message, all at
 * the same moment, through the HTTP API of `npm start` with every DynamoDB request recorded
 * (dynamodb-recorder.ts). For each path: the answers, the attempts at the target (the
 * conditional writes that claim its next version, lost races included), the units per write,
 * and whether every key is there with its versions contiguous. With `loaded`, a child process
 * burns a core meanwhile, as another tenant's work would.
 *
 * One difference from `npm start`: the handlers' DynamoDB client has no bound on its requests in
 * flight (`npm start` sets AGENTSTATE_DYNAMODB_MAX_IN_FLIGHT to 16; AWS has none). With that
 * bound, and a second core kept busy besides, 32 of the 100 turns used up the write path's 15 s
 * budget and answered 409 in one run where this client passed (session 20): the bound lines the
 * burst's requests up behind each other in this one process.
 *
 * The contention test (test/integration/contended-writes.test.ts) and the bench's
 * `--only=contended` section both run it.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { dependenciesFor, useDependencies } from '../functions/http/dependencies.js';
import { keysFromEnv } from '../functions/http/edge/auth.js';
import { startLocalServer } from '../functions/local/server.js';
import { createStores } from '../functions/store/index.js';
import { dynamoDbClient } from '../functions/store/table/client.js';
import { type RecordedRequest, startDynamoDbRecorder } from './dynamodb-recorder.js';

export interface ContendedPath {
  label: string;
  writes: number;
  /** Answers by HTTP status. */
  statuses: Record<string, number>;
  /** Writes that claimed (or tried to claim) the target's next version: conditional puts and transactions, and a document's keyed updates. */
  attempts: number;
  /** Of those, the ones that lost a race (their condition failed, or their transaction was cancelled). */
  lost: number;
  writeUnits: number;
  readUnits: number;
  requests: number;
  /** Requests by operation (and `<op> lost` for the ones that failed their condition). */
  operations: Record<string, number>;
  seconds: number;
  /** What is wrong with the outcome: a key missing, versions not contiguous, a version answered twice. */
  problems: string[];
}

export interface ContendedWrites {
  writers: number;
  loaded: boolean;
  paths: ContendedPath[];
}

/** What the bench measures: 100 writers, a core busy meanwhile. */
export const CONTENDED_WRITES = { writers: 100, loaded: true };

const TENANT = 'contended';
const API_KEY = 'contended-key';
const USER = 'user-1';

interface Answer {
  status: number;
  body: Record<string, unknown>;
}

/** Runs the five paths one after the other on a server of its own. */
export async function measureContendedWrites(options: {
  writers: number;
  loaded: boolean;
  /** Told each path's figures as soon as they are measured. */
  onPath?: (path: ContendedPath) => void;
}): Promise<ContendedWrites> {
  const tableName = `contended-${Date.now().toString(36)}`;
  const server = await startLocalServer({ port: 0, dataDir: 'memory', apiKeys: `${TENANT}:${API_KEY}`, tableName });
  const recorder = await startDynamoDbRecorder(server.dynamoDb.endpoint);
  const endpointBefore = process.env.AGENTSTATE_DYNAMODB_ENDPOINT;
  // The handlers build their stores from the environment on first use: through the recorder.
  process.env.AGENTSTATE_DYNAMODB_ENDPOINT = recorder.url;
  const client = dynamoDbClient({ AGENTSTATE_DYNAMODB_ENDPOINT: recorder.url });
  useDependencies(dependenciesFor(createStores(client, tableName), { resolveKey: keysFromEnv(`${TENANT}:${API_KEY}`) }));
  const api = apiOf(server.url);
  let burner: ChildProcess | undefined;
  try {
    const n = options.writers;
    // The sessions the clients commit from (one each for the documents), made before the burst.
    // A set-up request that failed fails the run here: a session missing from it would otherwise
    // show up later as a burst's write refused (a profile commit needs the session's user).
    const setUp = async (method: string, path: string, body: unknown) => {
      const answer = await api(method, path, body);
      if (answer.status >= 300) throw new Error(`set-up ${method} ${path} answered ${answer.status} ${JSON.stringify(answer.body)}`);
    };
    // Ten at a time (each its own id, so nothing contends; one after another took 3-4 s): all 100
    // at once through this unbounded client waited for its sockets past the SDK's bounds on a
    // loaded CI machine, and 7 answered 503, so their sessions had no user when the profile burst came.
    for (let first = 0; first < n; first += 10) {
      await Promise.all(
        Array.from({ length: Math.min(10, n - first) }, (_, offset) =>
          setUp('POST', '/v1/sessions', { sessionId: `s-${first + offset}`, userId: USER }),
        ),
      );
    }
    await setUp('POST', '/v1/sessions', { sessionId: 'thread', userId: USER });
    await setUp('POST', '/v1/sessions', { sessionId: 'node', userId: USER });
    await setUp('POST', '/v1/sessions/node/messages', { messages: [{ id: 'first', role: 'user', content: 'hi' }] });
    await setUp('POST', '/v1/sessions/node/messages', { messages: [{ id: 'second', role: 'user', content: 'and then' }] });
    await setUp('POST', '/v1/sessions/turns/messages', {
      messages: [{ id: 'q', role: 'user', content: 'hi' }],
      replaceState: { base: true },
    });
    // One write of each kind first, elsewhere, so that the burst does not pay for loading code.
    const warm = (scope: string) =>
      setUp('POST', '/v1/sessions/warm/commits', { commands: [{ key: 'warm', scope, merge: 'commutative', set: { by: 'warm' } }] });
    await setUp('POST', '/v1/sessions', { sessionId: 'warm', userId: USER });
    for (const scope of ['shared', 'profile', 'thread']) await warm(scope);
    await setUp('PATCH', '/v1/sessions/warm/state', { warm: true });
    if (options.loaded) burner = burnACore();

    const measured: ContendedPath[] = [];
    const paths = {
      push: (path: ContendedPath) => {
        measured.push(path);
        options.onPath?.(path);
      },
    };
    const commit = (sessionId: string, scope: string, index: number) =>
      api('POST', `/v1/sessions/${sessionId}/commits`, {
        commands: [{ key: `k${index}`, scope, merge: 'commutative', set: { by: index } }],
      });

    paths.push(
      await burst(recorder, 'commits to one shared document', n, (index) => commit(`s-${index}`, 'shared', index), {
        isTarget: (key, sort) => key === `A#${TENANT}` && sort === 'G',
        check: async (answers) => {
          const shared = (await api('GET', '/v1/shared/state')).body;
          return documentProblems(
            shared,
            answers.map((answer) => (answer.body.shared as { version?: number } | undefined)?.version),
            n,
            1,
          );
        },
      }),
    );
    paths.push(
      await burst(recorder, 'commits to one profile', n, (index) => commit(`s-${index}`, 'profile', index), {
        isTarget: (key, sort) => key === `P#${TENANT}#${USER}` && sort === 'P',
        check: async (answers) => {
          const profile = (await api('GET', `/v1/profiles/${USER}/state`)).body;
          return documentProblems(
            profile,
            answers.map((answer) => (answer.body.profile as { version?: number } | undefined)?.version),
            n,
            1,
          );
        },
      }),
    );
    paths.push(
      await burst(recorder, 'commits to one thread', n, (index) => commit('thread', 'thread', index), {
        isTarget: (key, sort) => key === `S#${TENANT}#thread` && (sort?.startsWith('V#') ?? false),
        check: async (answers) => threadProblems(api, 'thread', undefined, answers, n, 0),
      }),
    );
    paths.push(
      await burst(
        recorder,
        'merge patches at one node off the head',
        n,
        (index) => api('PATCH', '/v1/sessions/node/state?node=first', { [`k${index}`]: { by: index } }),
        {
          isTarget: (key, sort) => key === `S#${TENANT}#node` && (sort?.startsWith('V#') ?? false),
          check: async (answers) => threadProblems(api, 'node', 'first', answers, n, 0),
        },
      ),
    );
    paths.push(
      await burst(
        recorder,
        'turns on one session (messages with a state patch)',
        n,
        (index) =>
          api('POST', '/v1/sessions/turns/messages', {
            parentId: 'q',
            messages: [{ id: `t${index}`, role: 'assistant', content: 'hello' }],
            state: { [`k${index}`]: { by: index } },
          }),
        {
          isTarget: (key, sort) => key === `S#${TENANT}#turns` && (sort?.startsWith('V#') ?? false),
          check: async (answers) => turnProblems(api, 'turns', answers, n, 1),
        },
      ),
    );
    return { writers: n, loaded: options.loaded, paths: measured };
  } finally {
    burner?.kill('SIGKILL');
    useDependencies(undefined);
    if (endpointBefore === undefined) delete process.env.AGENTSTATE_DYNAMODB_ENDPOINT;
    else process.env.AGENTSTATE_DYNAMODB_ENDPOINT = endpointBefore;
    client.destroy();
    await server.stop();
    await recorder.close();
  }
}

/** Sends `writes` writes at once and prices what they cost. */
async function burst(
  recorder: { take(): RecordedRequest[] },
  label: string,
  writes: number,
  write: (index: number) => Promise<Answer>,
  target: { isTarget: (key: string, sortKey: string | undefined) => boolean; check: (answers: Answer[]) => Promise<string[]> },
): Promise<ContendedPath> {
  recorder.take();
  const started = performance.now();
  const answers = await Promise.all(Array.from({ length: writes }, (_, index) => write(index)));
  const seconds = (performance.now() - started) / 1000;
  // The recorder prices an answer after it has passed it on: give the last ones a moment.
  await new Promise((resolve) => setTimeout(resolve, 200));
  const requests = recorder.take();
  const statuses: Record<string, number> = {};
  for (const answer of answers) statuses[answer.status] = (statuses[answer.status] ?? 0) + 1;
  const claims = requests.filter(
    (request) =>
      (request.operation === 'PutItem' || request.operation === 'UpdateItem' || request.operation === 'TransactWriteItems') &&
      request.charges.some((charge) => target.isTarget(charge.key, charge.sortKey)),
  );
  const problems = answers
    .filter((answer) => answer.status !== 200 && answer.status !== 201)
    .map((answer) => `${answer.status} ${JSON.stringify(answer.body)}`);
  problems.push(...(await target.check(answers)));
  return {
    label,
    writes,
    statuses,
    attempts: claims.length,
    lost: claims.filter((request) => request.error !== undefined).length,
    writeUnits: sum(requests.flatMap((request) => request.charges.map((charge) => charge.writeUnits))),
    readUnits: sum(requests.flatMap((request) => request.charges.map((charge) => charge.readUnits))),
    requests: requests.length,
    operations: countOperations(requests),
    seconds,
    problems,
  };
}

/** A document at version `before` written by `writes` commits: every key there, the next `writes` versions, each answered once. */
function documentProblems(
  document: Record<string, unknown>,
  answered: Array<number | undefined>,
  writes: number,
  before: number,
): string[] {
  const problems: string[] = [];
  const state = (document.state ?? {}) as Record<string, unknown>;
  for (let index = 0; index < writes; index++) if (!(`k${index}` in state)) problems.push(`k${index} is missing`);
  const last = before + writes;
  if (document.version !== last) problems.push(`the document is at version ${String(document.version)}, not ${last}`);
  const versions = new Set(answered);
  if (versions.size !== writes || [...versions].some((version) => version === undefined || version <= before || version > last)) {
    problems.push(`the answers' versions are not ${before + 1}..${last} once each: ${JSON.stringify(answered)}`);
  }
  return problems;
}

/** A thread written by `writes` writes: every key at the node, the session's versions contiguous, each write's version its own. */
async function threadProblems(
  api: ReturnType<typeof apiOf>,
  sessionId: string,
  node: string | undefined,
  answers: Answer[],
  writes: number,
  before: number,
): Promise<string[]> {
  const problems: string[] = [];
  const state = ((await api('GET', `/v1/sessions/${sessionId}/state${node ? `?node=${node}` : ''}`)).body.state ?? {}) as Record<
    string,
    unknown
  >;
  for (let index = 0; index < writes; index++) if (!(`k${index}` in state)) problems.push(`k${index} is missing`);
  problems.push(...(await versionProblems(api, sessionId, answers, writes, before)));
  return problems;
}

/** Turns off one message, each its own node: every node there with its own key on the base state, the session's versions contiguous. */
async function turnProblems(
  api: ReturnType<typeof apiOf>,
  sessionId: string,
  answers: Answer[],
  writes: number,
  before: number,
): Promise<string[]> {
  const problems: string[] = [];
  // Read side by side, after the burst (one after another, 100 took some 2 s with a core busy).
  const states = await Promise.all(
    Array.from({ length: writes }, async (_, index) => (await api('GET', `/v1/sessions/${sessionId}/state?node=t${index}`)).body.state),
  );
  states.forEach((state, index) => {
    if (JSON.stringify(state) !== JSON.stringify({ base: true, [`k${index}`]: { by: index } })) {
      problems.push(`t${index} reads ${JSON.stringify(state)}`);
    }
  });
  problems.push(...(await versionProblems(api, sessionId, answers, writes, before)));
  return problems;
}

/** The session's versions after `writes` writes on `before`: 1..before + writes, each write's its own. */
async function versionProblems(
  api: ReturnType<typeof apiOf>,
  sessionId: string,
  answers: Answer[],
  writes: number,
  before: number,
): Promise<string[]> {
  const problems: string[] = [];
  const listed = (await api('GET', `/v1/sessions/${sessionId}/versions?limit=200`)).body.versions as Array<{ version: number }>;
  const versions = listed.map((item) => item.version).sort((a, b) => a - b);
  const expected = Array.from({ length: before + writes }, (_, index) => index + 1);
  if (JSON.stringify(versions) !== JSON.stringify(expected))
    problems.push(`versions are ${JSON.stringify(versions)}, not 1..${before + writes}`);
  const answered = new Set(answers.map((answer) => answer.body.version));
  if (answered.size !== writes) problems.push(`${writes} writes answered ${answered.size} distinct versions`);
  return problems;
}

/** Another process that keeps a core busy, as another tenant's work on the same machine would. */
function burnACore(): ChildProcess {
  const child = spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' });
  child.unref();
  return child;
}

function apiOf(url: string) {
  return async (method: string, path: string, body?: unknown): Promise<Answer> => {
    const response = await fetch(`${url}${path}`, {
      method,
      headers: { authorization: `Bearer ${API_KEY}`, ...(method === 'GET' ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await response.text();
    return { status: response.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
  };
}

function countOperations(requests: RecordedRequest[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const request of requests) {
    const name = request.error ? `${request.operation} lost` : request.operation;
    counts[name] = (counts[name] ?? 0) + 1;
  }
  return counts;
}

const sum = (values: number[]) => values.reduce((total, value) => total + value, 0);

/** The heading of the section on the bench page (run.ts `--contended-only` puts a new run in its place). */
export const CONTENDED_HEADING = '### Blind writers on one target at once';

/** The bench page's section: per path, the answers, attempts and units per write. */
export function contendedWritesSection(result: ContendedWrites): string {
  const rows = result.paths.map((path) => {
    const ok = (path.statuses['200'] ?? 0) + (path.statuses['201'] ?? 0);
    const outcome = path.problems.length === 0 ? 'every key there, versions contiguous' : path.problems.slice(0, 3).join('; ');
    return `| ${path.label} | ${ok} of ${path.writes} | ${(path.attempts / path.writes).toFixed(2)} (${path.lost} lost) | ${(path.writeUnits / path.writes).toFixed(1)} | ${(path.readUnits / path.writes).toFixed(1)} | ${path.seconds.toFixed(1)} s | ${outcome} |`;
  });
  return [
    CONTENDED_HEADING,
    '',
    `${result.writers} clients each send one write without \`If-Match\`/\`expectedVersion\` (and without an \`Idempotency-Key\`, as the LangGraph saver's \`putWrites\`), all at the same moment, through the HTTP API of a server as \`npm start\` runs it, with no bound on its DynamoDB requests in flight (as in AWS; \`npm start\` bounds them at 16)${result.loaded ? ', while another process keeps a core busy' : ''} (bench/contended-writes.ts; \`npm run bench -- --only=contended\`; test/integration/contended-writes.test.ts runs the same). Attempts: the writes that claimed, or tried to claim, the target's next version (conditional puts, transactions, a document's keyed updates), per write. Units: every DynamoDB request of the burst (the write queue's tickets and looks, reads, lost races billed as AWS bills them), per write.`,
    '',
    '| path | answered 200/201 | attempts per write | WCU per write | RCU per write | all answered in | outcome |',
    '| --- | --- | --- | --- | --- | --- | --- |',
    ...rows,
    '',
    "A commit to the shared document alone, or to a profile alone, is one `UpdateItem` of the keys it writes, which numbers its own version: commits to other keys cannot make it lose, so each lands at its first attempt (docs/architecture.md, \"Commits\"); it took about two through the write queue, at 4 to 10 write units a write. A profile's commit also reads the session item after the profile (the session must still be the user's), and its update lands only while the profile's fence is the one it read, which concurrent commits never change (only a `PATCH` giving one of the user's sessions to another user, the user's erasure, or a whole put). On the thread and at the node, a burst's writers first try at once and all but one lose (the lost attempts above: about one a write); each then takes a ticket in the target's write queue and tries again when no ticket is ahead of its own, and lands (docs/architecture.md, \"Many blind writers on one target take turns in a write queue\"). Before the queue, the same burst on the same machine made 10 to 21 attempts a write at 23 to 56 write units a write, and 54 of the 100 commits to the shared document and 64 of the 100 patches at the node answered `409`.",
  ].join('\n');
}
