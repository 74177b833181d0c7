export { VirtualClock } from "./virtual-clock.js";
export { FailureInjector } from "./failure-injector.js";
export type { Decision, FailureInjectorOptions, Injection, Trigger } from "./failure-injector.js";
export { FAULT_KINDS, InjectedApiError, httpFault, thrownFault } from "./faults.js";
export type { ApiErrorBody, FaultKind, FaultOptions, HttpFault } from "./faults.js";
export { startFakeProvider } from "./fake-provider.js";
export type { ApiCounts, FakeProvider, FakeProviderOptions } from "./fake-provider.js";
export type { WireApiName } from "./wire/types.js";
export { seededRandom } from "./random.js";
