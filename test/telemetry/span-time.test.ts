import { hrTimeToMilliseconds } from "@opentelemetry/core";
import { describe, expect, it } from "vitest";
import { spanTime } from "../../src/telemetry/spans.js";

describe("spanTime: an engine clock time as a span timestamp", () => {
  it.each([
    [0, [0, 0]],
    [1_767_225_600_000, [1_767_225_600, 0]],
    [1_767_225_600_250.5, [1_767_225_600, 250_500_000]],
    [999.25, [0, 999_250_000]],
  ] as const)("%d ms is %j", (ms, hr) => {
    expect(spanTime(ms)).toEqual(hr);
  });

  it("carries a nanosecond count that rounds up to a whole second", () => {
    const [seconds, nanos] = spanTime(1_999.999_999_9);
    expect([seconds, nanos]).toEqual([2, 0]);
  });

  it("keeps sub-millisecond precision at today's epoch (what the SDK's own clock gives)", () => {
    const now = 1_796_000_000_123.456;
    const [seconds, nanos] = spanTime(now);
    expect(nanos).toBeGreaterThanOrEqual(0);
    expect(nanos).toBeLessThan(1e9);
    expect(Math.abs(hrTimeToMilliseconds([seconds, nanos]) - now)).toBeLessThan(0.001);
  });
});
