import { requiredCalls } from '../deployed/support/aws-stand-in.js';
import { type Call, type Grant, grantsAllow } from '../deployed/support/iam.js';

/**
 * What IAM is asked for each DynamoDB call of a local server, and its answer, by the roles of the
 * synthesized template: the one judgement of the e2e tests' IAM gate (iam-gate.ts), made in the
 * server's process by its preload (iam-gate-preload.ts) and again by the gate for a call the
 * preload did not find allowed. Light on purpose: the preload bundles it into every gated server.
 */

/** The grants of each function's role, by the name the local server gives the function, and where the table is. */
export interface GateRoles {
  region: string;
  account: string;
  grants: Record<string, Grant[]>;
}

/** A call of the local server as the gate judged it: which function made it, and IAM's answer. */
export interface GatedCall extends Call {
  /** The function as the local server names it (functions/local/running-function.ts), or `the local server`. */
  fn: string;
  allowed: boolean;
}

/**
 * What the local server does with DynamoDB as itself, not as any function: make the table and
 * look whether DynamoDB Local answers (in AWS, CloudFormation and nobody).
 */
const SERVER_OWN = new Set(['CreateTable', 'DescribeTable', 'UpdateTimeToLive', 'DescribeTimeToLive', 'ListTables']);

/** Each IAM call one DynamoDB request of the function `fn` (empty: the server itself) asks for, judged. */
export function judgeCall(roles: GateRoles, fn: string, operation: string, input: Record<string, any>): GatedCall[] {
  const asked = requiredCalls(operation, input, (table) =>
    table.startsWith('arn:') ? table : `arn:aws:dynamodb:${roles.region}:${roles.account}:table/${table}`,
  );
  if (!fn) return asked.map((call) => ({ ...call, fn: 'the local server', allowed: SERVER_OWN.has(operation) }));
  const grants = roles.grants[fn];
  return asked.map((call) => ({ ...call, fn, allowed: grants !== undefined && grantsAllow(grants, call) }));
}
