/**
 * packages/client/src/types.ts restates the server's wire types by hand, so that the published client needs
 * nothing from the server's code. This file ties each of them to the type the server's code
 * actually returns (a view type, or the service method's result the route answers with) or
 * accepts (the zod schema each route checks its body with), so the two cannot drift apart: `npm test` type-checks it
 * (`tsc --noEmit`), and a field added, removed or renamed on one side only, or given another
 * type, fails the build here with the field's path in the message. The last section does the same
 * through the OpenAPI document's schemas: server → document → client.
 *
 * Each pair is checked three ways:
 *   - the same field names at every depth (`NameDrift` is never), optional fields included,
 *     which assignability alone would miss (an object open to any name, such as a message's
 *     members, is not held to the other side's names);
 *   - what the sending side produces is a value of the receiving side's type: a response the
 *     server sends fits the client's type, a body the client sends is one the route's schema
 *     accepts (its `z.input`);
 *   - and the other way round, wherever the two are meant to be the same type.
 * Where the client is deliberately more precise than the server (a message's `role`, a worker's
 * `state` typed by the caller), the pair says so and checks what remains.
 */

import type * as Client from '@agentstate/client';
import type * as z from 'zod';
import type { AgentView } from '../../functions/core/agents/agent-service.js';
import type { Command, CommandScope, MergePolicy } from '../../functions/core/commits/commands.js';
import type { CommitResult, DocumentView } from '../../functions/core/commits/commit-service.js';
import type { DecideResult } from '../../functions/core/decide/decide-service.js';
import type { DecisionRequest } from '../../functions/core/decide/decision-hops.js';
import type { ErasureRecord } from '../../functions/core/erasure/erasure.js';
import type { DocumentChangedEvent, SessionExpiredEvent, StateChangedEvent, UserErasedEvent } from '../../functions/core/events/events.js';
import type { MemoryChangedEvent } from '../../functions/core/events/memory-changed.js';
import type { JsonNumber } from '../../functions/core/json/json.js';
import type { ErrorCode, Problem } from '../../functions/core/kernel/errors.js';
import type { MemoryItem } from '../../functions/core/memory/memory.js';
import type { MemoryService } from '../../functions/core/memory/memory-service.js';
import type { FieldDeclaration, FieldScope, FieldType } from '../../functions/core/model/fields.js';
import type { VersionCause } from '../../functions/core/model/model.js';
import type {
  NodeView,
  SessionService,
  SessionView,
  StateView,
  TreeNodeView,
  VersionView,
  WriteResult,
} from '../../functions/core/sessions/session-service.js';
import type { DeadLetterView, WebhookView } from '../../functions/core/webhooks/records.js';
import type { ReplayResult } from '../../functions/core/webhooks/registry.js';
import type { ComponentName, components } from '../../functions/http/contract/schemas.js';
import type { agentBody } from '../../functions/http/handlers/agents.js';
import type { commitBody } from '../../functions/http/handlers/commits.js';
import type { decideBody } from '../../functions/http/handlers/decide.js';
import type { putMemoryBody, searchMemoryBody } from '../../functions/http/handlers/memory.js';
import type { createSessionBody } from '../../functions/http/handlers/sessions.js';
import type { appendBody } from '../../functions/http/handlers/tree.js';
import type { createWebhookBody } from '../../functions/http/handlers/webhooks.js';

// ---- the checks ------------------------------------------------------------------------------

/** Strict equality of two types. */
type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
/** A value of `From` may be used as a `To`. */
type Assignable<From, To> = [From] extends [To] ? true : false;
/** Compiles only for `true`. */
type Assert<T extends true> = T;
/** Compiles only for `never`; otherwise the message names what differs. */
type NoDrift<T extends never> = T;

type Primitive = string | number | boolean | bigint | symbol | null | undefined;
type Objects<T> = Exclude<T, Primitive | readonly unknown[]>;
type Elements<T> = Extract<T, readonly unknown[]>[number];
/** The named keys of an object type: its index signature (`[key: string]: Json`) aside. */
type NamedKeys<T> = keyof { [K in keyof T as string extends K ? never : number extends K ? never : K]: never } & string;
type Path<P extends string, K> = K extends string ? (P extends '' ? K : `${P}.${K}`) : never;
type Under<T, K> = K extends keyof T ? T[K] : never;

/** Names only `A` has, unless `B` takes any name (an index signature: `{ role: string; [member: string]: Json }`). */
type OnlyIn<A, B> = string extends keyof B ? never : Exclude<NamedKeys<A>, NamedKeys<B>>;

/**
 * Every field name that only one side has, at any depth (in objects, in arrays, in unions of
 * objects), as `path: only on the server` or `path: only in the client`; never when none. A
 * name one side has is not missing from an object the other side leaves open to any name.
 */
type NameDrift<S, C, P extends string = ''> =
  Equal<S, C> extends true
    ? never
    :
        | `${Path<P, OnlyIn<Objects<S>, Objects<C>>>}: only on the server`
        | `${Path<P, OnlyIn<Objects<C>, Objects<S>>>}: only in the client`
        | {
            [K in NamedKeys<Objects<S>> & NamedKeys<Objects<C>>]: NameDrift<Under<Objects<S>, K>, Under<Objects<C>, K>, Path<P, K>>;
          }[NamedKeys<Objects<S>> & NamedKeys<Objects<C>>]
        | ([Elements<S>] extends [never] ? never : [Elements<C>] extends [never] ? never : NameDrift<Elements<S>, Elements<C>, `${P}[]`>);

/**
 * A server type as the client reads it off the wire: a `JsonNumber` (a number kept as the text
 * it was sent as) is a JSON number in the body, which the client's `JSON.parse` reads as a number.
 */
type Wire<T> = T extends JsonNumber
  ? number
  : T extends readonly (infer Item)[]
    ? Wire<Item>[]
    : T extends (...args: never[]) => unknown
      ? T
      : T extends object
        ? { [K in keyof T]: Wire<T[K]> }
        : T;

/** Why a value of `From` is not a `To`, or never. */
type Fits<From, To, Why extends string> = Assignable<From, To> extends true ? never : Why;
/** The same type on both sides: the same names, and each assignable to the other. */
type Same<S, C> =
  | NameDrift<Wire<S>, C>
  | Fits<Wire<S>, C, "the server's type is not a value of the client's">
  | Fits<C, S, "the client's type is not a value of the server's">;
/** A response (server to client): the same names, and what the server sends is a value of the client's type. */
type Sent<S, C> = NameDrift<Wire<S>, C> | Fits<Wire<S>, C, "the server's type is not a value of the client's">;
/** A request (client to server): the same names, and what the client sends is accepted by the server's input type. */
type Accepted<C, S> = NameDrift<Wire<S>, C> | Fits<C, S, "the client's type is not accepted by the server's">;

type Returned<F> = F extends (...args: never[]) => Promise<infer R> ? R : never;

// ---- the pairs --------------------------------------------------------------------------------

// Words of the API: both sides name exactly the same values.
export type Words = [
  Assert<Equal<Client.VersionCause, VersionCause>>,
  Assert<Equal<Client.CommandScope, CommandScope>>,
  Assert<Equal<Client.MergePolicy, MergePolicy>>,
  Assert<Equal<Client.FieldScope, FieldScope>>,
  Assert<Equal<Client.FieldDeclaration['type'], FieldType>>,
  Assert<Equal<Client.ErrorCode, ErrorCode>>,
];

/** What a route accepts as its body: the input of the zod schema it parses the body with. */
type Body<Schema extends z.core.$ZodType> = z.input<Schema>;

// Sessions, the message tree, state and versions.
export type Sessions = [
  NoDrift<Accepted<Client.CreateSessionRequest, Body<typeof createSessionBody>>>,
  NoDrift<Same<SessionView, Client.Session>>,
  NoDrift<Sent<Returned<SessionService['listSessions']>['items'][number], Client.SessionSummary>>,
  NoDrift<Accepted<Client.AppendMessagesRequest, Body<typeof appendBody>>>,
  NoDrift<Sent<NodeView, Client.MessageNode>>,
  NoDrift<Sent<Returned<SessionService['appendMessages']>, Client.AppendMessagesResult>>,
  NoDrift<Sent<TreeNodeView, Client.TreeNode>>,
  NoDrift<Sent<Returned<SessionService['getTree']>, Client.Tree>>,
  NoDrift<Sent<Returned<SessionService['switchHead']>, Client.HeadResult>>,
  // The client types a path's messages (`role`, `id`, `parentId`); the server passes stored JSON objects.
  NoDrift<Sent<Omit<Returned<SessionService['getPath']>, 'messages'>, Omit<Client.MessagePath, 'messages'>>>,
  NoDrift<Same<StateView, Client.StateView>>,
  NoDrift<Same<WriteResult, Client.WriteResult>>,
  NoDrift<Same<VersionView, Client.Version>>,
  NoDrift<Sent<Returned<SessionService['listVersions']>['items'][number], Client.Version>>,
  NoDrift<Same<Returned<SessionService['listDecisions']>['items'][number], Client.DecisionSummary>>,
];

// Agents: the request body and the agent as answered (declarations with `read` and `write` filled in).
export type Agents = [
  NoDrift<Accepted<Client.PutAgentRequest, Body<typeof agentBody>>>,
  NoDrift<Sent<AgentView, Client.Agent>>,
  NoDrift<Sent<FieldDeclaration, Client.FieldDeclaration>>,
];

// Decide: the request, the result, and what a worker receives.
export type Decide = [
  NoDrift<Accepted<Client.DecideRequest, Body<typeof decideBody>>>,
  NoDrift<Same<DecideResult, Client.DecideResult>>,
  // A worker's request: the client types `trigger` and `messages` for worker authors.
  NoDrift<Sent<Omit<DecisionRequest, 'trigger' | 'messages'>, Omit<Client.DecisionRequest, 'trigger' | 'messages'>>>,
];

// Commits: the body and the results.
export type Commits = [
  NoDrift<Same<Command, Client.Command>>,
  NoDrift<Accepted<Client.CommitRequest, Body<typeof commitBody>>>,
  NoDrift<Same<DocumentView, Client.DocumentView>>,
  NoDrift<Same<CommitResult, Client.CommitResult>>,
];

// Change events and webhooks.
export type Events = [
  NoDrift<Sent<StateChangedEvent, Client.StateChangedEvent>>,
  NoDrift<Sent<DocumentChangedEvent, Client.DocumentChangedEvent>>,
  NoDrift<Accepted<Client.CreateWebhookRequest, Body<typeof createWebhookBody>>>,
  NoDrift<Sent<WebhookView, Client.Webhook>>,
  NoDrift<Sent<DeadLetterView, Client.DeadLetter>>,
  NoDrift<Same<ReplayResult, Client.ReplayResult>>,
];

// Memory items: the bodies, the item, the pages, the event.
export type Memory = [
  NoDrift<Same<MemoryItem, Client.MemoryItem>>,
  NoDrift<Accepted<Client.PutMemoryRequest, Body<typeof putMemoryBody>>>,
  NoDrift<Accepted<Client.MemorySearchRequest, Body<typeof searchMemoryBody>>>,
  NoDrift<Sent<Returned<MemoryService['search']>['items'][number], Client.MemoryItem>>,
  NoDrift<Sent<Returned<MemoryService['history']>['items'][number], Client.MemoryItem>>,
  NoDrift<Sent<{ namespaces: Returned<MemoryService['listNamespaces']>['items']; next?: string }, Client.NamespaceList>>,
  NoDrift<Sent<MemoryChangedEvent, Client.MemoryChangedEvent>>,
  NoDrift<Sent<SessionExpiredEvent, Client.SessionExpiredEvent>>,
  NoDrift<Sent<UserErasedEvent, Client.UserErasedEvent>>,
  NoDrift<Sent<ErasureRecord, Client.Erasure>>,
];

// Errors: a problem document (the client also keeps codes it does not know yet).
export type Errors = [NoDrift<Sent<Problem, Client.Problem>>];

// ---- the OpenAPI document ---------------------------------------------------------------------
//
// docs/openapi.json is generated from the schemas of functions/http/contract/schemas.ts, and the
// e2e tests hold every real answer to it. These pairs close the loop at compile time: what the
// server's code answers is a value of the document's schema, and a value of the document's
// schema is a value of the client's type, with the same field names at every depth.

/** What the document says a route answers: the output of its component schema. */
type Documented<Name extends ComponentName> = z.output<(typeof components)[Name]>;
/** Server → document: both sides are the server's own types (its `Json`, numbers kept verbatim included). */
type Documents<Server, Doc> = NameDrift<Server, Doc> | Fits<Server, Doc, "the server's type is not a value of the document's schema">;
/** Server → document → client, each step checked as a response. */
type ThroughTheDocument<Server, Name extends ComponentName, ClientType> =
  | Documents<Server, Documented<Name>>
  | Sent<Documented<Name>, ClientType>;

export type Document = [
  NoDrift<ThroughTheDocument<SessionView, 'Session', Client.Session>>,
  NoDrift<ThroughTheDocument<Returned<SessionService['listSessions']>['items'][number], 'SessionSummary', Client.SessionSummary>>,
  NoDrift<ThroughTheDocument<NodeView, 'MessageNode', Client.MessageNode>>,
  NoDrift<ThroughTheDocument<Returned<SessionService['appendMessages']>, 'AppendResult', Client.AppendMessagesResult>>,
  NoDrift<ThroughTheDocument<TreeNodeView, 'TreeNode', Client.TreeNode>>,
  NoDrift<ThroughTheDocument<Returned<SessionService['getTree']>, 'Tree', Client.Tree>>,
  NoDrift<ThroughTheDocument<Returned<SessionService['switchHead']>, 'HeadResult', Client.HeadResult>>,
  NoDrift<ThroughTheDocument<StateView, 'StateView', Client.StateView>>,
  NoDrift<ThroughTheDocument<WriteResult, 'WriteResult', Client.WriteResult>>,
  NoDrift<ThroughTheDocument<VersionView, 'Version', Client.Version>>,
  NoDrift<ThroughTheDocument<AgentView, 'Agent', Client.Agent>>,
  NoDrift<
    ThroughTheDocument<
      { decisions: Returned<SessionService['listDecisions']>['items']; next?: string },
      'DecisionList',
      Client.DecisionList
    >
  >,
  NoDrift<ThroughTheDocument<DecideResult, 'DecideResult', Client.DecideResult>>,
  NoDrift<ThroughTheDocument<DocumentView, 'DocumentView', Client.DocumentView>>,
  NoDrift<ThroughTheDocument<CommitResult, 'CommitResult', Client.CommitResult>>,
  NoDrift<ThroughTheDocument<StateChangedEvent, 'StateChangedEvent', Client.StateChangedEvent>>,
  NoDrift<ThroughTheDocument<DocumentChangedEvent, 'DocumentChangedEvent', Client.DocumentChangedEvent>>,
  NoDrift<ThroughTheDocument<WebhookView, 'Webhook', Client.Webhook>>,
  NoDrift<ThroughTheDocument<DeadLetterView, 'DeadLetter', Client.DeadLetter>>,
  NoDrift<ThroughTheDocument<ReplayResult, 'ReplayResult', Client.ReplayResult>>,
  NoDrift<ThroughTheDocument<Problem, 'Problem', Client.Problem>>,
  NoDrift<ThroughTheDocument<MemoryItem, 'MemoryItem', Client.MemoryItem>>,
  NoDrift<ThroughTheDocument<MemoryChangedEvent, 'MemoryChangedEvent', Client.MemoryChangedEvent>>,
  NoDrift<ThroughTheDocument<SessionExpiredEvent, 'SessionExpiredEvent', Client.SessionExpiredEvent>>,
  NoDrift<ThroughTheDocument<UserErasedEvent, 'UserErasedEvent', Client.UserErasedEvent>>,
  NoDrift<ThroughTheDocument<ErasureRecord, 'Erasure', Client.Erasure>>,
];
