import { unmarshall } from '@aws-sdk/util-dynamodb';
import type { DynamoDBRecord } from 'aws-lambda';
import { describe, expect, it } from 'vitest';
import {
  changeRecordFilters,
  matchesStreamFilter,
  openedCopyOf,
  recordedChangeOf,
  recordedDocumentOf,
  recordedVersionOf,
} from '../../functions/store/events/stream-images.js';
import { type LogEntry, readLogItem, versionOf } from '../../functions/store/log/log-items.js';
import { DOCUMENT_ITEM_KIND, LOG_ITEM_KIND } from '../../functions/store/table/item-kinds.js';

/** What a change carries forward (log-items.ts), as JSON text: the head, the session's agent, when activity moved. */
const carried = (extra: Record<string, unknown> = {}) => ({
  S: JSON.stringify({ v: 3, h: 'a1', hv: 3, hd: 2, hx: -1, ag: null, u: null, ta: null, w: true, b: 900, ...extra }),
});

/** A version item's image, as Lambda delivers it: version 3, the first change after version 2. */
const versionImage = (overrides: Record<string, unknown> = {}) => ({
  pk: { S: 'S#acme#s1' },
  sk: { S: 'V#000000#000000000002#00000001' },
  kind: { S: LOG_ITEM_KIND.version },
  version: { N: '3' },
  node: { S: 'a1' },
  prevVersion: { N: '1' },
  cause: { S: 'decide' },
  author: { S: 'planner' },
  decisionId: { S: 'd-9' },
  createdAt: { S: '2025-06-01T10:00:00.000Z' },
  state: { S: '{"turns":2}' },
  agent: { S: '{"model":"fast"}' },
  lineage: { S: '1' },
  t: carried(),
  ...overrides,
});

const record = (eventName: string, images: { NewImage?: object; OldImage?: object }): DynamoDBRecord =>
  ({ eventName, eventSource: 'aws:dynamodb', dynamodb: { SequenceNumber: '100', ...images } }) as DynamoDBRecord;

const passes = (r: DynamoDBRecord) => changeRecordFilters.some((pattern) => matchesStreamFilter(pattern, r));

describe('recordedVersionOf and the event filter', () => {
  it('reads a new version item (INSERT)', () => {
    const r = record('INSERT', { NewImage: versionImage() });

    expect(passes(r)).toBe(true);
    expect(recordedVersionOf(r)).toEqual({
      tenant: 'acme',
      sessionId: 's1',
      incarnation: 0,
      version: {
        version: 3,
        node: 'a1',
        prevVersion: 1,
        cause: 'decide',
        author: 'planner',
        decisionId: 'd-9',
        createdAt: '2025-06-01T10:00:00.000Z',
        state: { turns: 2 },
        agent: { model: 'fast' },
      },
      activityDue: false,
    });
  });

  it('tells whether the write found the session activity due to move (touchedAt equals createdAt)', () => {
    const moved = record('INSERT', { NewImage: versionImage({ t: carried({ ta: '2025-06-01T10:00:00.000Z' }) }) });
    const earlier = record('INSERT', { NewImage: versionImage({ t: carried({ ta: '2025-06-01T09:59:00.000Z' }) }) });

    expect(recordedVersionOf(moved)?.activityDue).toBe(true);
    expect(recordedVersionOf(earlier)?.activityDue).toBe(false);
  });

  it('reads the life of the session a version belongs to from its key', () => {
    const r = record('INSERT', { NewImage: versionImage({ sk: { S: 'V#000002#000000000002#00000001' } }) });

    expect(recordedVersionOf(r)?.incarnation).toBe(2);
  });

  it.each([
    ['a head switch', record('INSERT', { NewImage: versionImage({ kind: { S: LOG_ITEM_KIND.head } }) })],
    ['an append', record('INSERT', { NewImage: versionImage({ kind: { S: LOG_ITEM_KIND.nodes } }) })],
    ['a decision’s lease', record('INSERT', { NewImage: versionImage({ kind: { S: LOG_ITEM_KIND.lease } }) })],
    [
      'a version a delete made a tombstone',
      record('MODIFY', { OldImage: versionImage(), NewImage: versionImage({ kind: { S: LOG_ITEM_KIND.tombstone } }) }),
    ],
    ['a version rewritten (never happens; not a new version)', record('MODIFY', { OldImage: versionImage(), NewImage: versionImage() })],
    ['a session delete', record('REMOVE', { OldImage: versionImage() })],
    ['a TTL delete in DynamoDB Local', record('UNKNOWN_TO_SDK_VERSION', { OldImage: versionImage() })],
    ['a node’s index', record('INSERT', { NewImage: { pk: { S: 'S#acme#s1' }, sk: { S: 'N#u1#000000' }, depth: { N: '1' } } })],
    ['a dead letter', record('INSERT', { NewImage: { pk: { S: 'X#acme#w1' }, sk: { S: 'D#s1#000000000001' }, body: { S: '{}' } } })],
  ])('ignores %s', (_what, r) => {
    expect(passes(r)).toBe(false);
    expect(recordedVersionOf(r)).toBeNull();
  });

  it('reads absent author, decision and agent as null, and prevVersion 0 when missing', () => {
    const image = versionImage({ author: { NULL: true }, decisionId: { NULL: true } });
    delete (image as Record<string, unknown>).agent;
    delete (image as Record<string, unknown>).prevVersion;

    const version = recordedVersionOf(record('INSERT', { NewImage: image }))?.version;

    expect(version).toMatchObject({ author: null, decisionId: null, agent: null, prevVersion: 0 });
  });

  it('reads a version exactly as the store does, an unknown cause as a patch in both', () => {
    // Prepare: a version item from a writer with a cause this code does not know.
    const image = versionImage({ cause: { S: 'merge' }, t: carried({ ag: 'planner' }) });

    // Act
    const fromStream = recordedVersionOf(record('INSERT', { NewImage: image }))?.version;
    const fromStore = versionOf(readLogItem(unmarshall(image as Parameters<typeof unmarshall>[0])) as LogEntry);

    // Assess: the event carries the store's record, less the lineage, commands and place.
    expect(fromStream?.cause).toBe('patch');
    expect(fromStream?.sessionAgentId).toBe('planner');
    expect(fromStore).toEqual({
      ...fromStream,
      lineage: [1],
      commands: null,
      place: { incarnation: 0, seq: 1, lineage: [{ version: 1, seq: 1 }] },
    });
  });

  it('takes binary attributes in Lambda’s base64 form', () => {
    const r = record('INSERT', {
      NewImage: versionImage({ extra: { B: Buffer.from('hi').toString('base64') }, more: { M: { b: { BS: ['aGk='] } } } }),
    });

    expect(recordedVersionOf(r)?.sessionId).toBe('s1');
  });
});

describe('openedCopyOf and the event filter', () => {
  /** A change of life 2 after version 4 (log-items.ts), with the top-level attributes `extra`. */
  const changeImage = (kind: string, extra: Record<string, unknown> = {}) => ({
    pk: { S: 'S#acme#copied' },
    sk: { S: 'V#000002#000000000004#00000003' },
    kind: { S: kind },
    createdAt: { S: '2025-06-01T10:00:00.000Z' },
    t: carried({ v: 4 }),
    ...extra,
  });

  it("reads the opening of a copy, a change of its own or the copy's last append (session-copy.ts), and lets both through", () => {
    const own = record('INSERT', { NewImage: changeImage(LOG_ITEM_KIND.settings, { opens: { S: 'copy' } }) });
    const append = record('INSERT', { NewImage: changeImage(LOG_ITEM_KIND.nodes, { opens: { S: 'copy' } }) });
    const opened = { tenant: 'acme', sessionId: 'copied', incarnation: 2, version: 4 };

    expect(passes(own)).toBe(true);
    expect(openedCopyOf(own)).toEqual(opened);
    expect(passes(append)).toBe(true);
    expect(openedCopyOf(append)).toEqual(opened);
    // The opening is no version of its own: its versions come from the copy's life of the log.
    expect(recordedChangeOf(append)).toBeNull();
  });

  it('lets no other append or settings change through, and reads no opening from them', () => {
    const append = record('INSERT', { NewImage: changeImage(LOG_ITEM_KIND.nodes) });
    const settings = record('INSERT', { NewImage: changeImage(LOG_ITEM_KIND.settings) });
    const head = record('INSERT', { NewImage: changeImage(LOG_ITEM_KIND.head, { opens: { S: 'copy' } }) });

    for (const r of [append, settings, head]) {
      expect(passes(r)).toBe(false);
      expect(openedCopyOf(r)).toBeNull();
    }
  });
});

describe('item kinds', () => {
  it('keeps the kind values that tables and their stream filters hold', () => {
    // A changed letter would hide every existing version, change or document from the readers.
    expect(LOG_ITEM_KIND).toEqual({
      version: 'v',
      nodes: 'a',
      head: 'm',
      lease: 'l',
      release: 'r',
      settings: 's',
      follow: 'f',
      tombstone: 'x',
    });
    expect(DOCUMENT_ITEM_KIND).toEqual({ run: 'doc:run', profile: 'doc:profile', shared: 'doc:shared' });
  });
});

describe('matchesStreamFilter', () => {
  it('needs every key of the pattern, each leaf one of the listed values', () => {
    const pattern = { a: ['x', 'y'], b: { c: ['z'] } };
    expect(matchesStreamFilter(pattern, { a: 'y', b: { c: 'z', d: 1 }, e: 2 })).toBe(true);
    expect(matchesStreamFilter(pattern, { a: 'y', b: { c: 'q' } })).toBe(false);
    expect(matchesStreamFilter(pattern, { a: 'y' })).toBe(false);
    expect(matchesStreamFilter(pattern, { b: { c: 'z' } })).toBe(false);
  });
});

describe('recordedDocumentOf and the event filter', () => {
  const documentImage = (kind: string, pk: string, sk: string, version: number, state: unknown, extra: Record<string, unknown> = {}) => ({
    pk: { S: pk },
    sk: { S: sk },
    kind: { S: kind },
    version: { N: String(version) },
    state: { S: JSON.stringify(state) },
    updatedAt: { S: '2025-06-01T10:00:00.000Z' },
    ...extra,
  });

  it('reads a run, a profile and a shared document version, with the state before it from the old image', () => {
    // Prepare
    const run = record('MODIFY', {
      NewImage: documentImage(
        DOCUMENT_ITEM_KIND.run,
        'S#acme#s1',
        'R#r1',
        2,
        { step: 2 },
        { sessionId: { S: 's1' }, author: { S: 'planner' } },
      ),
      OldImage: documentImage(DOCUMENT_ITEM_KIND.run, 'S#acme#s1', 'R#r1', 1, { step: 1 }),
    });
    const profile = record('INSERT', {
      NewImage: documentImage(
        DOCUMENT_ITEM_KIND.profile,
        'P#acme#u1',
        'P',
        1,
        { lang: 'en' },
        { sessionId: { S: 's2' }, author: { NULL: true } },
      ),
    });
    const shared = record('MODIFY', {
      NewImage: documentImage(DOCUMENT_ITEM_KIND.shared, 'A#acme', 'G', 5, { mode: 'b' }, { sessionId: { S: 's3' } }),
      OldImage: documentImage(DOCUMENT_ITEM_KIND.shared, 'A#acme', 'G', 4, { mode: 'a' }),
    });

    // Act
    const changes = [run, profile, shared].map((r) => recordedChangeOf(r));

    // Assess
    expect([run, profile, shared].every(passes)).toBe(true);
    expect(changes).toEqual([
      {
        tenant: 'acme',
        document: {
          kind: 'run',
          id: 'r1',
          sessionId: 's1',
          version: 2,
          state: { step: 2 },
          prevState: { step: 1 },
          author: 'planner',
          createdAt: '2025-06-01T10:00:00.000Z',
        },
      },
      {
        tenant: 'acme',
        document: {
          kind: 'profile',
          id: 'u1',
          sessionId: 's2',
          version: 1,
          state: { lang: 'en' },
          prevState: null,
          author: null,
          createdAt: '2025-06-01T10:00:00.000Z',
        },
      },
      {
        tenant: 'acme',
        document: {
          kind: 'shared',
          id: 'shared',
          sessionId: 's3',
          version: 5,
          state: { mode: 'b' },
          prevState: { mode: 'a' },
          author: null,
          createdAt: '2025-06-01T10:00:00.000Z',
        },
      },
    ]);
  });

  it('gives no prev for a run that expired and started again at version 1', () => {
    const restarted = record('MODIFY', {
      NewImage: documentImage(DOCUMENT_ITEM_KIND.run, 'S#acme#s1', 'R#r1', 1, { fresh: true }),
      OldImage: documentImage(DOCUMENT_ITEM_KIND.run, 'S#acme#s1', 'R#r1', 7, { stale: true }),
    });

    const change = recordedDocumentOf(restarted);

    // A run written before documents recorded their session still names its own.
    expect(change?.document).toMatchObject({ version: 1, prevState: null, sessionId: 's1' });
  });

  it('lets no delete, and nothing that is not a document version, through', () => {
    const removed = record('REMOVE', { OldImage: documentImage(DOCUMENT_ITEM_KIND.run, 'S#acme#s1', 'R#r1', 3, {}) });
    const session = record('MODIFY', { NewImage: { pk: { S: 'S#acme#s1' }, sk: { S: 'S' }, kind: { S: 'session' } } });
    const misplaced = record('INSERT', { NewImage: documentImage(DOCUMENT_ITEM_KIND.profile, 'S#acme#s1', 'R#r1', 1, {}) });

    expect(passes(removed)).toBe(false);
    expect(recordedChangeOf(removed)).toBeNull();
    expect(passes(session)).toBe(false);
    expect(recordedChangeOf(session)).toBeNull();
    expect(recordedDocumentOf(misplaced)).toBeNull();
  });

  it('makes no event of a profile whose fence moved alone, nor of an item of a fence alone (document-item.ts)', () => {
    // A PATCH that took a session from the user moved the fence of a profile: same version, same time.
    const profile = documentImage(DOCUMENT_ITEM_KIND.profile, 'P#acme#u1', 'P', 3, { lang: 'en' });
    const fenceMoved = record('MODIFY', { NewImage: { ...profile, fence: { S: 'f2' } }, OldImage: { ...profile, fence: { S: 'f1' } } });
    // An erasure's tombstone, or a PATCH's fence for a user with no profile: no kind, no version.
    const tombstone = record('MODIFY', { NewImage: { pk: { S: 'P#acme#u1' }, sk: { S: 'P' }, fence: { S: 'f3' } }, OldImage: profile });

    expect(passes(fenceMoved)).toBe(true);
    expect(recordedChangeOf(fenceMoved)).toBeNull();
    expect(passes(tombstone)).toBe(false);
    expect(recordedChangeOf(tombstone)).toBeNull();
  });
});
