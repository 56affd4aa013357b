import { ListTablesCommand } from '@aws-sdk/client-dynamodb';
import { type DynamoDbLocal, localDynamoDbClient, startDynamoDbLocal } from './dynamodb-local.js';
import { runAsServer } from './running-function.js';

/**
 * The local server's DynamoDB Local, kept running: when java exits without being asked to (a
 * crash, the OOM killer, a `kill -9`), it is started again on the same port and the same data
 * folder, and the server says so on stderr. Requests in between answer `503 unavailable` (the
 * handlers' client fails fast) and so does `/health` (`isAnswering`). With in-memory data the
 * restarted DynamoDB Local is empty; the server recreates the table (`onRestart`).
 *
 *   java exits ──► "DynamoDB Local exited unexpectedly (SIGKILL); restarting it …"
 *               ──► start on the same port and folder (retried: 0.5 s, 1 s, 2 s, … at most 10 s apart)
 *               ──► onRestart (the table, the stream reader) ──► "DynamoDB Local is back …"
 */
export interface SupervisedDynamoDb {
  /** The current DynamoDB Local (its endpoint never changes; its pid does on a restart). */
  readonly current: DynamoDbLocal;
  /** Whether DynamoDB Local answers now: false while it is down or restarting. */
  isAnswering(): Promise<boolean>;
  /** Stops supervising, then stops DynamoDB Local. */
  stop(): Promise<void>;
}

export interface SuperviseOptions {
  dataDir: string | 'memory';
  /** Run after each restart, before DynamoDB Local counts as back. */
  onRestart: (dynamoDb: DynamoDbLocal) => Promise<void>;
  /** Where the restart is told. @default console.error */
  log?: (line: string) => void;
}

const FIRST_RETRY_MS = 500;
const LONGEST_RETRY_MS = 10_000;
/** How long `/health` waits for DynamoDB Local's answer. */
const PROBE_TIMEOUT_MS = 1_000;

export async function superviseDynamoDbLocal(options: SuperviseOptions): Promise<SupervisedDynamoDb> {
  const log = options.log ?? ((line: string) => console.error(line));
  let current = await startDynamoDbLocal({ dataDir: options.dataDir });
  const { port, endpoint } = current;
  let stopping = false;
  let restarting: Promise<void> | undefined;
  const probe = localDynamoDbClient(endpoint, { maxAttempts: 1 });

  const where = options.dataDir === 'memory' ? 'in memory, so it starts empty' : `on the same data (${options.dataDir})`;

  const restart = async (): Promise<void> => {
    for (let delay = FIRST_RETRY_MS; !stopping; delay = Math.min(delay * 2, LONGEST_RETRY_MS)) {
      let next: DynamoDbLocal | undefined;
      try {
        next = await startDynamoDbLocal({ dataDir: options.dataDir, port });
        await options.onRestart(next);
      } catch (error) {
        await next?.stop();
        log(`agentstate: DynamoDB Local did not start again (${(error as Error).message.split('\n')[0]}); retrying in ${delay} ms`);
        await new Promise((wake) => setTimeout(wake, delay));
        continue;
      }
      if (stopping) {
        await next.stop();
        return;
      }
      current = next;
      watch(next);
      log(`agentstate: DynamoDB Local is back on port ${port} (java pid ${next.pid})`);
      return;
    }
  };

  const watch = (dynamoDb: DynamoDbLocal): void => {
    void dynamoDb.exited.then(({ code, signal }) => {
      if (stopping || dynamoDb !== current) return;
      log(`agentstate: DynamoDB Local exited unexpectedly (${signal ?? `code ${code}`}); restarting it ${where}, port ${port}`);
      restarting = restart().finally(() => {
        restarting = undefined;
      });
    });
  };
  watch(current);

  return {
    get current() {
      return current;
    },
    async isAnswering() {
      if (restarting) return false;
      try {
        // The server's own look, though `/health` asks for it: no function's call (running-function.ts).
        await runAsServer(() => probe.send(new ListTablesCommand({ Limit: 1 }), { abortSignal: AbortSignal.timeout(PROBE_TIMEOUT_MS) }));
        return true;
      } catch {
        return false;
      }
    },
    async stop() {
      stopping = true;
      probe.destroy();
      await restarting;
      await current.stop();
    },
  };
}
