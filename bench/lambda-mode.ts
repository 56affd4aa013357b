/**
 * Imported first by bench/telemetry-detailed.ts, the process of section 1c's `detailed` rows:
 * the X-Ray SDK reads these as it loads, and at that level it loads with the handlers
 * (functions/telemetry/telemetry.ts imports the tracer at INIT). `LAMBDA_TASK_ROOT` puts it in
 * its Lambda mode (a facade segment per trace header, every subsegment sent as it closes).
 * Segments go to a port where no daemon listens: each one is still built and sent as a
 * datagram, as in a Lambda. The bench's own process runs at the stack's default level, which
 * loads no X-Ray SDK.
 */
process.env.LAMBDA_TASK_ROOT ??= process.cwd();
process.env.AWS_XRAY_DAEMON_ADDRESS ??= '127.0.0.1:2999';
process.env.AWS_XRAY_CONTEXT_MISSING ??= 'IGNORE_ERROR';
