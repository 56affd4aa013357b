import http from 'node:http';
import { runningFunction, trackRunningFunctions } from '../../functions/local/running-function.js';

/**
 * Loaded into a local server started for the tests (`--import`, after tsx): every DynamoDB
 * request of the process goes to the IAM gate of `AGENTSTATE_TEST_IAM_GATE` instead of
 * DynamoDB Local, naming the function that made it and where it was going (iam-gate.ts).
 * The AWS SDK sends its requests with `http.request`, looked up when its first client
 * connects, so replacing it here, before anything runs, reaches every client. DynamoDB
 * Streams requests (the stream readers, Lambda's own part in AWS) go on as they were.
 */
const gate = new URL(process.env.AGENTSTATE_TEST_IAM_GATE ?? '');
const send = http.request;

type Send = (...args: unknown[]) => http.ClientRequest;

function gated(...args: unknown[]): http.ClientRequest {
  const [first, ...rest] = args;
  if (typeof first === 'object' && first !== null && !(first instanceof URL)) {
    const options = first as http.RequestOptions;
    const headers = (options.headers ?? {}) as Record<string, string>;
    const target = headers['x-amz-target'] ?? headers['X-Amz-Target'];
    if (typeof target === 'string' && target.startsWith('DynamoDB_20120810.')) {
      const upstream = `${options.hostname ?? options.host}:${options.port}`;
      const sent = {
        ...options,
        host: gate.hostname,
        hostname: gate.hostname,
        port: gate.port,
        headers: { ...headers, 'x-agentstate-function': runningFunction() ?? '', 'x-agentstate-upstream': upstream },
      };
      return (send as Send)(sent, ...rest);
    }
  }
  return (send as Send)(...args);
}

http.request = gated as typeof http.request;
// The server keeps which function runs only when asked (running-function.ts): the gate asks.
trackRunningFunctions();
