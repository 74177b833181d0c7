import type { Attributes } from "@opentelemetry/api";
import {
  ATTR_GEN_AI_OPERATION_NAME,
  ATTR_GEN_AI_PROVIDER_NAME,
  ATTR_GEN_AI_REQUEST_MODEL,
  ATTR_GEN_AI_RESPONSE_MODEL,
  ATTR_GEN_AI_USAGE_INPUT_TOKENS,
  ATTR_GEN_AI_USAGE_OUTPUT_TOKENS,
  GEN_AI_OPERATION_CHAT,
} from "./conventions.js";
import { oneLine } from "./redact.js";

/**
 * The model request an attempt made, in the GenAI conventions' terms: the `llm` call's span and
 * the `gen_ai.client.*` metrics. Every field is optional; what is not reported is the route's
 * (`ctx.provider`, `ctx.providerConfig.model`) or the default operation (`chat`).
 */
export interface ModelReport {
  /** `gen_ai.operation.name`: `chat` (default), `generate_content`, `text_completion`. */
  operation?: string;
  /** `gen_ai.provider.name`, as the client knows it: `openai`, `anthropic`, `gcp.gemini`. */
  provider?: string;
  /** `gen_ai.request.model`: the model the request asked for. */
  requestModel?: string;
  /** `gen_ai.response.model`: the model that answered, as the response names it. */
  responseModel?: string;
}

/** Longest reported name kept: a response's model name is the server's text. */
const MAX_NAME_LENGTH = 128;
const REPORT_KEYS = ["operation", "provider", "requestModel", "responseModel"] as const;

/** Names already made safe, by what was reported: a client reports the same few on every call. */
const MAX_KNOWN_NAMES = 256;
const knownNames = new Map<string, string>();

/** A reported name on one line and cut, kept for the next report of it while few are known. */
function reportedName(value: string): string {
  let name = knownNames.get(value);
  if (name !== undefined) return name;
  name = oneLine(value.slice(0, MAX_NAME_LENGTH));
  if (knownNames.size < MAX_KNOWN_NAMES && value.length <= MAX_NAME_LENGTH)
    knownNames.set(value, name);
  return name;
}

/**
 * `report` merged over what an attempt reported before: non-empty strings only, each on one line
 * and cut (a value the metrics are labelled with must stay a name). Never throws.
 */
export function modelReport(
  before: ModelReport | undefined,
  report: ModelReport,
): ModelReport | undefined {
  // Typed, but a tool is JavaScript too: a report that is no object reports nothing.
  const given: unknown = report;
  if (typeof given !== "object" || given === null) return before;
  const merged: ModelReport = { ...before };
  for (const key of REPORT_KEYS) {
    let value: unknown;
    try {
      value = report[key];
    } catch {
      continue; // a getter that throws reports nothing
    }
    if (typeof value === "string" && value !== "") merged[key] = reportedName(value);
  }
  return merged;
}

/** A model request, resolved: the attempt's report over its route's defaults. */
export interface ModelRequest {
  readonly operation: string;
  readonly provider: string | undefined;
  readonly requestModel: string | undefined;
  readonly responseModel: string | undefined;
}

export function modelRequest(
  report: ModelReport | undefined,
  /** The attempt's route (selfheal's provider name). */
  route: string | undefined,
  /** The route's declared model (`recovery.providers[].model`). */
  configModel: string | undefined,
): ModelRequest {
  return {
    operation: report?.operation ?? GEN_AI_OPERATION_CHAT,
    provider: report?.provider ?? route,
    requestModel: report?.requestModel ?? configModel,
    responseModel: report?.responseModel,
  };
}

/** The GenAI attributes of a request over `base` (the metrics' agent and tool labels). */
export function requestAttributes(
  base: Attributes,
  request: ModelRequest,
  withOperation = true,
): Attributes {
  const attributes: Attributes = { ...base };
  if (withOperation) attributes[ATTR_GEN_AI_OPERATION_NAME] = request.operation;
  if (request.provider !== undefined) attributes[ATTR_GEN_AI_PROVIDER_NAME] = request.provider;
  if (request.requestModel !== undefined)
    attributes[ATTR_GEN_AI_REQUEST_MODEL] = request.requestModel;
  if (request.responseModel !== undefined)
    attributes[ATTR_GEN_AI_RESPONSE_MODEL] = request.responseModel;
  return attributes;
}

/**
 * What a model call's span says of the attempt that answered (or failed last): its request and
 * the tokens it reported. Written at the call's end over what the span started with (the
 * primary route's provider and model), so a failover shows the route that answered. The
 * operation only when reported: the span started with the tool's (or the caller's attributes').
 */
export function modelCallAttributes(
  report: ModelReport | undefined,
  request: ModelRequest,
  usage: { inputTokens?: number; outputTokens?: number } | undefined,
): Attributes {
  const attributes = requestAttributes({}, request, report?.operation !== undefined);
  if (usage?.inputTokens !== undefined)
    attributes[ATTR_GEN_AI_USAGE_INPUT_TOKENS] = usage.inputTokens;
  if (usage?.outputTokens !== undefined)
    attributes[ATTR_GEN_AI_USAGE_OUTPUT_TOKENS] = usage.outputTokens;
  return attributes;
}
