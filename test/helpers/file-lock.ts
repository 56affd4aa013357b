import { mkdirSync, rmSync, statSync } from 'node:fs';
import { dirname } from 'node:path';

/** A lock older than this belongs to a run that died. */
const STALE_LOCK_MS = 5 * 60_000;

/**
 * Runs `work` while holding a lock that every vitest worker of every run on this machine sees:
 * the directory `lock`, made with `mkdir` (atomic: one maker wins) and removed afterwards. For
 * set-up that writes shared files in the repository (a synth's output, a workspace's dist/),
 * which two test files running at once in two workers must not write together.
 */
export async function withFileLock<T>(lock: string, work: () => Promise<T>): Promise<T> {
  mkdirSync(dirname(lock), { recursive: true });
  while (!tryLock(lock)) await new Promise((resolve) => setTimeout(resolve, 250));
  try {
    return await work();
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

function tryLock(lock: string): boolean {
  try {
    mkdirSync(lock);
    return true;
  } catch {
    try {
      if (Date.now() - statSync(lock).mtimeMs > STALE_LOCK_MS) rmSync(lock, { recursive: true, force: true });
    } catch {
      // Gone meanwhile: the next attempt takes it.
    }
    return false;
  }
}
