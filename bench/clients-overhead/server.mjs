// The fake provider of bench/clients-overhead.ts in a process of its own, so that the bench's
// process does only the clients' work: it says where it listens, answers "count" with the
// requests it got, and closes on "close".
import process from "node:process";
import { startFakeProvider } from "../../dist/testing/index.js";

const provider = await startFakeProvider({ tokenIntervalMs: 0, reply: process.argv[2] });
process.send({ origin: provider.origin });
process.on("message", (message) => {
  if (message === "count") {
    process.send({ requests: provider.requests });
    return;
  }
  void provider.close().then(() => {
    process.disconnect();
  });
});
