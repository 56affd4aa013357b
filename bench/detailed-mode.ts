/**
 * Imported first by bench/telemetry-detailed.ts: the stack's `detailed` tracing level, which
 * functions/telemetry/telemetry.ts reads as it loads (it imports the tracer at INIT, at that
 * level only). A process apart from the bench's own, because the X-Ray SDK, once loaded, makes
 * every promise of the process pay its async hook (cls-hooked), traced or not.
 */
process.env.AGENTSTATE_TRACING = 'detailed';
