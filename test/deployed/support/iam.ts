import type { Deployment, PolicyStatement } from './deployment.js';

/** One grant of a role: an action pattern on a resource pattern, as the template states it. */
export interface Grant {
  action: string;
  resource: string;
}

/** One call a function made: what IAM is asked for it. */
export interface Call {
  action: string;
  resource: string;
}

/**
 * IAM's answer for the functions of one deployment: each function acts with its own role's
 * policies as the template gives them, and a call is allowed only if an Allow statement names
 * its action and its resource (with IAM's `*` and `?` wildcards). Every call is recorded, with
 * the grant that allowed it, so a test can ask which grants no path ever used.
 */
export class Iam {
  private readonly policies = new Map<string, { roleName: string; statements: PolicyStatement[]; grants: Grant[] }>();
  /** Per function: calls allowed, calls refused, and the grants that allowed something. */
  private readonly record = new Map<string, { allowed: Call[]; refused: Call[]; used: Set<string> }>();

  constructor(deployment: Deployment) {
    for (const fn of deployment.functions()) {
      const statements = deployment.statementsOf(fn.roleId);
      this.policies.set(fn.logicalId, { roleName: deployment.physicalName(fn.roleId), statements, grants: grantsOfStatements(statements) });
      this.record.set(fn.logicalId, { allowed: [], refused: [], used: new Set() });
    }
  }

  /** Whether the function may make the call; the call is recorded either way. */
  authorize(functionId: string, call: Call): boolean {
    const policy = this.policies.get(functionId);
    const record = this.record.get(functionId);
    if (!policy || !record) return false;
    let allowed = false;
    for (const grant of policy.grants) {
      if (grantAllows(grant, call)) {
        record.used.add(grantKey(grant));
        allowed = true;
      }
    }
    (allowed ? record.allowed : record.refused).push(call);
    return allowed;
  }

  /** The assumed-role ARN a refusal names, as AWS writes it. */
  callerArn(functionId: string, functionName: string): string {
    return `arn:aws:sts::123456789012:assumed-role/${this.policies.get(functionId)?.roleName ?? 'unknown'}/${functionName}`;
  }

  /** Every grant of a function's role. */
  grantsOf(functionId: string): Grant[] {
    return grantsOfStatements(this.policies.get(functionId)?.statements ?? []);
  }

  refusedCalls(functionId: string): Call[] {
    return [...(this.record.get(functionId)?.refused ?? [])];
  }

  allowedCalls(functionId: string): Call[] {
    return [...(this.record.get(functionId)?.allowed ?? [])];
  }

  /** Whether some allowed call used this grant. */
  used(functionId: string, grant: Grant): boolean {
    return this.record.get(functionId)?.used.has(grantKey(grant)) ?? false;
  }
}

/**
 * Whether some grant allows the call: what `Iam.authorize` asks, without its record (the e2e
 * tests' IAM gate, test/helpers/iam-judge.ts, asks it in the server's process).
 */
export function grantsAllow(grants: readonly Grant[], call: Call): boolean {
  return grants.some((grant) => grantAllows(grant, call));
}

function grantAllows(grant: Grant, call: Call): boolean {
  return matches(grant.action, call.action, true) && matches(grant.resource, call.resource, false);
}

function grantsOfStatements(statements: readonly PolicyStatement[]): Grant[] {
  return statements.flatMap((statement) =>
    statement.actions.flatMap((action) => statement.resources.map((resource) => ({ action, resource }))),
  );
}

function grantKey(grant: Grant): string {
  return `${grant.action} ${grant.resource}`;
}

/** Each pattern's expression, made once: the e2e tests' IAM gate asks for every DynamoDB call. */
const patterns = new Map<string, RegExp>();

/** IAM's pattern match: `*` any run of characters, `?` one; actions ignore case, resources do not. */
function matches(pattern: string, value: string, ignoreCase: boolean): boolean {
  const key = `${ignoreCase ? 'i' : 's'}${pattern}`;
  let expression = patterns.get(key);
  if (!expression) {
    const source = pattern
      .split('')
      .map((char) => (char === '*' ? '.*' : char === '?' ? '.' : char.replace(/[.+^${}()|[\]\\]/g, '\\$&')))
      .join('');
    expression = new RegExp(`^${source}$`, ignoreCase ? 'i' : '');
    patterns.set(key, expression);
  }
  return expression.test(value);
}
