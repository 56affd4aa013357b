import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { routeGroups } from '../../functions/http/contract/routes.js';
import { defaultTableName } from '../../functions/store/table/table.js';
import { forward, readBody } from '../deployed/support/aws-stand-in.js';
import { Deployment } from '../deployed/support/deployment.js';
import { Iam } from '../deployed/support/iam.js';
import { type GatedCall, type GateRoles, judgeCall } from './iam-judge.js';
import { synthesizedTemplate } from './synth.js';

export interface IamGate {
  /** Where the server's DynamoDB calls go (`AGENTSTATE_TEST_IAM_GATE`). */
  url: string;
  /** The roles the gate judges by, for the server's preload to judge by the same (`AGENTSTATE_TEST_IAM_ROLES`). */
  roles: GateRoles;
  /** The calls refused: each one a call the function's role in the synthesized template does not allow. */
  refused(): GatedCall[];
  /**
   * How many items DynamoDB read for the server's calls so far: what each `Query` and `Scan`
   * examined (`ScannedCount`, filtered or not), the items a `GetItem` or `BatchGetItem` found.
   */
  itemsRead(): number;
  /**
   * Delays every later call that `matches` picks by `ms` before it goes on to DynamoDB (less
   * than the SDK's request timeout, client.ts `AWS_CALL_TIMEOUTS`): a request of the server
   * made slow, deterministically, for an interleaving that DynamoDB Local is too quick to
   * produce. Nothing is changed, only delayed. The returned function stops it.
   */
  slow(matches: (call: { fn: string; operation: string; body: string }) => boolean, ms: number): () => void;
  close(): Promise<void>;
}

/** Which function of the template each name of functions/local/running-function.ts stands for. */
const FUNCTIONS: Record<string, RegExp> = {
  ...Object.fromEntries(routeGroups.map((group) => [group, new RegExp(`the ${group} routes$`)])),
  'change-hook': /change hook/,
  'webhook-hook': /webhook hook/,
  'delivery-hook': /delivery hook/,
  websocket: /the WebSocket API/,
};

/**
 * The synthesized stack's IAM, between a local server (`npm start`) and its DynamoDB Local.
 * The server runs every function of the stack in one process and says which one makes each
 * call (functions/local/running-function.ts). The gate asks IAM, with that function's own role
 * as the synthesized template grants it (test/deployed/support/iam.ts), exactly what AWS would
 * ask for that call (iam-judge.ts), and answers a refusal as AWS does (`AccessDeniedException`,
 * so the request fails as it would deployed); an allowed call goes on to DynamoDB Local. Every
 * end-to-end file started by `startApi` runs through one, so every path the suite drives —
 * large states, finished deletes, dead letters — is held to the roles, and `stop()` fails the
 * file over any refusal.
 *
 * The server's preload (iam-gate-preload.ts) makes the same judgement with the same `roles` in
 * the server's process, and sends a call it finds allowed straight on to DynamoDB Local; every
 * other call comes here with the function that made it, and is refused here and counted. That
 * spares each allowed call a round trip through the test's process, which also runs the test's
 * clients (an API request makes several DynamoDB calls). A server started with
 * `AGENTSTATE_TEST_IAM_ROLES` unset sends every call here, for `itemsRead` and `slow`, which
 * see only the calls that come here.
 */
export async function startIamGate(tableName = defaultTableName): Promise<IamGate> {
  const template = await synthesizedTemplate();
  const deployment = new Deployment(template, tableName);
  const iam = new Iam(deployment);
  const roles: GateRoles = {
    region: deployment.region,
    account: deployment.account,
    grants: Object.fromEntries(
      Object.entries(FUNCTIONS).map(([name, description]) => [name, iam.grantsOf(deployment.functionNamed(description).logicalId)]),
    ),
  };
  const refused: GatedCall[] = [];
  let itemsRead = 0;
  const slowed = new Set<{ matches: Parameters<IamGate['slow']>[0]; ms: number }>();

  const serve = async (req: IncomingMessage, res: ServerResponse) => {
    const body = await readBody(req);
    const fn = String(req.headers['x-agentstate-function'] ?? '');
    const upstream = String(req.headers['x-agentstate-upstream'] ?? '');
    const operation = String(req.headers['x-amz-target'] ?? '').split('.')[1] ?? '';
    const judged = judgeCall(roles, fn, operation, JSON.parse(body.toString('utf8') || '{}') as Record<string, any>);
    const refusal = judged.find((call) => !call.allowed);
    if (refusal) {
      refused.push(...judged.filter((call) => !call.allowed));
      res.writeHead(400, { 'content-type': 'application/x-amz-json-1.0' });
      res.end(
        JSON.stringify({
          __type: 'com.amazon.coral.service#AccessDeniedException',
          Message: `${refusal.fn} is not authorized to perform: ${refusal.action} on resource: ${refusal.resource} (the IAM gate of the e2e tests)`,
        }),
      );
      return;
    }
    delete req.headers['x-agentstate-function'];
    delete req.headers['x-agentstate-upstream'];
    for (const slow of slowed) {
      if (slow.matches({ fn, operation, body: body.toString('utf8') })) await new Promise((wake) => setTimeout(wake, slow.ms));
    }
    const answer = await forward(`http://${upstream}`, req, body);
    if (answer.status === 200) itemsRead += itemsIn(operation, answer.body);
    res.writeHead(answer.status, answer.headers);
    res.end(answer.body);
  };

  const server = createServer((req, res) => {
    serve(req, res).catch((error: unknown) => {
      res.writeHead(500, { 'content-type': 'text/plain' });
      res.end(String(error));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    roles,
    refused: () => [...refused],
    itemsRead: () => itemsRead,
    slow: (matches, ms) => {
      const slow = { matches, ms };
      slowed.add(slow);
      return () => slowed.delete(slow);
    },
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** The items one answer of DynamoDB says were read (see `IamGate.itemsRead`). */
function itemsIn(operation: string, body: Buffer): number {
  if (operation === 'Query' || operation === 'Scan') {
    // The answer's own member (an item's attribute of that name would be `{"N": …}`, not a number).
    const counts = [...body.toString('utf8').matchAll(/"ScannedCount":(\d+)/g)];
    return Number(counts.at(-1)?.[1] ?? 0);
  }
  if (operation === 'GetItem') return body.includes('"Item":') ? 1 : 0;
  if (operation === 'BatchGetItem') {
    const { Responses } = JSON.parse(body.toString('utf8')) as { Responses?: Record<string, unknown[]> };
    return Object.values(Responses ?? {}).reduce((sum, items) => sum + items.length, 0);
  }
  return 0;
}
