/**
 * `agentstate/client`: a typed TypeScript client for the agentstate HTTP API. See
 * docs/client.md.
 */
export { AgentStateApi, type PutAgentResult, type WriteOptions } from './api.js';
export { defaultRetry, type RetryOptions } from './backoff.js';
export {
  AgentStateClient,
  SessionHandle,
  createClient,
  type ClientOptions,
  type OnStateChangedOptions,
  type SessionOptions,
  type StatePatch,
  type StateSnapshot,
} from './client.js';
export { PAYLOAD, TAG, decode, encode, encodePatch, mergeValues } from './codec.js';
export {
  AgentStateError,
  CodecError,
  SchemaMismatchError,
  type AgentStateErrorCode,
  type SchemaIssue,
  type ValuePath,
} from './errors.js';
export { DEFAULT_TIMEOUT_MS, type CallOptions, type HttpRequest, type HttpResponse } from './http.js';
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
export { LiveSync, type LiveStatus, type StateListener, type Subscription, type WebSocketConstructor, type WebSocketLike } from './live.js';
export type { StandardSchemaV1 } from './standard-schema.js';
export * from './types.js';
export {
  SIGNATURE_HEADER,
  createWorker,
  toLambdaHandler,
  toNodeHandler,
  type AgentStateWorker,
  type Decide,
  type LambdaHttpEvent,
  type LambdaHttpResult,
  type NodeRequestLike,
  type NodeResponseLike,
  type WorkerOptions,
  type WorkerReply,
} from './worker.js';
