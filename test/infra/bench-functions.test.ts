import { describe, expect, it } from 'vitest';
import { deployedEntries } from '../../lib/entries.js';
import { synthesize, TemplateReader } from './support.js';

/**
 * lib/entries.ts is the one list of the stack's functions and their entry files: the stack
 * bundles from it, `npm run bench` section 4 (bench/bundles.ts) measures it, the bundle tests
 * and knip read it. This holds it to the stack: a function added to lib/agent-state.ts some
 * other way than from an entry of that list fails here.
 */
describe('the deployed functions (lib/entries.ts)', () => {
  it('names every function the stack deploys, each with an entry of its own', () => {
    // Prepare
    const functions = new TemplateReader(synthesize().template).ofType('AWS::Lambda::Function');

    // Assess: as many rows as functions, and no two rows measure one entry (each function of
    // the stack has an entry of its own: functions/http/<group>.ts, functions/streams/<hook>.ts).
    expect(deployedEntries.length, 'every function of lib/agent-state.ts has its row in lib/entries.ts').toBe(functions.length);
    expect(new Set(deployedEntries.map((fn) => fn.file)).size).toBe(deployedEntries.length);
  });
});
