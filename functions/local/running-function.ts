import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * Which function of the stack a piece of the local server is standing in for right now: a
 * route group (`commits`), or `change-hook`, `webhook-hook`, `delivery-hook`, `websocket`. In
 * AWS each is a Lambda function with a role of its own (lib/permissions.ts); `npm start` runs
 * them all in one process, and this is what still tells them apart. The tests' IAM gate
 * (test/helpers/iam-gate.ts) reads it to hold every DynamoDB call of the end-to-end suite to
 * the role of the function that made it, as the synthesized template grants it.
 *
 * Kept only once `trackRunningFunctions` has been called (the IAM gate's preload does, before
 * the server starts): nothing else reads it, and on node 20 an AsyncLocalStorage in use installs
 * promise hooks that run on every promise of the process. The AWS SDK makes some fifty promises
 * per DynamoDB request, so those hooks cost the server some 7% of its CPU: measured on
 * `npm start` with LangGraph driving a 20-step graph (2026-12-06), 185 against 199 ms of server
 * CPU per run, 140 against 170 ms once warm.
 */
const running = new AsyncLocalStorage<string>();
let tracking = false;

/** From now on, `runningFunction` answers which function is running (the tests' IAM gate). */
export function trackRunningFunctions(): void {
  tracking = true;
}

/** Runs `work` as the function `name`; what it starts later (timers, promises) stays that function's. */
export function runAs<T>(name: string, work: () => T): T {
  return tracking ? running.run(name, work) : work();
}

/** Runs `work` as the local server itself (its DynamoDB Local probe, the table's set-up): no function's. */
export function runAsServer<T>(work: () => T): T {
  return tracking ? running.exit(work) : work();
}

/** The function running now; undefined for the server's own work, and whenever nothing tracks. */
export function runningFunction(): string | undefined {
  return running.getStore();
}
