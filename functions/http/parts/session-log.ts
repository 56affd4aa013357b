import { sessionDefaultsFrom } from '../../core/model/lifetime.js';
import { DynamoDbSessionLog } from '../../store/log/session-log.js';
import type { Part } from '../wiring.js';

// The session log without the session groups' reads (functions/store/log/session-log.ts): what a
// decision reads and commits, and all that decide's bundle carries of the session store.

export const sessionLog: Part<DynamoDbSessionLog> = (wiring) =>
  new DynamoDbSessionLog(wiring.table, undefined, sessionDefaultsFrom(wiring.env));
