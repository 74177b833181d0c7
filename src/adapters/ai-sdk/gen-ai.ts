import type { ModelReport } from "../../index.js";
import {
  GEN_AI_OPERATION_GENERATE_CONTENT,
  GEN_AI_OPERATION_TEXT_COMPLETION,
  GEN_AI_PROVIDERS,
} from "../../telemetry/conventions.js";

/**
 * The GenAI conventions' provider of an AI SDK provider id (`openai.chat`, `anthropic.messages`,
 * `google.generative-ai`, `google.vertex.chat`), by its first part; undefined for another (the
 * route's name stays).
 */
const PROVIDERS: Readonly<Record<string, string>> = {
  openai: GEN_AI_PROVIDERS.openai,
  anthropic: GEN_AI_PROVIDERS.anthropic,
  azure: GEN_AI_PROVIDERS.azureOpenai,
  "amazon-bedrock": GEN_AI_PROVIDERS.awsBedrock,
  cohere: GEN_AI_PROVIDERS.cohere,
  deepseek: GEN_AI_PROVIDERS.deepseek,
  google: GEN_AI_PROVIDERS.gcpGemini,
  groq: GEN_AI_PROVIDERS.groq,
  mistral: GEN_AI_PROVIDERS.mistralAi,
  perplexity: GEN_AI_PROVIDERS.perplexity,
  xai: GEN_AI_PROVIDERS.xAi,
};

/** What a model's request is in the GenAI conventions' terms (`ctx.reportModel`). */
export function modelRequestOf(model: { provider: string; modelId: string }): ModelReport {
  const [family = "", api = ""] = model.provider.split(".");
  const vertex = family === "google" && api === "vertex";
  const provider = vertex ? GEN_AI_PROVIDERS.gcpVertexAi : PROVIDERS[family];
  const operation =
    family === "google"
      ? GEN_AI_OPERATION_GENERATE_CONTENT
      : api === "completion"
        ? GEN_AI_OPERATION_TEXT_COMPLETION
        : undefined;
  return {
    requestModel: model.modelId,
    ...(provider !== undefined && { provider }),
    ...(operation !== undefined && { operation }),
  };
}
