import { DynamoDbDocumentReader, DynamoDbDocumentStore } from '../../store/documents/document-store.js';
import type { Part } from '../wiring.js';

// The run, profile and shared documents: commits write them.
export const documentStore: Part<DynamoDbDocumentStore> = (wiring) => new DynamoDbDocumentStore(wiring.table);

// Their reads alone: decide shows its worker the profile and the shared document.
export const documentReader: Part<DynamoDbDocumentReader> = (wiring) => new DynamoDbDocumentReader(wiring.table);
