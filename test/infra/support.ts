import { readFileSync } from 'node:fs';
import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import type { AgentStateProps } from '../../lib/agent-state.js';
import { AgentStateStack } from '../../lib/agent-state-stack.js';

/** The feature flags of cdk.json, so tests synthesize what `cdk synth` does. */
function cdkJsonContext(): Record<string, unknown> {
  const cdkJson = JSON.parse(readFileSync(new URL('../../cdk.json', import.meta.url), 'utf8')) as {
    context?: Record<string, unknown>;
  };
  return cdkJson.context ?? {};
}

/**
 * The stack as the app builds it, with asset bundling skipped (about half a second instead of
 * seconds per function); test/infra/synth.test.ts covers the real bundling.
 */
export function synthesize(props?: AgentStateProps) {
  const app = new App({ context: { ...cdkJsonContext(), 'aws:cdk:bundling-stacks': [] } });
  const stack = new AgentStateStack(app, 'AgentStateTest', props ? { agentState: props } : {});
  const template = Template.fromStack(stack);
  return { app, stack, template };
}

/** A template resource; every resource type these tests read has properties. */
type Resource = { Type: string; Properties: Record<string, unknown>; DeletionPolicy?: string };

/** Small readers over a synthesized template, so assertions say what they check. */
export class TemplateReader {
  private readonly resources: Record<string, Resource>;

  constructor(readonly template: Template) {
    this.resources = template.toJSON().Resources as Record<string, Resource>;
  }

  ofType(type: string): Array<[logicalId: string, resource: Resource]> {
    return Object.entries(this.resources).filter(([, resource]) => resource.Type === type);
  }

  get(logicalId: string): Resource {
    const resource = this.resources[logicalId];
    if (!resource) throw new Error(`no resource ${logicalId}`);
    return resource;
  }

  /** The logical id of the role a function runs as. */
  roleOf(functionId: string): string {
    const role = this.get(functionId).Properties?.Role as { 'Fn::GetAtt': [string, string] };
    return role['Fn::GetAtt'][0];
  }

  /** Every statement of every policy attached to a role. */
  statementsOf(roleId: string): Array<{ Action: string | string[]; Resource: unknown; Effect: string }> {
    return this.ofType('AWS::IAM::Policy')
      .filter(([, policy]) => (policy.Properties.Roles as Array<{ Ref: string }>).some((role) => role.Ref === roleId))
      .flatMap(([, policy]) => (policy.Properties.PolicyDocument as { Statement: never[] }).Statement);
  }

  /** The actions a function's role is allowed, optionally only those of one service. */
  actionsOf(functionId: string, service?: string): string[] {
    const actions = this.statementsOf(this.roleOf(functionId)).flatMap((statement) =>
      Array.isArray(statement.Action) ? statement.Action : [statement.Action],
    );
    return [...new Set(actions.filter((action) => !service || action.startsWith(`${service}:`)))].sort();
  }
}
