export { VirtualClock } from "./virtual-clock.js";
