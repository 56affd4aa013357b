import type { RouteGroup } from './contract/routes.js';
import type { HttpHandler } from './edge/types.js';
import { handler as agents } from './handlers/agents.js';
import { handler as commits } from './handlers/commits.js';
import { handler as decide } from './handlers/decide.js';
import { handler as health } from './handlers/health.js';
import { handler as inspector } from './handlers/inspector.js';
import { handler as memory } from './handlers/memory.js';
import { handler as sessions } from './handlers/sessions.js';
import { handler as state } from './handlers/state.js';
import { handler as tree } from './handlers/tree.js';
import { handler as webhooks } from './handlers/webhooks.js';

/** The Lambda handler of each route group, for the local server and the tests. */
export const handlers: Record<RouteGroup, HttpHandler> = {
  health,
  sessions,
  tree,
  state,
  agents,
  decide,
  commits,
  webhooks,
  memory,
  inspector,
};
