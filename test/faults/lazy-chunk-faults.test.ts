import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { build } from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lambdaBundling } from '../../lib/bundling.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const run = promisify(execFile);
const ENGLISH = 'node_modules/zod/v4/locales/en.js';

/**
 * A chunk loaded on first use (lib/bundling.ts) is a file that can be missing or fail to load
 * when it is first needed: a broken deployment package, a disk error. What the client earned
 * must still be what it gets. These tests bundle a route group as the stack does, remove the
 * chunk, and call the bundle's handler in a node of its own, as Lambda would.
 */
let folder: string;
let entry: string;

beforeAll(async () => {
  folder = mkdtempSync(join(os.tmpdir(), 'agentstate-lazy-chunk-'));
  const result = await build({
    ...lambdaBundling,
    entryPoints: [`${root}functions/http/handlers/sessions.ts`],
    absWorkingDir: root,
    outdir: folder,
    metafile: true,
    logLevel: 'silent',
  });
  const outputs = Object.entries(result.metafile.outputs);
  const english = outputs.filter(([, output]) => (output.inputs[ENGLISH]?.bytesInOutput ?? 0) > 0).map(([path]) => path);
  entry = join(root, outputs.find(([path]) => path.endsWith('index.mjs'))?.[0] ?? 'index.mjs');
  // The messages must be a chunk of their own, or there is nothing to take away.
  expect(english).toHaveLength(1);
  rmSync(join(root, english[0] as string));
}, 60_000);

afterAll(() => rmSync(folder, { recursive: true, force: true }));

/** Calls the bundle's handler once per event, in one fresh node: its answers, and what it logged. */
async function invoke(events: unknown[]): Promise<{ answers: { statusCode: number; body: string }[]; log: string }> {
  const script = `
    const { handler } = await import(${JSON.stringify(pathToFileURL(entry).href)});
    const context = { awsRequestId: 'r-1', functionName: 'sessions', getRemainingTimeInMillis: () => 10_000 };
    const answers = [];
    for (const event of ${JSON.stringify(events)}) answers.push(await handler(event, context));
    process.stdout.write('\\u0000' + JSON.stringify(answers));`;
  const { stdout, stderr } = await run(process.execPath, ['--input-type=module', '-e', script], {
    env: {
      PATH: process.env.PATH,
      AGENTSTATE_TABLE: 'agentstate-lazy-chunk',
      AWS_REGION: 'us-east-1',
      AWS_ACCESS_KEY_ID: 'test',
      AWS_SECRET_ACCESS_KEY: 'test',
      // No DynamoDB is reachable: the requests below are refused before any is made.
      AWS_ENDPOINT_URL_DYNAMODB: 'http://127.0.0.1:9',
      POWERTOOLS_METRICS_DISABLED: 'true',
    },
  });
  return { answers: JSON.parse(stdout.slice(stdout.lastIndexOf('\u0000') + 1)), log: stderr };
}

function createSession(body: unknown) {
  return {
    version: '2.0',
    routeKey: 'POST /v1/sessions',
    rawPath: '/v1/sessions',
    rawQueryString: '',
    headers: { 'content-type': 'application/json' },
    requestContext: {
      http: { method: 'POST', path: '/v1/sessions', sourceIp: '203.0.113.7' },
      requestId: 'gw-1',
      authorizer: { lambda: { tenant: 'acme', agents: '' } },
    },
    body: JSON.stringify(body),
    isBase64Encoded: false,
  };
}

describe('a chunk loaded on first use that fails to load', () => {
  it('answers a refused body with its 400 when zod’s messages cannot be loaded, every time', async () => {
    // Act: the process's first refused body would load the messages; so would the next one.
    const { answers, log } = await invoke([createSession({ metadata: 5 }), createSession({ metadata: 'x' })]);

    // Assess: the refusal the body earned, without the messages' detail, never a 500; the log
    // says what is broken.
    expect(answers).toHaveLength(2);
    for (const answer of answers) {
      expect(answer.statusCode).toBe(400);
      expect(JSON.parse(answer.body)).toMatchObject({
        status: 400,
        code: 'invalid_request',
        detail: 'the body is not valid for this route',
      });
    }
    expect(log).toContain('agentstate: could not work out the detail of a 400 invalid_request');
    expect(log).toContain('ERR_MODULE_NOT_FOUND');
  });
});

describe('a worker transport whose chunk fails to load', () => {
  let workerEntry: string;
  let workerFolder: string | undefined;

  beforeAll(async () => {
    workerFolder = mkdtempSync(join(os.tmpdir(), 'agentstate-lazy-worker-'));
    // decide's worker call, bundled as the stack bundles decide: the `lambda:` transport is a
    // chunk of its own, read by the first call of a lambda: worker.
    const result = await build({
      ...lambdaBundling,
      stdin: { contents: "export { callWorker } from './functions/workers/call-worker.ts';", resolveDir: root, loader: 'ts' },
      absWorkingDir: root,
      outdir: workerFolder,
      metafile: true,
      logLevel: 'silent',
    });
    const outputs = Object.entries(result.metafile.outputs);
    const transport = outputs.filter(([, output]) => 'functions/workers/lambda-worker.ts' in output.inputs).map(([path]) => path);
    workerEntry = join(root, outputs.find(([path]) => path.endsWith('index.mjs'))?.[0] ?? 'index.mjs');
    expect(transport).toHaveLength(1);
    rmSync(join(root, transport[0] as string));
  }, 60_000);

  afterAll(() => {
    if (workerFolder) rmSync(workerFolder, { recursive: true, force: true });
  });

  it('fails the call as worker_failed, and the log of a Lambda says what is broken', async () => {
    // Act: a lambda: worker's call in a Lambda, in a node of its own.
    const script = `
      const { callWorker } = await import(${JSON.stringify(pathToFileURL(workerEntry).href)});
      const worker = { url: 'lambda:arn:aws:lambda:us-east-1:123456789012:function:planner' };
      const error = await callWorker(worker, '{}', { allowLoopbackHttp: false }).then(() => null, (caught) => caught);
      process.stdout.write('\\u0000' + JSON.stringify({ code: error?.code, status: error?.status, detail: error?.message }));`;
    const { stdout, stderr } = await run(process.execPath, ['--input-type=module', '-e', script], {
      env: { PATH: process.env.PATH, AWS_LAMBDA_FUNCTION_NAME: 'decide', AWS_REGION: 'us-east-1' },
    });

    // Assess: the caller learns the call failed, as for any failed worker call; the log, which
    // in a Lambda says nothing of a worker's own failures, has this one's cause.
    expect(JSON.parse(stdout.slice(stdout.lastIndexOf('\u0000') + 1))).toEqual({
      code: 'worker_failed',
      status: 502,
      detail: 'the worker call failed',
    });
    expect(stderr).toContain('agentstate: a worker call failed for a reason its transport does not map');
    expect(stderr).toContain('ERR_MODULE_NOT_FOUND');
  });
});
