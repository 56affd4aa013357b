/**
 * Imported first by bench/run.ts: the X-Ray SDK reads these when it loads, and it loads with
 * the handlers, at the `detailed` tracing level that section 1c measures (the most telemetry
 * costs a request; functions/telemetry/telemetry.ts imports the tracer at load, at that level
 * only). `LAMBDA_TASK_ROOT` puts it in its Lambda mode (a facade segment per trace
 * header, every subsegment sent as it closes), which only section 1c's telemetry rows use;
 * the other sections never turn telemetry on (functions/telemetry/telemetry.ts does nothing
 * without `AWS_LAMBDA_FUNCTION_NAME`). Segments go to a port where no daemon listens: each one
 * is still built and sent as a datagram, as in a Lambda.
 */
process.env.AGENTSTATE_TRACING ??= 'detailed';
process.env.LAMBDA_TASK_ROOT ??= process.cwd();
process.env.AWS_XRAY_DAEMON_ADDRESS ??= '127.0.0.1:2999';
process.env.AWS_XRAY_CONTEXT_MISSING ??= 'IGNORE_ERROR';
