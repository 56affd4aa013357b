import { App, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { parseTracingLevel } from '../functions/telemetry/tracing-level.js';
import { AgentStateStack } from '../lib/agent-state-stack.js';

/**
 * The CDK app (`cdk synth`, `cdk deploy`). Settings come from context (`-c name=value`), else
 * from the environment:
 *
 * | context         | env                           | what                                           |
 * |-----------------|-------------------------------|------------------------------------------------|
 * | `stackName`     | `AGENTSTATE_STACK_NAME`       | the stack's name (default `AgentState`)        |
 * | `alarmEmail`    | `AGENTSTATE_ALARM_EMAIL`      | subscribed to the alarm topic                  |
 * | `alarmTopicArn` | `AGENTSTATE_ALARM_TOPIC_ARN`  | a topic of your own for every alarm            |
 * | `corsOrigins`   | `AGENTSTATE_CORS_ORIGINS`     | origins whose pages may call the API (comma-separated) |
 * | `allowedWorkerFunctionArns` | `AGENTSTATE_ALLOWED_WORKER_FUNCTION_ARNS` | Lambda functions agents may use as `lambda:` workers (comma-separated ARNs) |
 * | `tracing`       | `AGENTSTATE_TRACING`          | `lambda` (default: Lambda's own traces), `detailed` (Powertools' Tracer: the handler and every AWS call), or `off` (docs/deploy.md, "Tracing") |
 * | `account`, `region` | `AGENTSTATE_ACCOUNT`, `AGENTSTATE_REGION` | pin the stack to one environment |
 *
 * Without `account` and `region` the stack is environment-agnostic: the template names no
 * account or region (it uses `AWS::Region` and `AWS::AccountId`), synth needs no credentials
 * and no network, and `cdk deploy` deploys it wherever the CLI's credentials point. (The CLI's
 * own `CDK_DEFAULT_REGION` is not used: without a configured region it is `us-east-1`, which
 * would then be baked into every ARN of the template.)
 */
const app = new App();
const setting = (context: string, env: string): string | undefined =>
  (app.node.tryGetContext(context) as string | undefined) ?? (process.env[env] || undefined);

const stackName = setting('stackName', 'AGENTSTATE_STACK_NAME') ?? 'AgentState';
const account = setting('account', 'AGENTSTATE_ACCOUNT');
const region = setting('region', 'AGENTSTATE_REGION');
const alarmEmail = setting('alarmEmail', 'AGENTSTATE_ALARM_EMAIL');
const alarmTopicArn = setting('alarmTopicArn', 'AGENTSTATE_ALARM_TOPIC_ARN');
const list = (value: string | undefined) =>
  (value ?? '')
    .split(',')
    .map((entry) => entry.trim())
    .filter(Boolean);
const corsOrigins = list(setting('corsOrigins', 'AGENTSTATE_CORS_ORIGINS'));
const allowedWorkerFunctionArns = list(setting('allowedWorkerFunctionArns', 'AGENTSTATE_ALLOWED_WORKER_FUNCTION_ARNS'));
// A typo fails the synth rather than deploying another level than the one asked for.
const tracing = parseTracingLevel(setting('tracing', 'AGENTSTATE_TRACING'));

new AgentStateStack(app, stackName, {
  ...(account || region ? { env: { account, region } } : {}),
  agentState: {
    ...(alarmEmail ? { alarmEmail } : {}),
    ...(alarmTopicArn ? { alarmTopicArn } : {}),
    corsOrigins,
    allowedWorkerFunctionArns,
    tracing,
  },
});

// cdk-nag's AWS Solutions rules run at synth; an unacknowledged finding fails the synth.
Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
