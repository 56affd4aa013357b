import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { readAssembly, type Template } from '../deployed/support/deployment.js';
import { withFileLock } from './file-lock.js';

const run = promisify(execFile);
const projectRoot = fileURLToPath(new URL('../..', import.meta.url));

/** What `cdk synth` reads: the app, the construct, the handlers, the page, the lock file, and this file's settings. */
const SYNTH_INPUTS = ['bin', 'lib', 'functions', 'inspector', 'package-lock.json', 'cdk.json', 'tsconfig.json', 'test/helpers/synth.ts'];

/**
 * The one Lambda function the synthesized stack lets agents use as a `lambda:` worker (bin/app.ts
 * `AGENTSTATE_ALLOWED_WORKER_FUNCTION_ARNS`): test/deployed stands it up in its AWS stand-in.
 */
export const DEPLOYED_WORKER_ARN = 'arn:aws:lambda:us-east-1:123456789012:function:deployed-test-worker';
const CACHE_DIR = join(projectRoot, 'node_modules', '.cache', 'agentstate-synth');

/**
 * The cloud assembly of one real `cdk synth`, run the way a user runs it (cdk.json, tsx,
 * cdk-nag at synth, esbuild on this machine), offline. Every test file that needs the
 * synthesized template or bundles shares it: the first to ask synthesizes, under a lock, into a
 * folder named by a hash of everything synth reads; the others (and later runs with the same
 * sources) find it there. So CI pays for one synth, and a changed handler is never tested
 * through a stale bundle.
 */
export async function synthesizedAssembly(): Promise<string> {
  const outdir = join(CACHE_DIR, inputsHash());
  if (existsSync(join(outdir, 'manifest.json'))) return outdir;
  return withFileLock(`${outdir}.lock`, async () => {
    if (existsSync(join(outdir, 'manifest.json'))) return outdir;
    const building = `${outdir}.building`;
    rmSync(building, { recursive: true, force: true });
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      CDK_DISABLE_VERSION_CHECK: 'true',
      AGENTSTATE_ALLOWED_WORKER_FUNCTION_ARNS: DEPLOYED_WORKER_ARN,
    };
    // Synthesize environment-agnostic, whatever the machine's AWS profile says.
    for (const name of ['AWS_REGION', 'AWS_DEFAULT_REGION', 'CDK_DEFAULT_REGION', 'CDK_DEFAULT_ACCOUNT', 'AWS_PROFILE']) delete env[name];
    await run(join(projectRoot, 'node_modules', '.bin', 'cdk'), ['synth', '--quiet', '--output', building], {
      cwd: projectRoot,
      env,
      timeout: 170_000,
      maxBuffer: 64 * 1024 * 1024,
    });
    renameSync(building, outdir);
    return outdir;
  });
}

/**
 * The stack's template alone, as `cdk synth` makes it (the same app, feature flags and props)
 * but without bundling the functions: what the e2e tests' IAM gate reads (roles and policies),
 * in seconds instead of the minutes a bundling synth takes on a busy machine. Taken from the
 * full assembly when one exists for these sources; else synthesized in this process once per
 * sources, under a lock, and kept beside the assemblies.
 */
export async function synthesizedTemplate(): Promise<Template> {
  const hash = inputsHash();
  const full = join(CACHE_DIR, hash);
  if (existsSync(join(full, 'manifest.json'))) return readAssembly(full).template;
  const file = join(CACHE_DIR, `${hash}.template.json`);
  if (existsSync(file)) return JSON.parse(readFileSync(file, 'utf8')) as Template;
  mkdirSync(CACHE_DIR, { recursive: true });
  return withFileLock(`${file}.lock`, async () => {
    if (existsSync(file)) return JSON.parse(readFileSync(file, 'utf8')) as Template;
    const [{ App }, { AgentStateStack }] = await Promise.all([import('aws-cdk-lib'), import('../../lib/agent-state-stack.js')]);
    const cdkJson = JSON.parse(readFileSync(join(projectRoot, 'cdk.json'), 'utf8')) as { context?: Record<string, unknown> };
    const app = new App({ context: { ...cdkJson.context, 'aws:cdk:bundling-stacks': [] } });
    new AgentStateStack(app, 'AgentState', { agentState: { allowedWorkerFunctionArns: [DEPLOYED_WORKER_ARN] } });
    const template = app.synth().getStackByName('AgentState').template as Template;
    writeFileSync(`${file}.tmp`, JSON.stringify(template));
    renameSync(`${file}.tmp`, file);
    return template;
  });
}

/** A hash of every file synth reads (paths and contents), so the assembly matches the sources. */
function inputsHash(): string {
  const hash = createHash('sha256');
  const visit = (path: string) => {
    if (!existsSync(path)) return;
    const stat = statSync(path);
    if (stat.isDirectory()) {
      for (const name of readdirSync(path).sort()) {
        if (name === 'node_modules' || name === 'dist' || name.startsWith('.')) continue;
        visit(join(path, name));
      }
      return;
    }
    hash.update(relative(projectRoot, path)).update('\0').update(readFileSync(path)).update('\0');
  };
  for (const input of SYNTH_INPUTS) visit(join(projectRoot, input));
  return hash.digest('hex').slice(0, 16);
}
