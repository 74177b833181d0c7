import { NEXT, type Strategy } from "../strategy.js";

/** Puts the agent in read-only mode: writes are refused until health recovers; reads go on. */
export const degradeToReadOnly: Strategy = {
  name: "degrade_to_readonly",
  reexecutes: false,
  sameRoute: false,
  shared: true,
  run(run) {
    run.degrade();
    return Promise.resolve(NEXT);
  },
};
