/**
 * Waits for every one of `work` to land or fail, then rejects with the first failure, if any.
 * `Promise.all` rejects at the first failure and leaves the rest on their way: a copy's undo
 * (session-copy.ts) that followed it could erase its session before they land, and what landed
 * after the erase would stay.
 */
export async function allSettledOrThrow(work: ReadonlyArray<Promise<unknown> | undefined>): Promise<void> {
  const results = await Promise.allSettled(work);
  const failed = results.find((result): result is PromiseRejectedResult => result.status === 'rejected');
  if (failed) throw failed.reason;
}
