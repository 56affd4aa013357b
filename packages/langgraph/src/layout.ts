import type { Json } from '@agentstate/client';
import {
  type ChannelVersions,
  type Checkpoint,
  type CheckpointMetadata,
  type CheckpointPendingWrite,
  compareWritesSortKeys,
  type PendingWrite,
  type SerializerProtocol,
  WRITES_IDX_MAP,
  writesSortKey,
} from '@langchain/langgraph-checkpoint';

/**
 * How a checkpoint lives in agentstate: the state at its node. One JSON object, readable in the
 * inspector, that holds everything `getTuple` answers, so a read is one request:
 *
 * ```
 * {
 *   "thread_id": "chat-1", "checkpoint_ns": "",
 *   "checkpoint": {"v": 4, "id": "1f0…", "ts": "…", "channel_versions": {…}, "versions_seen": {…}},
 *   "metadata": {"source": "loop", "step": 2, "parents": {}},
 *   "parent": "1f0…" | null,
 *   "channels": {"messages": [...], "count": 3},      // values the serializer wrote as JSON
 *   "blobs": {"image": ["bytes", "<base64>"]},         // any other type of value
 *   "writes:1f0…": {"task-1,0": ["task-1", "count", "~path", "json", 4]}  // only writes too large for a note
 * }
 * ```
 *
 * `put` of a checkpoint under its parent writes every channel value the checkpoint carries, as
 * LangGraph's in-memory saver keeps the whole checkpoint: what it reads back never depends on
 * `newVersions` (a `__copy__` fork puts the current values under the parent with no new
 * versions, so the parent's values would be wrong). A checkpoint with no parent in the session
 * keeps only the channels `newVersions` names (all of them when it is left out): a value
 * belongs to a channel's version, and one not new here was written with an earlier checkpoint
 * (LangGraph's conformance suite asks for this). agentstate stores a version as the change from
 * the one it was computed from (docs/architecture.md, "Changes are splices"), so unchanged
 * channels cost the wire, not the table. Pending writes are notes beside the checkpoint's node,
 * one per `putWrites` call (`writesNote`), outside the session's log; a call whose writes are too
 * large for a note is a merge patch into `writes:<checkpoint id>` at the node instead, a member of
 * its own named by the checkpoint: a node's state is its checkpoint's alone (`put` sets it whole,
 * so the parent's writes are not carried over). A read merges both (`withNotes`).
 */
export interface CheckpointState {
  thread_id: string;
  checkpoint_ns: string;
  /** The checkpoint without its channel values, as the serializer wrote it. */
  checkpoint: Json;
  metadata: Json;
  parent: string | null;
  channels: Record<string, Json>;
  blobs: Record<string, [string, string]>;
  /** `"<taskId>,<idx>"` → `[taskId, channel, taskPath, type, value]` (value: JSON or base64). */
  [writes: `writes:${string}`]: Record<string, StoredWrite>;
}

/** The member that holds the pending writes of a checkpoint. */
function writesMember(checkpointId: string): `writes:${string}` {
  return `writes:${checkpointId}`;
}

type StoredWrite = [taskId: string, channel: string, taskPath: string, type: string, value: Json];

/** The merge patch of `putWrites` (RFC 7396): the checkpoint's writes member, one member in it per write. */
export type WritesPatch = Record<string, Record<string, StoredWrite>>;

/** A value as the state keeps it: JSON as JSON, anything else as its type and base64 bytes. */
type Stored = { json: Json } | { blob: [string, string] };

const decoder = new TextDecoder();

async function store(serde: SerializerProtocol, value: unknown): Promise<Stored> {
  const [type, bytes] = await serde.dumpsTyped(value);
  if (type === 'json') return { json: JSON.parse(decoder.decode(bytes)) as Json };
  return { blob: [type, toBase64(bytes)] };
}

function load(serde: SerializerProtocol, type: string, value: Json): Promise<unknown> {
  if (type === 'json') return serde.loadsTyped('json', JSON.stringify(value));
  return serde.loadsTyped(type, fromBase64(value as string));
}

/** Whether a state read from agentstate is a checkpoint this adapter wrote. */
export function isCheckpointState(state: unknown): state is CheckpointState {
  if (state === null || typeof state !== 'object' || Array.isArray(state)) return false;
  const candidate = state as Partial<CheckpointState>;
  return (
    typeof candidate.thread_id === 'string' &&
    typeof candidate.checkpoint_ns === 'string' &&
    typeof candidate.checkpoint === 'object' &&
    candidate.checkpoint !== null &&
    typeof (candidate.checkpoint as { id?: unknown }).id === 'string' &&
    typeof candidate.channels === 'object' &&
    candidate.channels !== null
  );
}

/** The checkpoint id a checkpoint state records. */
export function checkpointIdIn(state: CheckpointState): string {
  return (state.checkpoint as { id: string }).id;
}

/** What `put` writes: the parts of the state that are this checkpoint's own. */
export interface CheckpointWrite {
  checkpoint: Json;
  metadata: Json;
  /** Every channel value of the checkpoint, as stored. */
  channels: Map<string, Stored>;
  /** The channels `newVersions` names; undefined when it was left out (all are new). */
  changed: Set<string> | undefined;
}

export async function encodeCheckpoint(
  serde: SerializerProtocol,
  checkpoint: Checkpoint,
  metadata: CheckpointMetadata,
  newVersions: ChannelVersions | undefined,
): Promise<CheckpointWrite> {
  const { channel_values: values, ...rest } = checkpoint;
  const [storedCheckpoint, storedMetadata] = await Promise.all([store(serde, rest), store(serde, metadata)]);
  const channels = new Map<string, Stored>();
  await Promise.all(
    Object.entries(values ?? {}).map(async ([channel, value]) => {
      channels.set(channel, await store(serde, value));
    }),
  );
  const changed = newVersions === undefined ? undefined : new Set(Object.keys(newVersions));
  return { checkpoint: jsonOf(storedCheckpoint, 'checkpoint'), metadata: jsonOf(storedMetadata, 'metadata'), channels, changed };
}

/** The write of a checkpoint with no parent to carry values from: only its new channels (see above). */
export function newChannelsOnly(write: CheckpointWrite): CheckpointWrite {
  const { changed } = write;
  if (changed === undefined) return write;
  return { ...write, channels: new Map([...write.channels].filter(([channel]) => changed.has(channel))) };
}

function jsonOf(stored: Stored, what: string): Json {
  if ('json' in stored) return stored.json;
  throw new TypeError(`the serializer wrote the ${what} as ${stored.blob[0]}; agentstate keeps it as JSON`);
}

/** The state of a checkpoint's node, but for its pending writes. */
export function checkpointState(threadId: string, checkpointNs: string, write: CheckpointWrite, parent: string | null): CheckpointState {
  const state: CheckpointState = {
    thread_id: threadId,
    checkpoint_ns: checkpointNs,
    checkpoint: write.checkpoint,
    metadata: write.metadata,
    parent,
    channels: {},
    blobs: {},
  };
  for (const [channel, stored] of write.channels) {
    if ('json' in stored) state.channels[channel] = stored.json;
    else state.blobs[channel] = stored.blob;
  }
  return state;
}

/**
 * The state of a checkpoint put again at its own node, from the state its node holds. LangGraph
 * 1.4's `exit` durability does this: a run that resumes a checkpoint and stops before finishing
 * its step puts that checkpoint again (under itself, with no new versions) as it sends the
 * step's writes. `MemorySaver` keeps a checkpoint's writes apart from it and its values by
 * version, so the put loses neither; here the node keeps its pending writes, and each value not
 * new in this put that it stored at the same version.
 */
export function putAgain(existing: CheckpointState, state: CheckpointState, write: CheckpointWrite): CheckpointState {
  const id = checkpointIdIn(state);
  if (checkpointIdIn(existing) !== id) return state;
  const kept: CheckpointState = { ...state, channels: { ...state.channels }, blobs: { ...state.blobs } };
  const before = versionsIn(existing);
  const now = versionsIn(state);
  for (const channel of write.channels.keys()) {
    if (channel in kept.channels || channel in kept.blobs || before[channel] === undefined || before[channel] !== now[channel]) continue;
    const json = existing.channels[channel];
    const blob = existing.blobs?.[channel];
    if (json !== undefined) kept.channels[channel] = json;
    else if (blob !== undefined) kept.blobs[channel] = blob;
  }
  const writes = existing[writesMember(id)];
  if (writes !== undefined) kept[writesMember(id)] = writes;
  return kept;
}

function versionsIn(state: CheckpointState): Record<string, unknown> {
  return (state.checkpoint as { channel_versions?: Record<string, unknown> }).channel_versions ?? {};
}

/** The merge patch (RFC 7396) of `putWrites`: one member of the checkpoint's writes per write. */
export async function writesPatch(
  serde: SerializerProtocol,
  checkpointId: string,
  writes: PendingWrite[],
  taskId: string,
  taskPath: string,
): Promise<WritesPatch> {
  const entries = await Promise.all(
    writes.map(async ([channel, value], index): Promise<[string, StoredWrite]> => {
      const idx = WRITES_IDX_MAP[channel] ?? index;
      const stored = await store(serde, value);
      const entry: StoredWrite =
        'json' in stored ? [taskId, channel, taskPath, 'json', stored.json] : [taskId, channel, taskPath, ...stored.blob];
      return [`${taskId},${idx}`, entry];
    }),
  );
  return { [writesMember(checkpointId)]: Object.fromEntries(entries) };
}

/**
 * The writes of one `putWrites` call as a note beside the checkpoint's node (API.md section 3,
 * "Notes"): the same members the writes patch would merge into the state, `"<taskId>,<idx>"` →
 * the stored write. A note is a blind write outside the session's log, so the writes of a step
 * neither wait for nor race the next `put` (docs/langgraph.md, "Speed").
 */
export function writesNote(patch: WritesPatch): Record<string, StoredWrite> {
  return Object.values(patch)[0] ?? {};
}

/**
 * The state with the pending writes kept in notes beside its node merged into its writes member
 * (after those the state holds itself: writes too large for a note, or written before notes).
 */
export function withNotes(state: CheckpointState, notes: Record<string, Json> | undefined): CheckpointState {
  if (!notes) return state;
  const member = writesMember(checkpointIdIn(state));
  let writes = state[member];
  for (const key of Object.keys(notes).sort()) {
    const note = notes[key];
    if (!isStoredWrites(note)) continue;
    writes = { ...writes, ...note };
  }
  return writes === state[member] ? state : { ...state, [member]: writes ?? {} };
}

function isStoredWrites(note: Json | undefined): note is Record<string, StoredWrite> {
  if (note === null || typeof note !== 'object' || Array.isArray(note)) return false;
  return Object.values(note).every((entry) => Array.isArray(entry) && entry.length === 5 && typeof entry[0] === 'string');
}

/** The writes patches of one checkpoint as one merge patch: the same as applying them in order (a later write of a key wins). */
export function mergedWritesPatch(patches: readonly WritesPatch[]): WritesPatch {
  const merged: WritesPatch = {};
  for (const patch of patches) {
    for (const [member, writes] of Object.entries(patch)) merged[member] = { ...merged[member], ...writes };
  }
  return merged;
}

/** The pending writes of a checkpoint state, in `writesSortKey` order (as live execution applies them). */
export async function pendingWritesOf(serde: SerializerProtocol, state: CheckpointState): Promise<CheckpointPendingWrite[]> {
  const keyed = Object.entries(state[writesMember(checkpointIdIn(state))] ?? {}).map(([key, entry]) => {
    const idx = Number(key.slice(key.lastIndexOf(',') + 1));
    return { sort: writesSortKey(entry[2], entry[0], idx), entry };
  });
  keyed.sort((a, b) => compareWritesSortKeys(a.sort, b.sort));
  return Promise.all(
    keyed.map(
      async ({ entry: [task, channel, , type, value] }): Promise<CheckpointPendingWrite> => [task, channel, await load(serde, type, value)],
    ),
  );
}

/** The checkpoint a state holds, with every channel value the state stores. */
export async function checkpointOf(serde: SerializerProtocol, state: CheckpointState): Promise<Checkpoint> {
  const checkpoint = (await load(serde, 'json', state.checkpoint)) as Omit<Checkpoint, 'channel_values'>;
  const stored = [
    ...Object.entries(state.blobs ?? {}).map(([channel, [type, data]]) => [channel, type, data] as const),
    ...Object.entries(state.channels).map(([channel, value]) => [channel, 'json', value] as const),
  ];
  const values = await Promise.all(stored.map(async ([channel, type, value]) => [channel, await load(serde, type, value)] as const));
  return { ...checkpoint, channel_values: Object.fromEntries(values) };
}

export async function metadataOf(serde: SerializerProtocol, state: CheckpointState): Promise<CheckpointMetadata> {
  return (await load(serde, 'json', state.metadata)) as CheckpointMetadata;
}

function toBase64(bytes: Uint8Array): string {
  let binary = '';
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary);
}

function fromBase64(text: string): Uint8Array {
  return Uint8Array.from(atob(text), (char) => char.charCodeAt(0));
}
