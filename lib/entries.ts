import { routeGroups } from '../functions/http/contract/routes.js';

/** A Lambda function of the stack, and the file it is bundled from (relative to the repository root). */
export interface DeployedEntry {
  readonly name: string;
  readonly file: string;
}

/**
 * Every function the stack deploys, each from an entry of its own: one per route group, the
 * authorizer, the WebSocket API, the two consumers of the table's stream, and the webhook
 * queue's delivery hook. The one list that lib/agent-state.ts bundles from, that `npm run
 * bench` section 4 (bench/bundles.ts) measures, that test/unit/bundle-contents.test.ts checks
 * and that knip takes as entry points; test/infra/agent-state.test.ts holds it to the
 * synthesized stack.
 */
export const deployedEntries: readonly DeployedEntry[] = [
  ...routeGroups.map((group) => ({ name: group, file: `functions/http/handlers/${group}.ts` })),
  { name: 'authorizer', file: 'functions/http/edge/authorizer.ts' },
  { name: 'websocket', file: 'functions/ws/handler.ts' },
  { name: 'change-hook', file: 'functions/streams/change-hook.ts' },
  { name: 'webhook-hook', file: 'functions/streams/webhook-hook.ts' },
  { name: 'delivery-hook', file: 'functions/streams/delivery-hook.ts' },
];

/** The entry file of the function `name` (a route group, or one of the others above). */
export function entryOf(name: string): string {
  const entry = deployedEntries.find((candidate) => candidate.name === name);
  if (!entry) throw new Error(`agentstate: no deployed function named ${name} (lib/entries.ts)`);
  return entry.file;
}
