import http from 'node:http';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { runningFunction, trackRunningFunctions } from '../../functions/local/running-function.js';
import { type GateRoles, judgeCall } from './iam-judge.js';

/**
 * Loaded into a local server started for the tests (`--import`, after tsx): every DynamoDB
 * request of the process is judged by the IAM gate (iam-gate.ts). With the gate's roles in
 * `AGENTSTATE_TEST_IAM_ROLES`, this process judges each request itself, by the same roles and
 * the same code (iam-judge.ts), and one every call of which is allowed goes on to DynamoDB Local
 * as it was. Any other request, and every request when the roles are not given, goes to the gate
 * of `AGENTSTATE_TEST_IAM_GATE` instead, naming the function that made it and where it was
 * going: the gate refuses it as AWS would, and counts it against the file. DynamoDB Streams
 * requests (the stream readers, Lambda's own part in AWS) go on as they were.
 *
 * The judgement needs the request's body, which `http.request` does not see: the SDK's HTTP
 * handler (`NodeHttpHandler.handle`, of the class every DynamoDB client of the process makes) is
 * given it, and passes that request's headers object on to `http.request`, where the allowed ones
 * are known by it. The AWS SDK looks `http.request` up when its first client connects, so replacing it
 * here, before anything runs, reaches every client; a request that did not pass the handler
 * here (another copy of it, say) is not known as allowed, so it goes to the gate.
 */
const gate = new URL(process.env.AGENTSTATE_TEST_IAM_GATE ?? '');
const roles = process.env.AGENTSTATE_TEST_IAM_ROLES ? (JSON.parse(process.env.AGENTSTATE_TEST_IAM_ROLES) as GateRoles) : undefined;
const send = http.request;
const DYNAMODB = 'DynamoDB_20120810.';

/** The headers objects of the requests judged allowed here, each until it is sent. */
const allowed = new WeakSet<object>();

const decoder = new TextDecoder();
/** A request's JSON as the SDK hands it over (bytes, in this SDK), or undefined for a stream. */
const bodyText = (body: unknown): string | undefined =>
  typeof body === 'string' ? body : body instanceof Uint8Array ? decoder.decode(body) : body == null ? '' : undefined;

type Headers = Record<string, string | string[] | undefined>;
const targetOf = (headers: Headers) => headers['x-amz-target'] ?? headers['X-Amz-Target'];

/** What the SDK's HTTP handler is given: one attempt of one request. */
interface SdkRequest {
  headers: Record<string, string>;
  body?: unknown;
}
interface SdkHandler {
  handle(this: SdkHandler, request: SdkRequest, options?: unknown): Promise<unknown>;
}

if (roles) {
  // The class of the handler a DynamoDB client makes for itself, as every client of the server does.
  const probe = new DynamoDBClient({ region: 'us-east-1' });
  const handler = Object.getPrototypeOf(probe.config.requestHandler) as SdkHandler;
  probe.destroy();
  const handle = handler.handle;
  handler.handle = function judged(request, options) {
    const target = targetOf(request.headers);
    const body = typeof target === 'string' && target.startsWith(DYNAMODB) ? bodyText(request.body) : undefined;
    if (typeof target === 'string' && body !== undefined) {
      try {
        const input = JSON.parse(body || '{}') as Record<string, any>;
        const calls = judgeCall(roles, runningFunction() ?? '', target.slice(DYNAMODB.length), input);
        if (calls.every((call) => call.allowed)) allowed.add(request.headers);
      } catch {
        // Not judged here: the gate judges it.
      }
    }
    return handle.call(this, request, options);
  };
}

type Send = (...args: unknown[]) => http.ClientRequest;

function gated(...args: unknown[]): http.ClientRequest {
  const [first, ...rest] = args;
  if (typeof first === 'object' && first !== null && !(first instanceof URL)) {
    const options = first as http.RequestOptions;
    const headers = (options.headers ?? {}) as Headers;
    const target = targetOf(headers);
    if (typeof target === 'string' && target.startsWith(DYNAMODB)) {
      if (allowed.delete(headers)) return (send as Send)(...args);
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
