import { DynamoDbDocumentStore } from '../../store/document-store.js';
import type { Part } from '../wiring.js';

// The run, profile and shared documents: commits, and decide (which shows its worker the
// profile and the shared document).

export const documentStore: Part<DynamoDbDocumentStore> = (wiring) => new DynamoDbDocumentStore(wiring.table);
