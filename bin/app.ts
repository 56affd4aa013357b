import { App, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { AgentStateStack } from '../lib/agent-state-stack.js';

/**
 * The CDK app (`cdk synth`, `cdk deploy`). Stack name: context `stackName`
 * (`cdk deploy -c stackName=AgentStateDev`), else env `AGENTSTATE_STACK_NAME`, else `AgentState`.
 * Account and region come from the CLI's profile; without one the stack is
 * environment-agnostic, so synth needs no credentials and no network.
 */
const app = new App();
const stackName: string = (app.node.tryGetContext('stackName') as string | undefined) ?? process.env.AGENTSTATE_STACK_NAME ?? 'AgentState';

new AgentStateStack(app, stackName, {
  env: { account: process.env.CDK_DEFAULT_ACCOUNT, region: process.env.CDK_DEFAULT_REGION },
});

// cdk-nag's AWS Solutions rules run at synth; an unacknowledged finding fails the synth.
Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
