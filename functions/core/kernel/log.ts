/**
 * How the core says what it absorbed rather than threw (a delivery that became a dead letter, a
 * best-effort step that failed): one message and its details. A Lambda hands its structured
 * logger in; without one, `warnToConsole` is the one default.
 */
export type Log = (message: string, detail: Record<string, unknown>) => void;

/** One line on standard error, as the local server and tests see it. */
export const warnToConsole: Log = (message, detail) => console.warn(`agentstate: ${message}`, JSON.stringify(detail));
