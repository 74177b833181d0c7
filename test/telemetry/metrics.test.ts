import { describe, expect, it } from "vitest";
import { virtualInstance } from "../helpers/engine.js";
import { recordingMeters } from "../helpers/otel.js";

describe("metrics", () => {
  it("counts calls, durations, LLM responses and tasks under the contract's names, with zeroed series", async () => {
    const m = recordingMeters();
    const { sh, clock } = virtualInstance({ meterProvider: m.meterProvider });
    const search = sh.tool("search", { readOnly: true }, async () => {
      await clock.sleep(250);
      return "r";
    });
    const llm = sh.tool("answer", { readOnly: true, kind: "llm", provider: "openai" }, () => "");
    await sh.task("t1", async () => {
      await clock.run(search(undefined));
      await llm(undefined);
    });
    await clock.advance(5_000);
    await sh.status();
    const points = await m.read();
    await m.shutdown();
    expect(points.get("selfheal_tool_calls{agent=test-agent,tool=search,outcome=success}")).toBe(1);
    expect(points.get("selfheal_tool_calls{agent=test-agent,tool=search,outcome=error}")).toBe(0);
    expect(points.get("selfheal_tool_calls{agent=test-agent,tool=search,outcome=blocked}")).toBe(0);
    expect(points.get("selfheal_tool_calls{agent=test-agent,tool=search,outcome=recovered}")).toBe(
      0,
    );
    expect(points.get("selfheal_tool_call_duration_seconds{agent=test-agent,tool=search}")).toBe(1);
    expect(points.get("selfheal_llm_responses{agent=test-agent,provider=openai,empty=true}")).toBe(
      1,
    );
    expect(points.get("selfheal_llm_responses{agent=test-agent,provider=openai,empty=false}")).toBe(
      0,
    );
    expect(points.get("selfheal_tasks{agent=test-agent,outcome=completed}")).toBe(1);
    expect(points.get("selfheal_tasks{agent=test-agent,outcome=failed}")).toBe(0);
    expect(points.get("selfheal_health_status{agent=test-agent}")).toBe(0);
  });
});
