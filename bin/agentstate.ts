import { parseArgs } from 'node:util';
import { CloudFormationClient, DescribeStacksCommand } from '@aws-sdk/client-cloudformation';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { type ApiKey, ApiKeyError, ApiKeyStore } from '../functions/store/access/api-keys.js';
import { TenantEraser } from '../functions/store/erasure/tenant-erasure.js';
import { createStores } from '../functions/store/index.js';
import { defaultTableName } from '../functions/store/table/table.js';

const USAGE = `agentstate: the admin CLI

Usage:
  agentstate keys create --tenant T [--agents a,b]   issue an API key (shown once)
  agentstate keys list [--tenant T]                   list keys (never the keys themselves)
  agentstate keys revoke <keyId>                      revoke a key (may take up to the
                                                      authorizer cache TTL, 5 min, to bite)
  agentstate tenants erase <tenant> --yes             revoke the tenant's API keys, then erase
                                                      every session, profile, memory item,
                                                      agent, webhook and dead letter of it;
                                                      --confirm <tenant> instead of --yes too;
                                                      --keep-keys to leave its keys working

Which table:
  --table NAME       the table (default: env AGENTSTATE_TABLE, else the TableName
                     output of the deployed stack)
  --stack NAME       the stack to read TableName from (default: env
                     AGENTSTATE_STACK_NAME, else AgentState)
  --endpoint URL     a DynamoDB Local endpoint (default: env AGENTSTATE_DYNAMODB_ENDPOINT);
                     the table then defaults to "${defaultTableName}"
  --region REGION    AWS region (default: the SDK's, e.g. AWS_REGION or your profile)

Other:
  --json             print JSON instead of text
  -h, --help         this help

AWS credentials come from the default chain (env, profile, SSO, instance role).`;

interface Io {
  out: (line: string) => void;
  err: (line: string) => void;
  env: NodeJS.ProcessEnv;
}

const parseCommandLine = (argv: readonly string[]) =>
  parseArgs({
    args: [...argv],
    allowPositionals: true,
    options: {
      tenant: { type: 'string' },
      agents: { type: 'string' },
      table: { type: 'string' },
      stack: { type: 'string' },
      endpoint: { type: 'string' },
      region: { type: 'string' },
      json: { type: 'boolean', default: false },
      yes: { type: 'boolean', default: false },
      confirm: { type: 'string' },
      'keep-keys': { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });

/** Runs the CLI; returns the exit code. Exported for tests. */
export async function main(argv: readonly string[], io: Io = defaultIo): Promise<number> {
  let parsed: ReturnType<typeof parseCommandLine>;
  try {
    parsed = parseCommandLine(argv);
  } catch (error) {
    io.err(`${(error as Error).message}\n\n${USAGE}`);
    return 2;
  }
  const { values, positionals } = parsed;
  const [topic, command, ...rest] = positionals;
  if (values.help || topic === undefined) {
    (values.help ? io.out : io.err)(USAGE);
    return values.help ? 0 : 2;
  }
  const known = (topic === 'keys' && ['create', 'list', 'revoke'].includes(command ?? '')) || (topic === 'tenants' && command === 'erase');
  if (!known) {
    io.err(`unknown command: ${positionals.join(' ')}\n\n${USAGE}`);
    return 2;
  }

  // The SDK's notice that its 2027 releases need Node 22 is not this CLI's business.
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  const endpoint = values.endpoint ?? io.env.AGENTSTATE_DYNAMODB_ENDPOINT;
  const region = values.region ?? io.env.AWS_REGION ?? io.env.AWS_DEFAULT_REGION;
  const client = new DynamoDBClient({
    ...(region ? { region } : endpoint ? { region: 'us-east-1' } : {}),
    ...(endpoint ? { endpoint } : {}),
    // DynamoDB Local takes any credentials, but the SDK insists on having some.
    ...(endpoint && !io.env.AWS_ACCESS_KEY_ID ? { credentials: { accessKeyId: 'local', secretAccessKey: 'local' } } : {}),
  });
  try {
    if (topic === 'tenants') return await eraseTenant(rest[0], values, { client, io, endpoint, region });
    const tableName = await resolveTable({ ...values, endpoint, region }, io.env);
    const store = new ApiKeyStore(client, tableName);

    switch (command) {
      case 'create': {
        if (!values.tenant) throw new UsageError('keys create needs --tenant T');
        const agents = values.agents
          ?.split(',')
          .map((agent) => agent.trim())
          .filter(Boolean);
        // `--agents "$AGENTS"` with the variable empty must not issue a key that may act as any agent.
        if (agents?.length === 0) throw new UsageError('--agents names no agent; leave it out for a key that may act as any agent');
        const { apiKey, key } = await store.create({ tenant: values.tenant, agents: agents ?? null });
        if (values.json) {
          io.out(JSON.stringify({ apiKey, ...key }, null, 2));
        } else {
          io.out(`API key for tenant ${key.tenant}${key.agents ? ` (agents: ${key.agents.join(', ')})` : ''}:`);
          io.out('');
          io.out(`  ${apiKey}`);
          io.out('');
          io.out(`key id ${key.keyId}, table ${tableName}. It is shown this once: only its SHA-256 is stored.`);
        }
        return 0;
      }
      case 'list': {
        const keys = await store.list(values.tenant ? { tenant: values.tenant } : {});
        io.out(values.json ? JSON.stringify(keys, null, 2) : formatKeys(keys));
        return 0;
      }
      case 'revoke': {
        const keyId = rest[0];
        if (!keyId) throw new UsageError('keys revoke needs a key id (see keys list)');
        const key = await store.revoke(keyId);
        if (!key) {
          io.err(`no key with id ${keyId} in table ${tableName}`);
          return 1;
        }
        io.out(values.json ? JSON.stringify(key, null, 2) : `revoked ${key.keyId} (tenant ${key.tenant}) at ${key.revokedAt}`);
        return 0;
      }
    }
    return 2;
  } catch (error) {
    if (error instanceof UsageError) {
      io.err(`${error.message}\n\n${USAGE}`);
      return 2;
    }
    io.err(`agentstate: ${error instanceof ApiKeyError || error instanceof TableNotFoundError ? error.message : describe(error)}`);
    return 1;
  } finally {
    client.destroy();
  }
}

/**
 * `tenants erase <tenant>`: the tenant's data, as `DELETE /v1/users/{userId}` erases a user's
 * (functions/store/erasure/tenant-erasure.ts), after a confirmation: `--yes`, or `--confirm`
 * naming the tenant again. Its API keys are revoked first (unless `--keep-keys`), so that no
 * request writes the tenant's data again once the erasure has passed over it (a key the
 * authorizer cached may go on for its cache TTL). Nothing of it is readable once the first
 * step is done, nothing stored once the command answers.
 */
async function eraseTenant(
  tenant: string | undefined,
  values: ReturnType<typeof parseCommandLine>['values'],
  context: { client: DynamoDBClient; io: Io; endpoint: string | undefined; region: string | undefined },
): Promise<number> {
  if (!tenant) throw new UsageError('tenants erase needs the tenant');
  if (!values.yes && values.confirm !== tenant) {
    throw new UsageError(`tenants erase erases everything of tenant ${tenant} for good: pass --yes, or --confirm ${tenant}`);
  }
  const { io } = context;
  const tableName = await resolveTable({ ...values, endpoint: context.endpoint, region: context.region }, io.env);
  const keysRevoked = values['keep-keys'] ? 0 : await revokeKeysOf(new ApiKeyStore(context.client, tableName), tenant);
  const stores = createStores(context.client, tableName);
  const { erasure, unlisted } = await new TenantEraser(stores.table, stores.sessions).eraseTenant(tenant);
  const result = { tenant, ...erasure, unlisted, keysRevoked };
  io.out(
    values.json
      ? JSON.stringify(result, null, 2)
      : `erased tenant ${tenant} in table ${tableName}: ${erasure.sessions} sessions, ${erasure.memoryItems} memory items, ` +
          `${erasure.documents} profiles, ${unlisted} other items (agents, webhooks, dead letters, …). ` +
          (values['keep-keys']
            ? 'Its API keys stay (--keep-keys).'
            : `${keysRevoked} API keys revoked first (a key cached by the authorizer works for up to its cache TTL, 5 min by default: erase again after it to be sure).`),
  );
  return 0;
}

/** Revokes every key of the tenant not revoked yet; how many. */
async function revokeKeysOf(store: ApiKeyStore, tenant: string): Promise<number> {
  const live = (await store.list({ tenant })).filter((key) => key.tenant === tenant && key.revokedAt === null);
  for (const key of live) await store.revoke(key.keyId);
  return live.length;
}

class UsageError extends Error {}
class TableNotFoundError extends Error {}

/** --table, else AGENTSTATE_TABLE, else the local default with an endpoint, else the stack output. */
async function resolveTable(
  options: { table?: string | undefined; stack?: string | undefined; endpoint?: string | undefined; region?: string | undefined },
  env: NodeJS.ProcessEnv,
): Promise<string> {
  const explicit = options.table ?? env.AGENTSTATE_TABLE;
  if (explicit) return explicit;
  if (options.endpoint) return defaultTableName;
  const stackName = options.stack ?? env.AGENTSTATE_STACK_NAME ?? 'AgentState';
  const cloudFormation = new CloudFormationClient(options.region ? { region: options.region } : {});
  try {
    const { Stacks } = await cloudFormation.send(new DescribeStacksCommand({ StackName: stackName }));
    const output = Stacks?.[0]?.Outputs?.find((o) => o.OutputKey === 'TableName')?.OutputValue;
    if (!output) throw new TableNotFoundError(`stack ${stackName} has no TableName output; pass --table NAME`);
    return output;
  } catch (error) {
    if (error instanceof TableNotFoundError) throw error;
    throw new TableNotFoundError(
      `could not read the TableName output of stack ${stackName} (${describe(error)}); pass --table NAME or --stack NAME`,
    );
  } finally {
    cloudFormation.destroy();
  }
}

function formatKeys(keys: readonly ApiKey[]): string {
  if (keys.length === 0) return 'no keys';
  const rows = [
    ['KEY ID', 'TENANT', 'AGENTS', 'CREATED', 'REVOKED'],
    ...keys.map((key) => [key.keyId, key.tenant, key.agents?.join(',') ?? '*', key.createdAt, key.revokedAt ?? '-']),
  ];
  const widths = rows[0]?.map((_, column) => Math.max(...rows.map((row) => (row[column] ?? '').length))) ?? [];
  return rows
    .map((row) =>
      row
        .map((cell, column) => cell.padEnd(widths[column] ?? 0))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

function describe(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}

const defaultIo: Io = {
  out: (line) => process.stdout.write(`${line}\n`),
  err: (line) => process.stderr.write(`${line}\n`),
  env: process.env,
};

// Run when executed (tsx bin/agentstate.ts, or the bin/agentstate.mjs shim), not when imported.
const invokedAs = process.argv[1] ?? '';
if (/agentstate(\.ts|\.mjs)?$/.test(invokedAs)) {
  process.exitCode = await main(process.argv.slice(2));
}
