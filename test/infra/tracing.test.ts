import { Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { describe, expect, it } from 'vitest';
import type { TracingLevel } from '../../functions/telemetry/tracing-level.js';
import { synthesize, TemplateReader } from './support.js';

/**
 * The tracing level (AgentStateProps `tracing`, docs/deploy.md "Tracing") as the template says
 * it: Lambda's tracing mode, the variable that tells each function whether to load Powertools'
 * Tracer, and the X-Ray grant that comes with active tracing.
 */
function deployedAt(tracing?: TracingLevel) {
  const { stack, template } = synthesize(tracing ? { tracing } : {});
  const reader = new TemplateReader(template);
  const functions = reader.ofType('AWS::Lambda::Function');
  const xrayGrants = functions.flatMap(([id]) => reader.actionsOf(id).filter((action) => action.startsWith('xray:')));
  return { stack, reader, functions, xrayGrants };
}

describe('tracing levels', () => {
  it('defaults to Lambda’s own active tracing, with no tracer in the functions', () => {
    // Act
    const { functions, xrayGrants } = deployedAt();

    // Assess
    expect(functions.length).toBeGreaterThan(10);
    for (const [id, fn] of functions) {
      expect(fn.Properties.TracingConfig, id).toEqual({ Mode: 'Active' });
      expect((fn.Properties.Environment as { Variables: Record<string, unknown> }).Variables.AGENTSTATE_TRACING, id).toBe('lambda');
    }
    expect(new Set(xrayGrants)).toEqual(new Set(['xray:PutTraceSegments', 'xray:PutTelemetryRecords']));
  });

  it('tells every function to load the tracer at `detailed`, still with active tracing', () => {
    const { functions } = deployedAt('detailed');
    for (const [id, fn] of functions) {
      expect(fn.Properties.TracingConfig, id).toEqual({ Mode: 'Active' });
      expect((fn.Properties.Environment as { Variables: Record<string, unknown> }).Variables.AGENTSTATE_TRACING, id).toBe('detailed');
    }
  });

  it('turns tracing off at `off`, grants no X-Ray action, and acknowledges no X-Ray wildcard', () => {
    // Act
    const { stack, functions, xrayGrants } = deployedAt('off');

    // Assess: no tracing mode (Lambda's PassThrough), no grant, nothing to excuse for cdk-nag.
    for (const [id, fn] of functions) {
      expect(fn.Properties.TracingConfig, id).toBeUndefined();
      expect((fn.Properties.Environment as { Variables: Record<string, unknown> }).Variables.AGENTSTATE_TRACING, id).toBe('off');
    }
    expect(xrayGrants).toEqual([]);
    const acknowledged = stack.node
      .findAll()
      .flatMap((construct) => construct.node.metadata)
      .filter((entry) => entry.type === Validations.ACKNOWLEDGED_RULES_METADATA_KEY)
      .flatMap((entry) => Object.keys(entry.data as Record<string, string>));
    expect(acknowledged.filter((rule) => rule === 'AwsSolutions-IAM5[Resource::*]')).toEqual([]);
    expect(new AwsSolutionsChecks().validateScope(stack).violations).toEqual([]);
  });

  it('fails the synth on a level it does not know', () => {
    expect(() => synthesize({ tracing: 'verbose' as TracingLevel })).toThrow(/tracing must be one of lambda, detailed, off/);
  });
});
