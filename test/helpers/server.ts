import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { freeTcpPort } from '../../functions/local/dynamodb-local.js';

const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
// Exactly what `npm start` runs (`node --import tsx bin/start.ts`), by this very node rather
// than the one on PATH: tests may run the server with a PATH that holds neither node nor java.
// One process, so a signal reaches the server itself (the tsx CLI would relay it through a
// second process that it kills if the server takes over 30 ms to acknowledge).

/** A TCP port that was free a moment ago. */
const freePort = freeTcpPort;

export interface ServerProcessOptions {
  /** Merged over this process's environment; `undefined` removes a variable. */
  env?: Record<string, string | undefined>;
  /** @default a free port */
  port?: number;
  /** How long `startServerProcess` waits for the banner. @default 45_000 */
  startTimeoutMs?: number;
  /** Its own process group, which `signalGroup` signals as a terminal's Ctrl-C does. */
  processGroup?: boolean;
  /** Modules loaded before bin/start.ts, after tsx (`--import`), e.g. iam-gate-preload.ts. */
  imports?: readonly string[];
  /**
   * A bundle to run in place of tsx, `imports` and bin/start.ts (server-bundle.ts: the same
   * modules, bundled once per test run).
   */
  bundle?: string;
}

export interface ServerProcess {
  /** `http://localhost:<port>` */
  url: string;
  port: number;
  /** The tsx process; bin/start.ts runs in a node child of it, java in a child of that. */
  child: ChildProcess;
  /** Everything printed so far, stdout and stderr interleaved. */
  output(): string;
  /** The exit code, or null when a signal ended it. */
  exited: Promise<number | null>;
  /** The DynamoDB Local java pid from the banner, once printed. */
  javaPid(): number | undefined;
  /** Sends `signal` (default SIGINT) and resolves with the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/**
 * Runs `npm start` (bin/start.ts under tsx; or `bundle`, the same server bundled) as a child
 * process, as a user would, with `AGENTSTATE_DATA=memory` unless `env` says otherwise. Does not
 * wait for it: see `startServerProcess`, or await `exited` for a start that is meant to fail.
 */
export async function spawnServerProcess(options: ServerProcessOptions = {}): Promise<ServerProcess> {
  const port = options.port ?? (await freePort());
  const env: NodeJS.ProcessEnv = { ...process.env, PORT: String(port), AGENTSTATE_DATA: 'memory' };
  for (const [name, value] of Object.entries(options.env ?? {})) {
    if (value === undefined) delete env[name];
    else env[name] = value;
  }
  const imports = (options.imports ?? []).flatMap((module) => ['--import', module]);
  const args = options.bundle ? ['--enable-source-maps', options.bundle] : ['--import', 'tsx', ...imports, 'bin/start.ts'];
  const child = spawn(process.execPath, args, {
    cwd: repoRoot,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: options.processGroup ?? false,
  });

  let text = '';
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
  const exited = new Promise<number | null>((resolveExit) => child.once('exit', (code) => resolveExit(code)));
  // A test that fails before its stop() must not leave a server behind; SIGTERM (not SIGKILL)
  // so that tsx relays it and the server stops its java too.
  const killOnExit = () => child.kill('SIGTERM');
  process.once('exit', killOnExit);
  void exited.then(() => process.off('exit', killOnExit));

  const javaPid = () => {
    const match = /java pid (\d+)/.exec(text);
    return match ? Number(match[1]) : undefined;
  };
  const stop = async (signal: NodeJS.Signals = 'SIGINT') => {
    if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
    child.kill(signal);
    const timer = setTimeout(() => {
      // Stuck: take everything down hard, java included, so nothing outlives the test run.
      child.kill('SIGKILL');
      const pid = javaPid();
      if (pid) process.kill(pid, 'SIGKILL');
    }, 20_000);
    try {
      return await exited;
    } finally {
      clearTimeout(timer);
    }
  };
  return { url: `http://localhost:${port}`, port, child, output: () => text, exited, javaPid, stop };
}

/** A server that printed its banner, so its java pid is known. */
export type StartedServerProcess = Omit<ServerProcess, 'javaPid'> & { javaPid(): number };

/** Like `spawnServerProcess`, and resolves once the server prints its listening line. */
export async function startServerProcess(options: ServerProcessOptions = {}): Promise<StartedServerProcess> {
  const server = await spawnServerProcess(options);
  const timeoutMs = options.startTimeoutMs ?? 45_000;
  const deadline = Date.now() + timeoutMs;
  // The banner is one write of well under a pipe buffer, so it arrives whole.
  while (!/agentstate listening on /.test(server.output())) {
    if (server.child.exitCode !== null || server.child.signalCode !== null || Date.now() > deadline) {
      await server.stop('SIGTERM');
      throw new Error(`the server did not start within ${timeoutMs} ms; it printed:\n${server.output()}`);
    }
    await new Promise((wake) => setTimeout(wake, 50));
  }
  const pid = server.javaPid();
  if (pid === undefined) throw new Error(`no java pid in the banner:\n${server.output()}`);
  return { ...server, javaPid: () => pid };
}
