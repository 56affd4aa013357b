// Preloaded (`--import`) into a function process that must run "later": its clock runs
// TEST_CLOCK_OFFSET_MS ahead, as a Lambda invoked that much later would see it.
const offset = Number(process.env.TEST_CLOCK_OFFSET_MS ?? 0);
const RealDate = Date;
class ShiftedDate extends RealDate {
  constructor(...args) {
    if (args.length === 0) super(RealDate.now() + offset);
    else super(...args);
  }
  static now() {
    return RealDate.now() + offset;
  }
}
globalThis.Date = ShiftedDate;
