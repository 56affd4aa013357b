import { MemoryService } from '../../core/memory/memory-service.js';
import { DynamoDbMemoryStore } from '../../store/memory/memory-store.js';
import type { Part } from '../wiring.js';

export const memory: Part<MemoryService> = (wiring) => new MemoryService(new DynamoDbMemoryStore(wiring.table));
