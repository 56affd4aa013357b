import { describe, expect, it } from 'vitest';
import { deployedFunctions } from '../../bench/bundles.js';
import { synthesize, TemplateReader } from './support.js';

/**
 * `npm run bench` section 4 (bench/bundles.ts) measures the size and module import of every
 * function the stack deploys. Its list is written out, so this holds it to the stack: a
 * function added to lib/agent-state.ts without a row there fails here.
 */
describe('bench section 4', () => {
  it('measures every function the stack deploys, each from an entry of its own', () => {
    // Prepare
    const functions = new TemplateReader(synthesize().template).ofType('AWS::Lambda::Function');

    // Assess: as many rows as functions, and no two rows measure one entry (each function of
    // the stack has an entry of its own: functions/http/<group>.ts, functions/streams/<hook>.ts).
    expect(deployedFunctions.length, 'every function of lib/agent-state.ts has its row in bench/bundles.ts deployedFunctions').toBe(
      functions.length,
    );
    expect(new Set(deployedFunctions.map((fn) => fn.file)).size).toBe(deployedFunctions.length);
  });
});
