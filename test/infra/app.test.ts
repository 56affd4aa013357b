import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);
const projectRoot = fileURLToPath(new URL('../..', import.meta.url));
const outdirs: string[] = [];

afterAll(() => {
  for (const outdir of outdirs) rmSync(outdir, { recursive: true, force: true });
});

/**
 * Runs bin/app.ts as the CDK CLI does (context in CDK_CONTEXT_JSON, the assembly to
 * CDK_OUTDIR, the CLI's default environment in CDK_DEFAULT_*), with bundling skipped, and
 * returns the template it wrote.
 */
async function synthApp(context: Record<string, unknown>, env: Record<string, string> = {}) {
  const outdir = mkdtempSync(join(tmpdir(), 'agentstate-app-'));
  outdirs.push(outdir);
  const cdkJson = JSON.parse(readFileSync(join(projectRoot, 'cdk.json'), 'utf8')) as { context: Record<string, unknown> };
  await run(process.execPath, ['--import', 'tsx', 'bin/app.ts'], {
    cwd: projectRoot,
    env: {
      PATH: process.env.PATH,
      CDK_OUTDIR: outdir,
      CDK_CONTEXT_JSON: JSON.stringify({ ...cdkJson.context, 'aws:cdk:bundling-stacks': [], ...context }),
      // What the CLI sets when no region or account is configured anywhere.
      CDK_DEFAULT_REGION: 'us-east-1',
      CDK_DEFAULT_ACCOUNT: '111111111111',
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
      ...env,
    },
    timeout: 60_000,
  });
  const stackName = (context.stackName as string | undefined) ?? 'AgentState';
  return JSON.parse(readFileSync(join(outdir, `${stackName}.template.json`), 'utf8')) as { Resources: Record<string, any> };
}

const ofType = (template: { Resources: Record<string, any> }, type: string) =>
  Object.values(template.Resources).filter((resource) => resource.Type === type);

/**
 * The settings each synth below is given. A user gives settings one of two ways, as context or
 * as the environment, so the tests share one synth of each way with every setting they read,
 * rather than one synth per setting (each is a `node` process that loads aws-cdk-lib and runs
 * cdk-nag: 6-7 s). Settings that bin/app.ts reads independently do not mask each other: each
 * assertion still reads only the resources its own setting decides.
 */
const WORKER = 'arn:aws:lambda:eu-west-1:123456789012:function:planner-worker';
const synths = {
  /** Nothing set: what the CLI alone hands the app. */
  none: () => synthApp({}),
  byContext: () =>
    synthApp({
      alarmEmail: 'oncall@example.com',
      stackName: 'AgentStateDev',
      allowedWorkerFunctionArns: ` ${WORKER} `,
      tracing: 'detailed',
    }),
  byEnv: () =>
    synthApp(
      {},
      {
        AGENTSTATE_ALARM_TOPIC_ARN: 'arn:aws:sns:eu-west-1:123456789012:pager',
        AGENTSTATE_REGION: 'eu-west-1',
        AGENTSTATE_TRACING: 'off',
      },
    ),
  unknownTracing: () => synthApp({}, { AGENTSTATE_TRACING: 'verbose' }),
};
type Synth = keyof typeof synths;
const started = new Map<Synth, ReturnType<(typeof synths)[Synth]>>();
/** The template of one of the synths above, which all start with the file and run side by side. */
const templateOf = (synth: Synth) => {
  let template = started.get(synth);
  if (!template) {
    template = synths[synth]();
    template.catch(() => {}); // awaited (and its failure asserted) by the test that reads it
    started.set(synth, template);
  }
  return template;
};
beforeAll(() => {
  for (const synth of Object.keys(synths) as Synth[]) templateOf(synth);
});

describe('bin/app.ts', () => {
  it('stays environment-agnostic although the CLI names a default region and account', async () => {
    // Act
    const template = await templateOf('none');

    // Assess
    const text = JSON.stringify(template);
    expect(text).not.toContain('us-east-1');
    expect(text).not.toContain('111111111111');
  }, 90_000);

  it('takes alarmEmail and stackName from context, and an alarm topic from the environment', async () => {
    // Act
    const byContext = await templateOf('byContext');
    const byEnv = await templateOf('byEnv');

    // Assess
    expect(ofType(byContext, 'AWS::SNS::Subscription').map((subscription) => subscription.Properties.Endpoint)).toEqual([
      'oncall@example.com',
    ]);
    for (const alarm of ofType(byEnv, 'AWS::CloudWatch::Alarm')) {
      expect(alarm.Properties.AlarmActions).toEqual(['arn:aws:sns:eu-west-1:123456789012:pager']);
    }
    expect(JSON.stringify(byEnv)).toContain('eu-west-1');
  }, 120_000);

  it('lets decide invoke the Lambda workers named in allowedWorkerFunctionArns, and nothing else does', async () => {
    // Act
    const template = await templateOf('byContext');

    // Assess: one statement grants InvokeFunction, on that ARN (decide's, test/infra/agent-state.test.ts);
    // decide, and the registry that checks a worker where it is registered, are told it.
    const invokes = ofType(template, 'AWS::IAM::Policy')
      .flatMap((policy) => policy.Properties.PolicyDocument.Statement)
      .filter((statement) => [statement.Action].flat().includes('lambda:InvokeFunction'));
    expect(invokes.map((statement) => statement.Resource)).toEqual([WORKER]);
    const told = ofType(template, 'AWS::Lambda::Function').filter(
      (fn) => fn.Properties.Environment?.Variables?.AGENTSTATE_ALLOWED_WORKER_ARNS === WORKER,
    );
    expect(told.map((fn) => fn.Properties.Description).sort()).toEqual(['agentstate: the agents routes', 'agentstate: the decide routes']);
  }, 90_000);

  it('takes the tracing level from context or the environment, and refuses one it does not know', async () => {
    // Act
    const byContext = await templateOf('byContext');
    const byEnv = await templateOf('byEnv');
    const unknown = templateOf('unknownTracing');

    // Assess
    const levels = (template: { Resources: Record<string, any> }) =>
      new Set(
        ofType(template, 'AWS::Lambda::Function').map(
          (fn) => `${fn.Properties.Environment.Variables.AGENTSTATE_TRACING} ${fn.Properties.TracingConfig?.Mode ?? 'none'}`,
        ),
      );
    expect(levels(byContext)).toEqual(new Set(['detailed Active']));
    expect(levels(byEnv)).toEqual(new Set(['off none']));
    await expect(unknown).rejects.toThrow(/tracing must be one of lambda, detailed, off/);
  }, 120_000);
});
