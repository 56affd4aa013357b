import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import type { SessionScope } from '../../core/model/model.js';
import type { ClaimId, KeptAnswer, StoredResponse } from '../../core/model/ports.js';
import * as keys from '../table/keys.js';
import type { Item, TableClient } from '../table/table-client.js';
import { packTextWith, unpackText, unpackTextWith } from './packed-text.js';

/**
 * An `Idempotency-Key`'s answer kept in the change of the log its request made (issue 33):
 *
 *   S#<tenant>#<session>   V#<life>#<base>#<seq>   …the change…, ik (the claim's id), ia (the answer)
 *
 * The key's claim (I#<tenant>#<key>, idempotency-store.ts) is then the key's only write of its
 * own: the answer is written by the change's conditional put, so it exists exactly when the
 * write does, and a retry that finds the claim still pending looks for it here. A change is
 * found by the claim's id, which a key claimed again (after its 24 hours) does not share, among
 * the changes made since the claim: newest first, so a retry soon after reads a page of a few
 * items. The answer lives as long as the change: a retry after the session was deleted or the
 * change pruned finds nothing, and is refused like a request that never finished.
 */

/** The attributes a change keeps its request's answer in (retention strips both with the version's content). */
const CLAIM = 'ik';
const ANSWER = 'ia';
export const KEPT_ANSWER_ATTRIBUTES = [CLAIM, ANSWER] as const;

/** Changes read in the first page, and in each after it (at most MAX_PAGES: 24 hours of a busy session's log is read no further). */
const FIRST_PAGE = 16;
const PAGE = 500;
const MAX_PAGES = 20;

/** How far before its claim a change may say it was made (the claim's and the writer's clocks may differ slightly). */
const CLOCK_SKEW_MS = 60_000;

/**
 * What an answer mostly repeats: the words of every answer, and the change's own attributes
 * (its session, node, state, messages, decision), so that an answer is written as little more
 * than what it does not share with its change (a PATCH's 200 bytes as some 35, a decision's 370
 * as some 90). Only attributes that stay as long as the answer does: retention strips the
 * answer with the version's content, a delete makes the whole item a tombstone.
 */
const ANSWER_WORDS =
  '200\n{"content-type":"application/json","etag":"\\""}\n{"sessionId":"","node":"","version":,"prevVersion":,"state":{},"changed":true,"changed":false,' +
  '"nodes":[{"id":"","parentId":"root","depth":,"role":"user","role":"assistant","stateVersion":,"createdAt":"","head":"","decisionId":"","decision":{"state":{"messages":[{"role":"assistant","content":"","agent":{';
const DICTIONARY_ATTRIBUTES = ['nodes', 'decision', 'agent', 'state', 'chain', 'decisionId', 'node', 'pk', 'createdAt'] as const;

function answerDictionary(item: Item): string {
  const parts = DICTIONARY_ATTRIBUTES.map((name) => {
    const value = item[name];
    // Packed texts as their text; a state in pieces or compressed adds nothing.
    return name === 'nodes' || name === 'decision' ? (unpackText(value) ?? '') : typeof value === 'string' ? value : '';
  });
  // The most specific last: deflate reaches what is nearest most cheaply, and keeps the last 32 KiB.
  return `${ANSWER_WORDS}${parts.join('\n')}`;
}

/**
 * The attributes of a change (`own`: its other attributes) that keeps `kept`; none without one.
 * The answer as text: its status, its headers (JSON) and its body, a line each (the body as is,
 * not escaped in JSON), deflated with what the change holds (`answerDictionary`) when smaller.
 */
export function keptAttributes(kept: KeptAnswer | undefined, own: Item): Item {
  if (!kept) return {};
  const { statusCode, headers, body } = kept.response;
  return { [CLAIM]: kept.claimId, [ANSWER]: packTextWith(`${statusCode}\n${JSON.stringify(headers)}\n${body}`, answerDictionary(own)) };
}

function answerOf(text: string): StoredResponse {
  const statusEnd = text.indexOf('\n');
  const headersEnd = text.indexOf('\n', statusEnd + 1);
  return {
    statusCode: Number(text.slice(0, statusEnd)),
    headers: JSON.parse(text.slice(statusEnd + 1, headersEnd)) as Record<string, string>,
    body: text.slice(headersEnd + 1),
  };
}

/** The answer a change of the session kept under `claim`, read newest first back to the claim's time; null when none did. */
export async function findKeptAnswer(table: TableClient, scope: SessionScope, claim: ClaimId): Promise<StoredResponse | null> {
  const since = new Date(claim.since - CLOCK_SKEW_MS).toISOString();
  let start: Record<string, unknown> | undefined;
  for (let page = 0; page === 0 || (start && page < MAX_PAGES); page++) {
    const found = await table.send(
      new QueryCommand({
        TableName: table.tableName,
        KeyConditionExpression: 'pk = :pk AND begins_with(sk, :prefix)',
        ExpressionAttributeValues: { ':pk': keys.session(scope), ':prefix': keys.logPrefix },
        ProjectionExpression: ['#claim', '#answer', ...DICTIONARY_ATTRIBUTES.map((_, index) => `#d${index}`)].join(', '),
        ExpressionAttributeNames: {
          '#claim': CLAIM,
          '#answer': ANSWER,
          ...Object.fromEntries(DICTIONARY_ATTRIBUTES.map((name, index) => [`#d${index}`, name])),
        },
        ScanIndexForward: false,
        ConsistentRead: true,
        // A retry soon after its first request finds the change among the newest few.
        Limit: page === 0 ? FIRST_PAGE : PAGE,
        ...(start ? { ExclusiveStartKey: start } : {}),
      }),
    );
    for (const item of found.Items ?? []) {
      if (item[CLAIM] === claim.id) {
        const text = unpackTextWith(item[ANSWER], answerDictionary(item));
        return text === null ? null : answerOf(text);
      }
      // Older than the claim: the change made under it would have come later.
      if (typeof item.createdAt === 'string' && item.createdAt < since) return null;
    }
    start = found.LastEvaluatedKey;
  }
  return null;
}
