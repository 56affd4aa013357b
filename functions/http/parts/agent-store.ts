import { DynamoDbAgentStore } from '../../store/agent-store.js';
import type { Part } from '../wiring.js';

// The agent registry's store: the agents and decide groups, and every write that checks typed fields.

export const agentStore: Part<DynamoDbAgentStore> = (wiring) => new DynamoDbAgentStore(wiring.table);
