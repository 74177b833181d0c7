/** The fake provider's OpenAI Responses (`POST /v1/responses`), byte by byte over fetch. */
import { describe, expect, it } from "vitest";
import { events, post, RESPONSES, useProviders, USER } from "./wire-http.js";

const start = useProviders();

const RESPONSE_BASE = {
  id: "resp_fake",
  object: "response",
  created_at: 0,
  background: false,
  error: null,
  instructions: null,
  max_output_tokens: null,
  model: "gpt-5",
  parallel_tool_calls: true,
  previous_response_id: null,
  reasoning: { effort: null, summary: null },
  store: true,
  temperature: 1,
  text: { format: { type: "text" }, verbosity: "medium" },
  tool_choice: "auto",
  tools: [],
  top_p: 1,
  truncation: "disabled",
  user: null,
  metadata: {},
};

const textPart = (text: string) => ({ type: "output_text", annotations: [], logprobs: [], text });

function responseUsage(output: number) {
  return {
    input_tokens: 10,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: output,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: 10 + output,
  };
}
describe("fake provider: OpenAI Responses", () => {
  it("a plain answer is a completed response with its output and usage", async () => {
    const p = await start();
    const res = await post(p, RESPONSES, { model: "gpt-5", input: "hi" });
    expect(res.headers.get("content-type")).toBe("application/json");
    expect(res.headers.get("x-request-id")).toBe("req_fake_1");
    expect(await res.json()).toEqual({
      ...RESPONSE_BASE,
      status: "completed",
      completed_at: 0,
      incomplete_details: null,
      output: [
        {
          id: "msg_fake",
          type: "message",
          status: "completed",
          content: [textPart("Hi there")],
          role: "assistant",
        },
      ],
      usage: responseUsage(2),
    });
  });

  it("streams the API's events, named, numbered, ending with response.completed", async () => {
    const p = await start();
    const res = await post(p, RESPONSES, { model: "gpt-5", input: "hi", stream: true });
    expect(res.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
    const seen = events(await res.text());
    expect(seen.map((e) => e.event)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
      "response.output_text.delta",
      "response.output_text.delta",
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.completed",
    ]);
    seen.forEach((e, i) => {
      expect(e.data.type).toBe(e.event);
      expect(e.data.sequence_number).toBe(i);
    });
    const at = { item_id: "msg_fake", output_index: 0, content_index: 0 };
    expect(seen[0]?.data.response).toEqual({
      ...RESPONSE_BASE,
      status: "in_progress",
      completed_at: null,
      incomplete_details: null,
      output: [],
      usage: null,
    });
    expect(seen[2]?.data.item).toEqual({
      id: "msg_fake",
      type: "message",
      status: "in_progress",
      content: [],
      role: "assistant",
    });
    expect(seen[3]?.data).toMatchObject({ ...at, part: textPart("") });
    expect(seen.slice(4, 6).map((e) => e.data)).toEqual([
      { type: "response.output_text.delta", sequence_number: 4, ...at, delta: "Hi", logprobs: [] },
      {
        type: "response.output_text.delta",
        sequence_number: 5,
        ...at,
        delta: " there",
        logprobs: [],
      },
    ]);
    expect(seen[6]?.data).toMatchObject({ ...at, text: "Hi there" });
    expect(seen[9]?.data.response).toMatchObject({
      status: "completed",
      output: [{ status: "completed", content: [textPart("Hi there")] }],
      usage: responseUsage(2),
    });
  });

  it("finish_length: incomplete for max_output_tokens, streamed as response.incomplete", async () => {
    const p = await start({ reply: "one two three" });
    p.injector.inject("finish_length", { first: 2 });
    const plain: unknown = await (await post(p, RESPONSES, { input: "hi" })).json();
    expect(plain).toMatchObject({
      status: "incomplete",
      completed_at: null,
      incomplete_details: { reason: "max_output_tokens" },
      output: [{ status: "incomplete", content: [textPart("one two")] }],
      usage: { output_tokens: 2 },
    });
    const res = await post(p, RESPONSES, { input: "hi", stream: true });
    const last = events(await res.text()).at(-1);
    expect(last?.event).toBe("response.incomplete");
    expect(last?.data.response).toEqual(plain);
  });

  it("no_done: the output item is done, and the stream ends without response.completed", async () => {
    const p = await start();
    p.injector.inject("no_done", { first: 1 });
    const seen = events(await (await post(p, RESPONSES, { input: "hi", stream: true })).text());
    expect(seen.at(-1)?.event).toBe("response.output_item.done");
  });

  it("malformed_event: a text delta cut mid-JSON, the next event numbered on", async () => {
    const p = await start();
    p.injector.inject("malformed_event", { first: 1 }, { atToken: 2 });
    const text = await (await post(p, RESPONSES, { input: "hi", stream: true })).text();
    expect(text).toContain(
      'data: {"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_fake","output_index":0,"content_index":0,"delta":"Hi","logprobs":[]}\n\n' +
        'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","item_id":"msg_fake","delta":\n\n' +
        'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","sequence_number":5,',
    );
  });

  it("errors are OpenAI's, with the request id", async () => {
    const p = await start();
    p.injector.inject("auth", { first: 1 });
    const res = await post(p, RESPONSES, { input: "hi" });
    expect(res.status).toBe(401);
    expect(res.headers.get("x-request-id")).toBe("req_fake_1");
    expect(await res.json()).toMatchObject({ error: { code: "invalid_api_key" } });
  });

  it("rejectPrefill looks at the last item of input", async () => {
    const p = await start({ rejectPrefill: true });
    const input = [...USER, { role: "assistant", content: "Sure" }];
    const res = await post(p, RESPONSES, { input });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ error: { param: "input" } });
    expect((await post(p, RESPONSES, { input: "a string input" })).status).toBe(200);
  });
});
