// The Node.js Lambda runtime as far as a handler can tell: it imports `_HANDLER` from
// `LAMBDA_TASK_ROOT`, calls it once per invocation with the event and a context, one invocation
// at a time, sets `_X_AMZN_TRACE_ID` for each, and (with the JSON log format) writes every
// console call as one JSON object carrying the invocation's request id. Invocations arrive over
// the IPC channel from test/deployed/support/lambda.ts.
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { format } from 'node:util';

const { LAMBDA_TASK_ROOT: root, _HANDLER: handlerName, AWS_LAMBDA_LOG_FORMAT: logFormat } = process.env;
let requestId;

if (logFormat === 'JSON') {
  const levels = { log: 'INFO', info: 'INFO', warn: 'WARN', error: 'ERROR', debug: 'DEBUG', trace: 'TRACE' };
  for (const [method, level] of Object.entries(levels)) {
    console[method] = (...args) => {
      const line = { timestamp: new Date().toISOString(), level, requestId, message: format(...args) };
      const [first] = args;
      if (args.length === 1 && first instanceof Error) {
        Object.assign(line, { errorType: first.name, errorMessage: first.message, stackTrace: String(first.stack).split('\n') });
      }
      process.stdout.write(`${JSON.stringify(line)}\n`);
    };
  }
}

const [file, exportName] = String(handlerName).split('.');
let handler;
try {
  const module = await import(pathToFileURL(join(root, `${file}.mjs`)).href);
  handler = module[exportName];
  if (typeof handler !== 'function') throw new Error(`${handlerName} is undefined or not exported`);
  process.send({ type: 'ready' });
} catch (error) {
  process.send({ type: 'init-error', errorType: error?.name ?? 'Error', errorMessage: String(error?.message ?? error) });
  process.exit(1);
}

process.on('message', async (message) => {
  if (message.type !== 'invoke') return;
  requestId = message.requestId;
  process.env._X_AMZN_TRACE_ID = message.traceId;
  const deadline = Date.now() + message.remainingMs;
  const context = {
    callbackWaitsForEmptyEventLoop: true,
    functionName: process.env.AWS_LAMBDA_FUNCTION_NAME,
    functionVersion: process.env.AWS_LAMBDA_FUNCTION_VERSION,
    invokedFunctionArn: message.functionArn,
    memoryLimitInMB: process.env.AWS_LAMBDA_FUNCTION_MEMORY_SIZE,
    awsRequestId: message.requestId,
    logGroupName: process.env.AWS_LAMBDA_LOG_GROUP_NAME,
    logStreamName: process.env.AWS_LAMBDA_LOG_STREAM_NAME,
    getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
  };
  let answer;
  try {
    const result = await handler(message.event, context);
    answer = { type: 'result', id: message.id, payload: JSON.stringify(result ?? null) };
  } catch (error) {
    console.error('Invoke Error', error);
    answer = { type: 'error', id: message.id, errorType: error?.name ?? 'Error', errorMessage: String(error?.message ?? error) };
  }
  // A marker on stdout after the invocation's last log line: the parent reads logs and the
  // answer on two channels, and waits for both.
  process.stdout.write(`\u0000END ${message.id}\n`, () => process.send(answer));
});
