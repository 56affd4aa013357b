import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/** A resource of a synthesized CloudFormation template. */
export interface TemplateResource {
  Type: string;
  Properties: Record<string, any>;
  Metadata?: Record<string, any>;
}

export interface Template {
  Resources: Record<string, TemplateResource>;
  Outputs?: Record<string, { Value: unknown }>;
}

/** The one stack of the assembly: its template and the folder its assets are in. */
export function readAssembly(outdir: string): { template: Template; outdir: string } {
  const manifest = JSON.parse(readFileSync(join(outdir, 'manifest.json'), 'utf8')) as {
    artifacts: Record<string, { type: string; properties?: { templateFile?: string } }>;
  };
  const stacks = Object.values(manifest.artifacts).filter((artifact) => artifact.type === 'aws:cloudformation:stack');
  if (stacks.length !== 1) throw new Error(`expected one stack in the assembly, found ${stacks.length}`);
  const templateFile = stacks[0]?.properties?.templateFile as string;
  return { template: JSON.parse(readFileSync(join(outdir, templateFile), 'utf8')) as Template, outdir };
}

/**
 * What CloudFormation would have made of the template in one account and region: a physical
 * name or id for every resource, the ARNs `Fn::GetAtt` names, and the pseudo parameters. The
 * table's name is given (the test's own table in DynamoDB Local); every other name is derived
 * from the logical id, the way CloudFormation derives generated names.
 */
export class Deployment {
  readonly region = 'eu-west-1';
  readonly account = '123456789012';
  readonly partition = 'aws';
  readonly tableLogicalId: string;

  constructor(
    readonly template: Template,
    readonly tableName: string,
    readonly stackName = 'AgentState',
  ) {
    const tables = this.ofType('AWS::DynamoDB::GlobalTable');
    if (tables.length !== 1) throw new Error(`expected one table, found ${tables.length}`);
    this.tableLogicalId = (tables[0] as [string, TemplateResource])[0];
  }

  ofType(type: string): Array<[string, TemplateResource]> {
    return Object.entries(this.template.Resources).filter(([, resource]) => resource.Type === type);
  }

  resource(logicalId: string): TemplateResource {
    const resource = this.template.Resources[logicalId];
    if (!resource) throw new Error(`no resource ${logicalId} in the template`);
    return resource;
  }

  get tableArn(): string {
    return `arn:aws:dynamodb:${this.region}:${this.account}:table/${this.tableName}`;
  }

  /** `Ref`: the physical name or id of a resource, or a pseudo parameter. */
  ref(logicalId: string): string {
    switch (logicalId) {
      case 'AWS::Region':
        return this.region;
      case 'AWS::AccountId':
        return this.account;
      case 'AWS::Partition':
        return this.partition;
      case 'AWS::URLSuffix':
        return 'amazonaws.com';
      case 'AWS::StackName':
        return this.stackName;
      case 'AWS::NoValue':
        return '';
    }
    const { Type } = this.resource(logicalId);
    if (logicalId === this.tableLogicalId) return this.tableName;
    if (Type === 'AWS::ApiGatewayV2::Api') return apiId(logicalId);
    if (Type === 'AWS::SQS::Queue') return `https://sqs.${this.region}.amazonaws.com/${this.account}/${this.physicalName(logicalId)}`;
    return this.physicalName(logicalId);
  }

  /** `Fn::GetAtt`. */
  getAtt(logicalId: string, attribute: string): string {
    const { Type } = this.resource(logicalId);
    const name = this.physicalName(logicalId);
    const arn = (service: string, resource: string) => `arn:aws:${service}:${this.region}:${this.account}:${resource}`;
    const key = `${Type}.${attribute}`;
    switch (key) {
      case 'AWS::DynamoDB::GlobalTable.Arn':
        return this.tableArn;
      case 'AWS::DynamoDB::GlobalTable.StreamArn':
        return `${this.tableArn}/stream/2026-01-01T00:00:00.000`;
      case 'AWS::Lambda::Function.Arn':
        return arn('lambda', `function:${name}`);
      case 'AWS::IAM::Role.Arn':
        return `arn:aws:iam::${this.account}:role/${name}`;
      case 'AWS::Logs::LogGroup.Arn':
        return arn('logs', `log-group:${name}:*`);
      case 'AWS::Events::EventBus.Arn':
        return arn('events', `event-bus/${name}`);
      case 'AWS::SQS::Queue.Arn':
        return arn('sqs', name);
      case 'AWS::SNS::Topic.TopicArn':
        return arn('sns', name);
      case 'AWS::KMS::Key.Arn':
        return arn('kms', `key/${name}`);
      case 'AWS::ApiGatewayV2::Api.ApiEndpoint':
        return `https://${apiId(logicalId)}.execute-api.${this.region}.amazonaws.com`;
    }
    throw new Error(`the deployment does not know ${key}; teach test/deployed/support/deployment.ts`);
  }

  /** A generated physical name: the stack name, the logical id and a suffix, as CloudFormation does. */
  physicalName(logicalId: string): string {
    if (logicalId === this.tableLogicalId) return this.tableName;
    // A FIFO queue's name ends in `.fifo`, and CloudFormation's generated one too.
    const { Type, Properties } = this.resource(logicalId);
    if (Type === 'AWS::SQS::Queue' && Properties?.FifoQueue) return `${this.stackName}-${logicalId}-TEST.fifo`;
    return `${this.stackName}-${logicalId}-TEST`;
  }

  /** Resolves the intrinsic functions a synthesized template uses. */
  resolve(value: unknown): any {
    if (Array.isArray(value)) return value.map((item) => this.resolve(item));
    if (value === null || typeof value !== 'object') return value;
    const node = value as Record<string, unknown>;
    const [fn] = Object.keys(node);
    if (Object.keys(node).length === 1 && fn) {
      const argument = node[fn];
      switch (fn) {
        case 'Ref':
          return this.ref(argument as string);
        case 'Fn::GetAtt': {
          const [logicalId, attribute] = Array.isArray(argument) ? argument : String(argument).split('.');
          return this.getAtt(logicalId as string, attribute as string);
        }
        case 'Fn::Join': {
          const [separator, parts] = argument as [string, unknown[]];
          return this.resolve(parts).join(separator);
        }
        case 'Fn::Select': {
          const [index, list] = argument as [number, unknown];
          return this.resolve(list)[index];
        }
        case 'Fn::Split': {
          const [separator, text] = argument as [string, unknown];
          return String(this.resolve(text)).split(separator);
        }
        case 'Fn::Sub': {
          const [text, variables = {}] = Array.isArray(argument) ? argument : [argument, {}];
          const resolved = this.resolve(variables) as Record<string, string>;
          return String(text).replace(/\$\{([^}]+)\}/g, (_match, name: string) => {
            if (name in resolved) return String(resolved[name]);
            const [logicalId, attribute] = name.split('.');
            return attribute ? this.getAtt(logicalId as string, attribute) : this.ref(name);
          });
        }
      }
      if (fn.startsWith('Fn::')) throw new Error(`the deployment cannot resolve ${fn}`);
    }
    return Object.fromEntries(Object.entries(node).map(([key, inner]) => [key, this.resolve(inner)]));
  }

  /** Every Lambda function of the stack, as deployed. */
  functions(): DeployedFunction[] {
    return this.ofType('AWS::Lambda::Function').map(([logicalId, resource]) => {
      const { Properties: properties, Metadata: metadata } = resource;
      const roleId = (properties.Role as { 'Fn::GetAtt': [string, string] })['Fn::GetAtt'][0];
      const [file, exportName] = String(properties.Handler).split('.');
      return {
        logicalId,
        name: this.physicalName(logicalId),
        description: String(properties.Description ?? ''),
        assetPath: String(metadata?.['aws:asset:path']),
        handlerFile: file as string,
        handlerExport: exportName as string,
        runtime: String(properties.Runtime),
        memorySize: Number(properties.MemorySize ?? 128),
        timeoutSeconds: Number(properties.Timeout ?? 3),
        environment: this.resolve(properties.Environment?.Variables ?? {}) as Record<string, string>,
        tracing: String(properties.TracingConfig?.Mode ?? 'PassThrough'),
        logFormat: String(properties.LoggingConfig?.LogFormat ?? 'Text'),
        logGroupId: (properties.LoggingConfig?.LogGroup as { Ref?: string } | undefined)?.Ref,
        roleId,
      };
    });
  }

  /** The function a description matches, e.g. /the state routes$/. */
  functionNamed(description: RegExp): DeployedFunction {
    const found = this.functions().filter((fn) => description.test(fn.description));
    if (found.length !== 1) throw new Error(`expected one function described ${description}, found ${found.length}`);
    return found[0] as DeployedFunction;
  }

  /** The Allow statements of every policy attached to a role, resolved. */
  statementsOf(roleId: string): PolicyStatement[] {
    const inline = (this.resource(roleId).Properties.Policies ?? []).flatMap(
      (policy: { PolicyDocument: { Statement: unknown[] } }) => policy.PolicyDocument.Statement,
    );
    const attached = this.ofType('AWS::IAM::Policy')
      .filter(([, policy]) => (policy.Properties.Roles as Array<{ Ref: string }>).some((role) => role.Ref === roleId))
      .flatMap(([, policy]) => policy.Properties.PolicyDocument.Statement as unknown[]);
    if ((this.resource(roleId).Properties.ManagedPolicyArns ?? []).length > 0) {
      throw new Error(`role ${roleId} has managed policies, which this test cannot read`);
    }
    return [...inline, ...attached].map((statement) => {
      const resolved = this.resolve(statement) as Record<string, unknown>;
      const known = new Set(['Effect', 'Action', 'Resource', 'Sid']);
      const unknown = Object.keys(resolved).filter((key) => !known.has(key));
      if (unknown.length > 0 || resolved.Effect !== 'Allow') {
        throw new Error(`a statement of ${roleId} has ${unknown.join(', ') || resolved.Effect}, which this test cannot evaluate`);
      }
      return { actions: list(resolved.Action), resources: list(resolved.Resource) };
    });
  }
}

export interface DeployedFunction {
  logicalId: string;
  name: string;
  description: string;
  assetPath: string;
  handlerFile: string;
  handlerExport: string;
  runtime: string;
  memorySize: number;
  timeoutSeconds: number;
  environment: Record<string, string>;
  tracing: string;
  logFormat: string;
  logGroupId: string | undefined;
  roleId: string;
}

export interface PolicyStatement {
  actions: string[];
  resources: string[];
}

function list(value: unknown): string[] {
  return (Array.isArray(value) ? value : [value]).map(String);
}

/** An API id as API Gateway makes them: ten lower-case letters and digits. */
function apiId(logicalId: string): string {
  return (
    logicalId
      .toLowerCase()
      .replace(/[^a-z0-9]/g, '')
      .slice(-10) || 'api0000000'
  );
}
