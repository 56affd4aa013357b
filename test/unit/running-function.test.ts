import { describe, expect, it } from 'vitest';
import { runAs, runAsServer, runningFunction, trackRunningFunctions } from '../../functions/local/running-function.js';

/** What a function does a moment later: a promise and a timer away from where it started. */
const later = () => new Promise<string | undefined>((resolve) => setTimeout(() => resolve(runningFunction()), 1));

// One file, one module instance: the order of the tests is the order of the rule.
describe('which function the local server is running (the IAM gate reads it)', () => {
  it('is kept by nobody until asked for: runAs only runs the work', async () => {
    expect(runAs('commits', () => 7)).toBe(7);
    expect(await runAs('commits', later)).toBeUndefined();
    expect(runAs('commits', runningFunction)).toBeUndefined();
  });

  it('once tracked, follows each function through its promises and timers, and not the server', async () => {
    trackRunningFunctions();
    const [commits, hook] = await Promise.all([runAs('commits', later), runAs('change-hook', later)]);
    expect([commits, hook]).toEqual(['commits', 'change-hook']);
    expect(await runAs('state', () => runAsServer(later))).toBeUndefined();
    expect(runningFunction()).toBeUndefined();
  });
});
