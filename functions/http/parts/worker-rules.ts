// Where a worker may be, by deployment: the agents group checks it at registration, decide at each call.

/** Whether this process is a Lambda function (AWS mode: the runtime sets the function's name). */
export function inLambda(env: NodeJS.ProcessEnv): boolean {
  return Boolean(env.AWS_LAMBDA_FUNCTION_NAME);
}

/**
 * The one rule for `lambda:` workers, checked at registration and again at each call (the
 * stack's allow-list may have shrunk since the agent was registered).
 */
export function lambdaWorkerAllowed(env: NodeJS.ProcessEnv, url: string): boolean {
  if (!inLambda(env) || !url.startsWith('lambda:')) return true;
  return (env.AGENTSTATE_ALLOWED_WORKER_ARNS ?? '').split(',').filter(Boolean).includes(url.slice('lambda:'.length));
}
