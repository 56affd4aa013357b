import { handler as agents } from './agents.js';
import { handler as commits } from './commits.js';
import { handler as decide } from './decide.js';
import { handler as health } from './health.js';
import { handler as inspector } from './inspector.js';
import { handler as memory } from './memory.js';
import type { RouteGroup } from './routes.js';
import { handler as sessions } from './sessions.js';
import { handler as state } from './state.js';
import { handler as tree } from './tree.js';
import type { HttpHandler } from './types.js';
import { handler as webhooks } from './webhooks.js';

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
