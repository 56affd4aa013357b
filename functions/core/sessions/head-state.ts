import { jsonEqual } from '../json/json.js';
import { mergePatch } from '../json/merge-patch.js';
import { nextVersion } from '../write/next-version.js';
import { checkedWrite, storedState } from '../write/write-target.js';
import type { HeadState, HeadStateInput } from './append-input.js';

/**
 * The state of the head an append with `state` moves to (API.md section 3): computed on the
 * state it starts with (its parent's, for a new node) as the caller sees it, checked against
 * the state limit, and the version that records it, unless it changes nothing. A module of its
 * own, handed to the service by the groups that take such an append (tree, state), so that the
 * sessions group, which shares the service, bundles no version writing.
 */
export async function headState({
  targets,
  schemas,
  scope,
  tip,
  head,
  change,
  caller,
  at,
  recordedAs,
  meta,
}: HeadStateInput): Promise<HeadState> {
  const target = await targets.atNode(scope, tip, head, schemas, meta);
  const state = checkedWrite(target, caller, (seen) => (change.replace ? change.value : mergePatch(seen, change.value)));
  if (jsonEqual(state, storedState(target)) && (!recordedAs || jsonEqual(recordedAs.agent, target.current?.agent ?? null))) {
    return { target, state, version: undefined };
  }
  const base = { tip, nodeId: head.id, pointer: target.pointer, current: target.current };
  const version = nextVersion(base, { state, at, cause: change.replace ? 'replace' : 'patch', author: caller, ...recordedAs });
  return { target, state, version };
}
