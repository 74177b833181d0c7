import { initChatModel, type ModelRequest } from "langchain";
import type { LangChainFallback, ModelRouteSettings } from "./options.js";

type Model = ModelRequest["model"];

/** The model of each route: the caller's own on the primary, else that provider's fallback. */
export class ModelRoutes {
  private readonly fallbacks = new Map<string, Model | string>();
  private readonly resolved = new Map<string, Promise<Model>>();

  constructor(
    private readonly primary: string | undefined,
    fallbacks: readonly LangChainFallback[] | undefined,
  ) {
    for (const f of fallbacks ?? []) this.fallbacks.set(f.provider, f.model);
  }

  /** The model to call on `provider`'s route; `own` is the caller's (the primary route's). */
  async modelFor<M>(provider: string | undefined, own: M): Promise<M> {
    const fallback = provider === this.primary ? undefined : this.fallbacks.get(provider ?? "");
    if (fallback === undefined) return own;
    if (typeof fallback !== "string") return fallback as M;
    let model = this.resolved.get(fallback);
    if (!model) {
      // Made once, on first use: a string names a model for initChatModel, as in modelFallbackMiddleware.
      model = initChatModel(fallback) as Promise<Model>;
      this.resolved.set(fallback, model);
    }
    return (await model) as M;
  }
}

/** The selfheal options a model's settings make: the routes (primary first), time, plans. */
export function routeOptions(o: ModelRouteSettings) {
  const { fallbacks, provider, timeoutMs, deadlineMs, plans } = o;
  const providers =
    provider !== undefined && fallbacks?.length
      ? [provider, ...fallbacks.map((f) => f.provider)]
      : undefined;
  return {
    readOnly: true, // a model call writes nothing; the tools it asks for are guarded themselves
    ...(provider !== undefined && { provider }),
    ...(providers && { providers }),
    ...(timeoutMs !== undefined && { timeoutMs }),
    ...(deadlineMs !== undefined && { deadlineMs }),
    ...(plans !== undefined && { plans }),
  };
}
