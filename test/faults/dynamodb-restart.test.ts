import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { AgentStateError } from '../../functions/core/kernel/errors.js';
import type { SessionService } from '../../functions/core/sessions/session-service.js';
import { dependenciesFor, useDependencies } from '../../functions/http/dependencies.js';
import { keysFromEnv } from '../../functions/http/edge/auth.js';
import { handlers } from '../../functions/http/index.js';
import { type DynamoDbLocal, freeTcpPort, startDynamoDbLocal } from '../../functions/local/dynamodb-local.js';
import { createRequestListener } from '../../functions/local/http-adapter.js';
import { createStores } from '../../functions/store/index.js';
import { dynamoDbClient } from '../../functions/store/table/client.js';
import { ensureTable } from '../../functions/store/table/table.js';

/**
 * DynamoDB dies under a write load and comes back. End to end over HTTP: the handlers behind
 * the local server's own adapter (createRequestListener), on a DynamoDB Local that this test
 * owns, with a persistent data folder, so that it can kill java (SIGKILL, like a crash) and
 * start it again on the same port and folder. `npm start` cannot restart its DynamoDB Local by
 * itself, hence this wiring.
 *
 *   0 s          10 writers PATCH unique keys
 *   30 acks      java SIGKILLed: every request must fail fast with 503 unavailable, none may hang
 *   +2.5 s       DynamoDB Local restarted on the same port and data folder: writes succeed again
 *   +30 acks     stop; every acknowledged key is in the final state, versions are 1..n, no gap
 */

const WRITERS = 10;
const SESSIONS = ['restart-a', 'restart-b'];
const TENANT = 'restart';
const KEY = 'restart-key';

let dataDir: string;
let port: number;
let dynamo: DynamoDbLocal | undefined;
let http: Server;
let baseUrl: string;
let service: SessionService;

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'agentstate-restart-'));
  port = await freeTcpPort();
  dynamo = await startDynamoDbLocal({ port, dataDir });
  // The client the Lambdas use (functions/store/table/client.ts), with its retries and timeouts.
  const client = dynamoDbClient({ AGENTSTATE_DYNAMODB_ENDPOINT: dynamo.endpoint });
  await ensureTable(client, 'agentstate');
  const deps = dependenciesFor(createStores(client, 'agentstate'), { resolveKey: keysFromEnv(`${TENANT}:${KEY}`) });
  useDependencies(deps);
  service = deps.sessions;
  http = createServer(createRequestListener(handlers, { logError: () => {} }));
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${(http.address() as { port: number }).port}`;
  // The handlers log each 503's cause; expected here.
  vi.spyOn(console, 'error').mockImplementation(() => {});
  vi.spyOn(console, 'warn').mockImplementation(() => {});
}, 60_000);

afterAll(async () => {
  await new Promise((resolve) => http?.close(resolve));
  await dynamo?.stop();
  useDependencies(undefined);
  vi.restoreAllMocks();
  rmSync(dataDir, { recursive: true, force: true });
}, 30_000);

interface Outcome {
  status: number;
  code?: string;
  ms: number;
  phase: 'before' | 'down' | 'after';
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function processGone(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return false;
  } catch {
    return true;
  }
}

describe('DynamoDB Local killed and restarted under a write load', () => {
  it('fails fast with 503 while it is down, and loses no acknowledged write', async () => {
    // Prepare
    let phase: Outcome['phase'] = 'before';
    let running = true;
    const outcomes: Outcome[] = [];
    const acknowledged = new Map<string, Set<string>>(SESSIONS.map((session) => [session, new Set<string>()]));
    const writer = async (index: number) => {
      const session = SESSIONS[index % SESSIONS.length] as string;
      for (let write = 0; running; write++) {
        const key = `w${index}-${write}`;
        const requestPhase = phase;
        const started = Date.now();
        const response = await fetch(`${baseUrl}/v1/sessions/${session}/state`, {
          method: 'PATCH',
          headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
          body: JSON.stringify({ [key]: write }),
        });
        const body = (await response.json()) as { changed?: boolean; code?: string };
        outcomes.push({ status: response.status, code: body.code, ms: Date.now() - started, phase: requestPhase });
        if (process.env.RESTART_VERBOSE && response.status !== 200 && response.status !== 503) {
          process.stdout.write(
            `odd answer: ${requestPhase}→${phase} ${response.status} ${JSON.stringify(body)} after ${Date.now() - started} ms\n`,
          );
        }
        if (response.status === 200 && body.changed === true) acknowledged.get(session)?.add(key);
        if (response.status !== 200) await sleep(50);
      }
    };

    // Act: load, crash, restart, load.
    const ackedCount = () => [...acknowledged.values()].reduce((sum, keys) => sum + keys.size, 0);
    const until = async (done: () => boolean, limitMs: number) => {
      const deadline = Date.now() + limitMs;
      while (!done() && Date.now() < deadline) await sleep(50);
    };
    const writers = Array.from({ length: WRITERS }, (_, index) => writer(index));
    // A fresh JVM is slow at first: crash once some writes have been acknowledged.
    await until(() => ackedCount() >= 30, 10_000);
    const crashed = dynamo as DynamoDbLocal;
    phase = 'down';
    process.kill(crashed.pid, 'SIGKILL');
    while (!processGone(crashed.pid)) await sleep(20);
    await crashed.stop(); // reaps the child; java is already gone
    dynamo = undefined;
    const ackedBeforeCrash = ackedCount();

    // The service itself, while DynamoDB is down: a domain error, not a hang.
    const directStart = Date.now();
    const direct = await service.patchState({ tenant: TENANT, sessionId: 'restart-a' }, {}).catch((error: unknown) => error);
    const directMs = Date.now() - directStart;

    await sleep(2_500);
    dynamo = await startDynamoDbLocal({ port, dataDir });
    phase = 'after';
    await until(() => ackedCount() >= ackedBeforeCrash + 30, 10_000);
    running = false;
    await Promise.all(writers);

    if (process.env.RESTART_VERBOSE) {
      const summary = (which: Outcome['phase']) => {
        const list = outcomes.filter((outcome) => outcome.phase === which);
        const statuses: Record<string, number> = {};
        for (const outcome of list) statuses[outcome.status] = (statuses[outcome.status] ?? 0) + 1;
        const failed = list.filter((outcome) => outcome.status !== 200);
        return `${which}: ${JSON.stringify(statuses)}, max ${Math.max(...list.map((outcome) => outcome.ms))} ms, failures max ${Math.max(0, ...failed.map((outcome) => outcome.ms))} ms`;
      };
      const acked = [...acknowledged.values()].reduce((sum, keys) => sum + keys.size, 0);
      process.stdout.write(
        `${['before', 'down', 'after'].map((which) => summary(which as Outcome['phase'])).join('\n')}\nacknowledged ${acked} (${ackedBeforeCrash} before the crash); direct write failed in ${directMs} ms\n`,
      );
    }

    // Assess: while down, every answer was a fast 503 unavailable.
    expect(direct).toBeInstanceOf(AgentStateError);
    expect((direct as AgentStateError).code).toBe('unavailable');
    expect(directMs).toBeLessThan(5_000);
    // (A request sent just before the kill may still succeed or fail; those sent after it must fail fast.)
    const down = outcomes.filter((outcome) => outcome.phase === 'down');
    expect(down.length).toBeGreaterThan(0);
    const downAnswers = [...new Set(down.map((outcome) => `${outcome.status} ${outcome.code ?? ''}`.trim()))];
    expect(
      downAnswers.every((answer) => ['200', '503 unavailable', '409 conflict'].includes(answer)),
      downAnswers.join(', '),
    ).toBe(true);
    // Failures are fast. (A request sent while the new java is still starting may wait for it
    // and then succeed; that is not a failure, and no request may hang either way.)
    const failedDown = down.filter((outcome) => outcome.status === 503);
    expect(failedDown.length).toBeGreaterThan(0);
    expect(Math.max(...failedDown.map((outcome) => outcome.ms))).toBeLessThan(5_000);
    expect(Math.max(...outcomes.map((outcome) => outcome.ms))).toBeLessThan(15_000);
    // Nothing but 200 and 503 at any time (a request in flight at the crash may get either),
    // and 409 conflict: ten writers on two sessions of a freshly started (slow) JVM may contend
    // for longer than the 8 s a write retries, which API.md answers with 409.
    const answers = [...new Set(outcomes.map((outcome) => `${outcome.status} ${outcome.code ?? ''}`.trim()))];
    expect(
      answers.every((answer) => ['200', '503 unavailable', '409 conflict'].includes(answer)),
      answers.join(', '),
    ).toBe(true);
    // And writes succeed again after the restart.
    expect(outcomes.filter((outcome) => outcome.phase === 'after' && outcome.status === 200).length).toBeGreaterThan(0);
    expect(ackedBeforeCrash).toBeGreaterThan(0);

    // Nothing lost: every acknowledged key is in the final state, versions run 1..n.
    for (const session of SESSIONS) {
      const scope = { tenant: TENANT, sessionId: session };
      const state = (await service.readState(scope, {})).state as Record<string, unknown>;
      const missing = [...(acknowledged.get(session) ?? [])].filter((key) => !(key in state));
      expect(missing, `${session}: acknowledged but lost`).toEqual([]);
      const versions = (await service.listVersions(scope, { limit: 500 })).items.map((version) => version.version);
      expect(versions).toEqual(versions.map((_, index) => versions.length - index));
      expect(versions.length).toBeGreaterThanOrEqual(acknowledged.get(session)?.size ?? 0);
    }
  }, 60_000);
});
