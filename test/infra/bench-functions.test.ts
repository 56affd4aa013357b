import { describe, expect, it } from 'vitest';
import { deployedFunctions } from '../../bench/bundles.js';
import { synthesize, TemplateReader } from './support.js';

/**
 * `npm run bench` section 4 (bench/bundles.ts) measures the size and module import of every
 * function the stack deploys. Its list is written out, so this holds it to the stack: a
 * function added to lib/agent-state.ts without a row there fails here.
 */
describe('bench section 4', () => {
  it('measures every function the stack deploys, each stream consumer as the stack configures it', () => {
    // Prepare
    const functions = new TemplateReader(synthesize().template).ofType('AWS::Lambda::Function');
    const consumerOf = (properties: Record<string, unknown>) =>
      (properties.Environment as { Variables?: Record<string, unknown> } | undefined)?.Variables?.AGENTSTATE_CHANGE_CONSUMER;

    // Assess
    expect(deployedFunctions.length, 'every function of lib/agent-state.ts has its row in bench/bundles.ts deployedFunctions').toBe(
      functions.length,
    );
    const consumers = functions.map(([, fn]) => consumerOf(fn.Properties)).filter((consumer) => consumer !== undefined);
    expect(deployedFunctions.flatMap((fn) => fn.env?.AGENTSTATE_CHANGE_CONSUMER ?? []).sort()).toEqual(consumers.sort());
  });
});
