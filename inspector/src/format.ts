import { plainText, richText } from './rich-values.js';

/** Small display helpers shared by the views. */

const units: Array<[Intl.RelativeTimeFormatUnit, number]> = [
  ['day', 86_400_000],
  ['hour', 3_600_000],
  ['minute', 60_000],
  ['second', 1000],
];
const relative = new Intl.RelativeTimeFormat(undefined, { numeric: 'auto' });

/** "3 minutes ago"; "just now" under ten seconds. */
export function timeAgo(iso: string | null | undefined, now = Date.now()): string {
  if (!iso) return '—';
  const elapsed = new Date(iso).getTime() - now;
  if (Number.isNaN(elapsed)) return iso;
  if (Math.abs(elapsed) < 10_000) return 'just now';
  for (const [unit, size] of units) {
    if (Math.abs(elapsed) >= size || unit === 'second') return relative.format(Math.round(elapsed / size), unit);
  }
  return iso;
}

/** The full timestamp, for a title attribute. */
export function fullTime(iso: string | null | undefined): string {
  return iso ? new Date(iso).toLocaleString() : '';
}

/** Pretty-printed JSON, tagged values written as the values they stand for (rich-values.ts). */
export function pretty(value: unknown): string {
  return value === undefined ? '(absent)' : plainText(richText(value));
}
