import { DynamoDbAgentReader, DynamoDbAgentStore } from '../../store/agent-store.js';
import type { Part } from '../wiring.js';

// The agent registry's store: the agents group writes it.
export const agentStore: Part<DynamoDbAgentStore> = (wiring) => new DynamoDbAgentStore(wiring.table);

// Its reads alone: decide, and every write that checks typed fields (no registration in those
// bundles).
export const agentRegistryReader: Part<DynamoDbAgentReader> = (wiring) => new DynamoDbAgentReader(wiring.table);
