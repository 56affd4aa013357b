import { LINEAGE_WINDOW, type VersionRecord } from '../../core/model/model.js';
import type { LogPosition } from '../table/keys.js';
import type { VersionPlace } from './log-items.js';

/** The lineage window of a version recorded on top of `prior`, each with where it is. */
export function lineageOf(prior: VersionRecord | null): Array<{ version: number; seq: number }> {
  if (!prior) return [];
  const place = prior.place as VersionPlace | undefined;
  return [{ version: prior.version, seq: place?.seq ?? 1 }, ...(place?.lineage ?? [])].slice(0, LINEAGE_WINDOW);
}

/** Where a version recorded at `position` on top of `prior` is, with its lineage window. */
export function versionPlace(position: LogPosition, prior: VersionRecord | null): VersionPlace {
  return { incarnation: position.incarnation, seq: position.seq, lineage: lineageOf(prior) };
}
