import { DynamoDbWriteQueue } from '../../store/log/write-queue.js';
import type { Part } from '../wiring.js';

// Where blind writes of a crowded session or document, and registrations that lost to another,
// wait their turn (store/log/write-queue.ts). A module of its own: the agents group needs it
// without the session store.
export const writeQueue: Part<DynamoDbWriteQueue> = (wiring) => new DynamoDbWriteQueue(wiring.table);
