import { describe, expect, it } from 'vitest';
import { openCursor, sealCursor } from '../../functions/core/kernel/sealing.js';

const BASE64URL = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';

/** The same cursor with its last character's unused low bits set otherwise: it decodes to the same bytes. */
function withOtherPadBits(cursor: string): string {
  const last = BASE64URL.indexOf(cursor.at(-1) as string);
  return cursor.slice(0, -1) + BASE64URL[last ^ 1];
}

describe('list cursors', () => {
  it('open for the list that sealed them, and for no other', () => {
    const cursor = sealCursor({ pk: 'x', sk: 'y' }, 'sessions');
    expect(openCursor(cursor, 'sessions')).toEqual({ pk: 'x', sk: 'y' });
    expect(() => openCursor(cursor, 'notes')).toThrow('cursor is not valid for this list');
  });

  it('refuse any edit, also one that decodes to the same bytes', () => {
    // Cursors of 1 to 3 more bytes end in each of base64url's three tails; two of them leave unused bits.
    const cursors = ['a', 'ab', 'abc'].map((position) => sealCursor(position, 'notes'));
    const padded = cursors.filter((cursor) => cursor.length % 4 !== 0);
    expect(padded.length).toBe(2);
    for (const cursor of padded) {
      const same = withOtherPadBits(cursor);
      expect(Buffer.from(same, 'base64url')).toEqual(Buffer.from(cursor, 'base64url'));
      expect(() => openCursor(same, 'notes')).toThrow('cursor is not valid for this list');
    }
    for (const cursor of cursors) {
      const middle = Math.floor(cursor.length / 2);
      const edited = cursor.slice(0, middle) + (cursor[middle] === 'A' ? 'B' : 'A') + cursor.slice(middle + 1);
      expect(() => openCursor(edited, 'notes')).toThrow('cursor is not valid for this list');
      expect(openCursor(cursor, 'notes')).toEqual(expect.any(String));
    }
  });
});
