import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * Which function of the stack a piece of the local server is standing in for right now: a
 * route group (`commits`), or `change-hook`, `webhook-hook`, `delivery-hook`, `websocket`. In
 * AWS each is a Lambda function with a role of its own (lib/permissions.ts); `npm start` runs
 * them all in one process, and this is what still tells them apart. The tests' IAM gate
 * (test/helpers/iam-gate.ts) reads it to hold every DynamoDB call of the end-to-end suite to
 * the role of the function that made it, as the synthesized template grants it.
 */
const running = new AsyncLocalStorage<string>();

/** Runs `work` as the function `name`; what it starts later (timers, promises) stays that function's. */
export function runAs<T>(name: string, work: () => T): T {
  return running.run(name, work);
}

/** Runs `work` as the local server itself (its DynamoDB Local probe, the table's set-up): no function's. */
export function runAsServer<T>(work: () => T): T {
  return running.exit(work);
}

/** The function running now; undefined for the server's own work. */
export function runningFunction(): string | undefined {
  return running.getStore();
}
