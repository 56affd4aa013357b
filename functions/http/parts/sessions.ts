import { SessionService } from '../../core/sessions/session-service.js';
import type { Part } from '../wiring.js';
import { sessionStore } from './session-store.js';
import { schemas } from './session-tree.js';

// The service over the session's log with the state's writes and versions (the state group).

export const sessions: Part<SessionService> = (wiring) => new SessionService(wiring.use(sessionStore), { schemas: wiring.use(schemas) });
