import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { DeployedFunction, Deployment } from './deployment.js';

const BOOTSTRAP = fileURLToPath(new URL('./bootstrap.mjs', import.meta.url));
const CLOCK_SHIFT = new URL('./clock-shift.mjs', import.meta.url).href;
/** What bootstrap.mjs writes after an invocation's last log line: NUL, "END ", the invocation's id. */
const END_MARKER = `${String.fromCharCode(0)}END `;
/**
 * What a synchronous invocation may carry each way, as JSON text (Lambda quotas: 6 MB for the
 * request and for the response). The runtime serializes a handler's answer with JSON.stringify,
 * so a JSON body inside it counts escaped: each `"` and `\` of it twice.
 */
const LAMBDA_PAYLOAD_BYTES = 6 * 1024 * 1024;

/** What one invocation gave back: its answer (or error) and every log line it wrote. */
export interface Invocation {
  requestId: string;
  /** The handler's answer, as the runtime serializes it (JSON), parsed. */
  result?: any;
  /** An unhandled error, or the runtime's own (a crash, a timeout). */
  error?: { errorType: string; errorMessage: string };
  logs: string[];
}

interface Pending {
  id: string;
  lines: string[];
  answer?: { type: string; payload?: string; errorType?: string; errorMessage?: string };
  ended: boolean;
  resolve: (invocation: Invocation) => void;
  requestId: string;
  timer: NodeJS.Timeout;
}

/**
 * One execution environment of a function: a node process running its bundle from the cloud
 * assembly, with the environment Lambda gives it (the template's variables, the runtime's
 * reserved ones, the function's own credentials) and the AWS endpoints redirected to the
 * stand-in. Invocations run one at a time, as in Lambda; one that outlives the function's
 * timeout is ended with its process, and the next starts a fresh one (a cold start).
 */
class ExecutionEnvironment {
  private child: ChildProcess | undefined;
  private ready: Promise<void> | undefined;
  private pending: Pending | undefined;
  private queue: Promise<unknown> = Promise.resolve();
  private buffered = '';
  /** Lines written outside any invocation (module load), kept for diagnostics. */
  readonly initLogs: string[] = [];

  constructor(
    private readonly fn: DeployedFunction,
    private readonly env: NodeJS.ProcessEnv,
    private readonly functionArn: string,
  ) {}

  invoke(event: unknown): Promise<Invocation> {
    const run = this.queue.then(() => this.invokeNow(event));
    this.queue = run.catch(() => undefined);
    return run;
  }

  kill(): void {
    this.child?.kill('SIGKILL');
  }

  private start(): Promise<void> {
    const child = spawn(process.execPath, [BOOTSTRAP], {
      env: this.env,
      cwd: this.env.LAMBDA_TASK_ROOT,
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    });
    this.child = child;
    const onOutput = (chunk: Buffer) => {
      this.buffered += chunk.toString('utf8');
      let newline = this.buffered.indexOf('\n');
      while (newline >= 0) {
        this.line(this.buffered.slice(0, newline));
        this.buffered = this.buffered.slice(newline + 1);
        newline = this.buffered.indexOf('\n');
      }
    };
    child.stdout?.on('data', onOutput);
    child.stderr?.on('data', onOutput);
    return new Promise((resolve, reject) => {
      child.on('message', (message: { type: string; id?: string; errorMessage?: string }) => {
        if (message.type === 'ready') resolve();
        else if (message.type === 'init-error') reject(new Error(`${this.fn.logicalId} failed to initialize: ${message.errorMessage}`));
        else if (this.pending && message.id === this.pending.id) {
          this.pending.answer = message;
          this.settle();
        }
      });
      child.on('exit', (code, signal) => {
        if (this.child === child) {
          this.child = undefined;
          this.ready = undefined;
        }
        reject(new Error(`${this.fn.logicalId} exited during init (${code ?? signal}): ${this.initLogs.join('\n')}`));
        if (this.pending) {
          this.pending.answer ??= { type: 'error', errorType: 'Runtime.ExitError', errorMessage: `exited (${code ?? signal})` };
          this.pending.ended = true;
          this.settle();
        }
      });
    });
  }

  private line(text: string): void {
    const end = text.startsWith(END_MARKER) ? text.slice(END_MARKER.length) : undefined;
    if (end !== undefined && this.pending && end === this.pending.id) {
      this.pending.ended = true;
      this.settle();
      return;
    }
    (this.pending ? this.pending.lines : this.initLogs).push(text);
  }

  private settle(): void {
    const pending = this.pending;
    if (!pending?.answer || !pending.ended) return;
    this.pending = undefined;
    clearTimeout(pending.timer);
    const { answer } = pending;
    if (answer.type === 'result' && Buffer.byteLength(answer.payload ?? '') > LAMBDA_PAYLOAD_BYTES) {
      // Lambda fails the invocation after the handler returned; the caller never sees the answer.
      pending.resolve({
        requestId: pending.requestId,
        logs: pending.lines,
        error: {
          errorType: 'Function.ResponseSizeTooLarge',
          errorMessage: `Response payload size (${Buffer.byteLength(answer.payload ?? '')} bytes) exceeded maximum allowed payload size (${LAMBDA_PAYLOAD_BYTES} bytes).`,
        },
      });
      return;
    }
    pending.resolve({
      requestId: pending.requestId,
      logs: pending.lines,
      ...(answer.type === 'result'
        ? { result: JSON.parse(answer.payload ?? 'null') }
        : { error: { errorType: String(answer.errorType), errorMessage: String(answer.errorMessage) } }),
    });
  }

  private async invokeNow(event: unknown): Promise<Invocation> {
    const size = Buffer.byteLength(JSON.stringify(event));
    if (size > LAMBDA_PAYLOAD_BYTES) {
      // Refused by the Lambda service before any handler runs.
      return {
        requestId: randomUUID(),
        logs: [],
        error: {
          errorType: 'RequestTooLargeException',
          errorMessage: `Request must be smaller than ${LAMBDA_PAYLOAD_BYTES} bytes for the InvokeFunction operation`,
        },
      };
    }
    this.ready ??= this.start();
    await this.ready;
    const id = randomUUID();
    const requestId = randomUUID();
    const timeoutMs = this.fn.timeoutSeconds * 1000;
    return new Promise<Invocation>((resolve) => {
      const timer = setTimeout(() => {
        if (this.pending?.id !== id) return;
        this.pending.answer = {
          type: 'error',
          errorType: 'Sandbox.Timedout',
          errorMessage: `Task timed out after ${this.fn.timeoutSeconds} seconds`,
        };
        this.pending.ended = true;
        this.kill();
        this.settle();
      }, timeoutMs);
      this.pending = { id, lines: [], ended: false, resolve, requestId, timer };
      const traceId = `Root=1-${Math.floor(Date.now() / 1000).toString(16)}-${randomBytes(12).toString('hex')};Parent=${randomBytes(8).toString('hex')};Sampled=1`;
      this.child?.send({ type: 'invoke', id, requestId, event, traceId, remainingMs: timeoutMs, functionArn: this.functionArn });
    });
  }
}

export interface LambdaOptions {
  /** The folder of the cloud assembly: bundles are at `<assembly>/<aws:asset:path>`. */
  assembly: string;
  /** The stand-in's URL, where the SDK's endpoints (and the WebSocket callback URL) point. */
  awsEndpoint: string;
  /** Where X-Ray segments go (UDP `host:port`), for functions with active tracing. */
  xrayDaemon?: string;
}

/**
 * The Lambda service for one deployment: invokes functions by logical id, each in its own
 * execution environment, started on first use.
 */
export class LambdaService {
  private readonly environments = new Map<string, ExecutionEnvironment>();

  constructor(
    private readonly deployment: Deployment,
    private readonly options: LambdaOptions,
  ) {}

  /**
   * Invokes a function. `clockOffsetMs` runs it in a separate environment whose clock is that
   * far ahead; `variables`, in a separate environment whose template variables these replace,
   * as a stack synthesized with another setting gives them (the same bundle: a setting such as
   * the tracing level reaches the function only as a variable).
   */
  invoke(
    fn: DeployedFunction,
    event: unknown,
    options: { clockOffsetMs?: number; variables?: Record<string, string> } = {},
  ): Promise<Invocation> {
    const key = `${fn.logicalId}@${options.clockOffsetMs ?? 0}${options.variables ? ` ${JSON.stringify(options.variables)}` : ''}`;
    let environment = this.environments.get(key);
    if (!environment) {
      const deployed = options.variables ? { ...fn, environment: { ...fn.environment, ...options.variables } } : fn;
      environment = new ExecutionEnvironment(
        deployed,
        this.environmentOf(deployed, options.clockOffsetMs ?? 0),
        this.deployment.getAtt(fn.logicalId, 'Arn'),
      );
      this.environments.set(key, environment);
    }
    return environment.invoke(event);
  }

  /** Ends every environment of a function, as Lambda ends one at its timeout. */
  kill(functionId: string): void {
    for (const [key, environment] of this.environments) if (key.startsWith(`${functionId}@`)) environment.kill();
  }

  stopAll(): void {
    for (const environment of this.environments.values()) environment.kill();
    this.environments.clear();
  }

  /**
   * The environment Lambda gives the function: the template's variables, then the runtime's
   * reserved variables (AWS Lambda developer guide, "Defined runtime environment variables").
   * Two things differ from AWS, both addresses: the SDK's service endpoints
   * (`AWS_ENDPOINT_URL_<SERVICE>`) and a template URL of the stack's own API Gateway stage
   * point at the stand-in, and a path under `/var/task` at the bundle's folder.
   */
  environmentOf(fn: DeployedFunction, clockOffsetMs: number): NodeJS.ProcessEnv {
    const taskRoot = join(this.options.assembly, fn.assetPath);
    const variables = Object.fromEntries(
      Object.entries(fn.environment).map(([name, value]) => [
        name,
        value
          .replace(/^https:\/\/[a-z0-9]+\.execute-api\.[a-z0-9-]+\.amazonaws\.com/, this.options.awsEndpoint)
          .replace(/^\/var\/task(?=\/|$)/, taskRoot),
      ]),
    );
    const nodeOptions = [variables.NODE_OPTIONS, clockOffsetMs ? `--import=${CLOCK_SHIFT}` : undefined].filter(Boolean).join(' ');
    const tracing = fn.tracing === 'Active';
    const env: NodeJS.ProcessEnv = {
      PATH: process.env.PATH,
      LANG: 'en_US.UTF-8',
      TZ: ':UTC',
      ...variables,
      NODE_OPTIONS: nodeOptions,
      _HANDLER: `${fn.handlerFile}.${fn.handlerExport}`,
      AWS_REGION: this.deployment.region,
      AWS_DEFAULT_REGION: this.deployment.region,
      AWS_EXECUTION_ENV: `AWS_Lambda_${fn.runtime}`,
      AWS_LAMBDA_FUNCTION_NAME: fn.name,
      AWS_LAMBDA_FUNCTION_MEMORY_SIZE: String(fn.memorySize),
      AWS_LAMBDA_FUNCTION_VERSION: '$LATEST',
      AWS_LAMBDA_INITIALIZATION_TYPE: 'on-demand',
      AWS_LAMBDA_LOG_GROUP_NAME: fn.logGroupId ? this.deployment.ref(fn.logGroupId) : `/aws/lambda/${fn.name}`,
      AWS_LAMBDA_LOG_STREAM_NAME: `2026/01/01/[$LATEST]${randomBytes(16).toString('hex')}`,
      AWS_LAMBDA_RUNTIME_API: '127.0.0.1:9001',
      ...(fn.logFormat === 'JSON' ? { AWS_LAMBDA_LOG_FORMAT: 'JSON', AWS_LAMBDA_LOG_LEVEL: 'INFO' } : {}),
      // The function's own role: the stand-in knows the caller by this key id.
      AWS_ACCESS_KEY_ID: fn.logicalId,
      AWS_ACCESS_KEY: fn.logicalId,
      AWS_SECRET_ACCESS_KEY: 'test-secret',
      AWS_SESSION_TOKEN: 'test-session-token',
      LAMBDA_TASK_ROOT: taskRoot,
      LAMBDA_RUNTIME_DIR: '/var/runtime',
      ...(tracing ? { AWS_XRAY_CONTEXT_MISSING: 'LOG_ERROR', AWS_XRAY_DAEMON_ADDRESS: this.options.xrayDaemon ?? '127.0.0.1:2000' } : {}),
      AWS_ENDPOINT_URL_DYNAMODB: this.options.awsEndpoint,
      AWS_ENDPOINT_URL_EVENTBRIDGE: this.options.awsEndpoint,
      AWS_ENDPOINT_URL_LAMBDA: this.options.awsEndpoint,
      AWS_ENDPOINT_URL_KMS: this.options.awsEndpoint,
      AWS_ENDPOINT_URL_SQS: this.options.awsEndpoint,
      // This machine runs Node 20; the SDK would otherwise warn on every start.
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
      ...(clockOffsetMs ? { TEST_CLOCK_OFFSET_MS: String(clockOffsetMs) } : {}),
    };
    return env;
  }
}
