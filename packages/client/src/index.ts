/**
 * `agentstate/client`: a typed TypeScript client for the agentstate HTTP API. See
 * docs/client.md.
 */
export { AgentStateApi, type PutAgentResult, type WriteOptions } from './api.js';
export { defaultRetry, type RetryOptions } from './backoff.js';
export {
  AgentStateClient,
  type ClientOptions,
  createClient,
  type OnStateChangedOptions,
  SessionHandle,
  type SessionOptions,
  type StatePatch,
  type StateSnapshot,
} from './client.js';
export { decode, encode, encodePatch, mergeValues, PAYLOAD, TAG } from './codec.js';
export {
  AgentStateError,
  type AgentStateErrorCode,
  CodecError,
  type SchemaIssue,
  SchemaMismatchError,
  type ValuePath,
} from './errors.js';
export { type CallOptions, DEFAULT_TIMEOUT_MS, type HttpRequest, type HttpResponse } from './http.js';
export {
  BoundFold,
  BoundKey,
  defaultGuardedRetry,
  defineFold,
  defineKey,
  type FoldDef,
  type GuardedOptions,
  type GuardedRetry,
  type Infer,
  type KeyDef,
  type KeyParams,
  type LenientRead,
} from './keys.js';
export { type LiveStatus, LiveSync, type StateListener, type Subscription, type WebSocketConstructor, type WebSocketLike } from './live.js';
export {
  type MemoryFilter,
  type MemoryListOptions,
  MemoryNamespace,
  type MemoryNamespaceOptions,
  type MemoryPutOptions,
  type MemoryRecord,
  MemoryRoutes,
  type MemorySearchOptions,
} from './memory.js';
export {
  type VerifyWebhookOptions,
  verifyWebhook,
  WEBHOOK_TOLERANCE_SECONDS,
  type WebhookVerdict,
} from './signature.js';
export type { StandardSchemaV1 } from './standard-schema.js';
export * from './types.js';
export {
  type AgentStateWorker,
  createWorker,
  type Decide,
  type LambdaHttpEvent,
  type LambdaHttpResult,
  type NodeRequestLike,
  type NodeResponseLike,
  SIGNATURE_HEADER,
  toLambdaHandler,
  toNodeHandler,
  type WorkerOptions,
  type WorkerReply,
} from './worker.js';
