import { jsonValue } from '../edge/request.js';
import { appendBody, copyBody, headBody } from '../handlers/tree.js';
import type { Operation } from './operation-types.js';
import { cursor, flag, last, limit, node } from './query-parameters.js';
import type { RouteKey } from './routes.js';

/**
 * The message tree's routes in the operations table (operations.ts, which spreads them in): a
 * module of their own, so that the table stays within a file's 500 lines as routes are added.
 */
export const treeOperations = {
  'POST /v1/sessions/{sid}/messages': {
    tag: 'tree',
    summary: 'Append messages as a chain (creates the session)',
    body: {
      schema: appendBody,
      example: {
        messages: [
          { id: 'u1', role: 'user', content: 'Plan a trip' },
          { id: 'a1', role: 'assistant', content: 'Where to?' },
        ],
      },
    },
    responses: {
      201: {
        description:
          "Appended; the head is the last message. With `state` (a merge patch) or `replaceState`, the new head's state is written in the same change, `If-Match` naming the version of the parent's state.",
        schema: 'AppendResult',
      },
    },
    // field_forbidden: a key limited to agents moving the head off a field it may not write (API.md section 7).
    problems: [
      'invalid_request',
      'node_not_found',
      'node_exists',
      'payload_too_large',
      'state_too_large',
      'version_mismatch',
      'conflict',
      'field_forbidden',
    ],
  },
  'POST /v1/sessions/{sid}/copy': {
    tag: 'tree',
    summary: 'Copy a session: the path root → node, or the whole tree',
    description:
      "A new session of the source's agent and user whose every node reads the state it reads in the source, with versions numbered from 1, one for each state its nodes read. Default: the path to the head, which is also the copy's head; `node` names another path's end; `\"tree\": true` copies every node (the copy's head is the source's). `metadata` replaces the source's. Independent of the source afterwards. A key limited to agents copies only sessions it may work in. One copy writes at most 6,000 nodes in at most 150 appends (a run of at most 50 messages of each branch, one more where a node reads a state of its own), 8 MiB of messages and 12 MiB of state pieces (of its large states, those not shared with the state before them): past any, `413 payload_too_large` (`limit` and `limitCount`, or `limitBytes`, with `limit: \"stateBytes\"` for the states), nothing written.",
    body: { schema: copyBody, optional: true, example: { sessionId: 's1-copy', node: 'a1' } },
    responses: { 201: { description: 'The copy.', schema: 'Session', headers: ['Location'] } },
    problems: ['invalid_request', 'session_not_found', 'node_not_found', 'session_exists', 'forbidden', 'conflict'],
  },
  'GET /v1/sessions/{sid}/messages': {
    tag: 'tree',
    summary: 'The message path root → node',
    query: [node, last],
    responses: { 200: { description: 'The path, oldest first.', schema: 'MessagePath' } },
    problems: ['session_not_found', 'node_not_found', 'invalid_request'],
  },
  'GET /v1/sessions/{sid}/nodes': {
    tag: 'tree',
    summary: 'Message nodes by id, a page at a time, from the last',
    description:
      "The session's message nodes (not `root`, which holds no message) in the order of their ids, from the last one back: a page reads about what it carries, however many nodes the session has, where `GET …/tree` reads every node. Generated ids (UUIDv7) sort by time, so with them this is newest first. `before` starts the first page below an id (which need not exist); `next` goes on. Each page reads the session again: a node appended between two pages may or may not appear, and `head` and `version` are the session's as its page was read.",
    query: [
      limit,
      { name: 'before', description: 'Only nodes whose ids sort before this id (not with `cursor`).', schema: { type: 'string' } },
      cursor,
    ],
    responses: { 200: { description: 'One page.', schema: 'NodePage' } },
    problems: ['invalid_request', 'session_not_found'],
  },
  'GET /v1/sessions/{sid}/nodes/{nid}': {
    tag: 'tree',
    summary: 'Read a node',
    responses: { 200: { description: 'The node.', schema: 'MessageNode' } },
    problems: ['session_not_found', 'node_not_found'],
  },
  'PUT /v1/sessions/{sid}/nodes/{nid}/notes/{key}': {
    tag: 'tree',
    summary: 'Put a note beside a node (outside the state and its history)',
    description:
      "A JSON value kept beside the node under `key`, replacing the note of that key: one blind write outside the session's log, so notes written at once never wait for each other nor for the session's writes. It records no version, no event and no activity (the idle expiry counts from the session's last write). Read with `GET …/state?node=&notes=1` or `GET …/tree?notes=1`; erased with the session. A key limited to agents writes notes only in its conversations.",
    body: { schema: jsonValue, example: { task: 't1', channel: 'answer', value: 42 } },
    responses: { 200: { description: 'The note was put.', schema: 'NoteResult' } },
    problems: ['invalid_request', 'invalid_json', 'session_not_found', 'node_not_found', 'payload_too_large', 'forbidden'],
  },
  'GET /v1/sessions/{sid}/notes': {
    tag: 'tree',
    summary: 'Notes, in parts: what goes on from a read whose notes did not fit one answer',
    description:
      "The notes of the nodes `nodes` names (up to 200 ids, a,b), or of every node, by node id then key, in that order: as many as one answer carries (at least one), with `next` while more are left. A read that carries notes (`GET …/state?notes=1`, `GET …/tree?notes=1`, `GET …/versions?notesOf=`) carries those that fit beside what else it answers and, when more are left, `notesNext`: pass it as `cursor` here with the same nodes (the node read, none for the tree, `notesOf`'s).",
    query: [
      { name: 'nodes', description: 'Up to 200 node ids (a,b); default: every node.', schema: { type: 'string' } },
      { ...cursor, description: 'A `notesNext`, or the `next` of the previous page, unchanged.' },
    ],
    responses: { 200: { description: 'One part.', schema: 'NotePage' } },
    problems: ['invalid_request', 'session_not_found'],
  },
  'GET /v1/sessions/{sid}/tree': {
    tag: 'tree',
    summary: 'The whole message tree',
    query: [
      flag('preview', '`1` or `true` adds a snippet of each message.'),
      flag('notes', "`1` or `true` adds every node's notes (`notes`, by node id)."),
      cursor,
    ],
    responses: { 200: { description: 'The tree, head marked.', schema: 'Tree' } },
    problems: ['invalid_request', 'session_not_found'],
  },
  'PUT /v1/sessions/{sid}/head': {
    tag: 'tree',
    summary: 'Switch the head (branch)',
    body: { schema: headBody, example: { nodeId: 'a1' } },
    responses: { 200: { description: 'The new head.', schema: 'HeadResult' } },
    problems: ['invalid_request', 'session_not_found', 'node_not_found', 'conflict', 'field_forbidden'],
  },
} satisfies Partial<Record<RouteKey, Operation>>;
