"""A tiny agent loop supervised by ``selfheal watch``, using selfheal_agent.py.

Run it from the repository's root (or anywhere, with the path to this file)::

    npx selfheal watch --state-dir .selfheal -- python3 examples/python/example_agent.py

It does 10 steps of pretend work, beats after each and snapshots its notes; restarted or rotated,
it resumes from its snapshot. A nudge is printed; a context reset keeps only the last 3 notes.
"""

import sys
import threading
import time
from typing import Dict, List

from selfheal_agent import InboxMessage, SelfhealConfigError, SnapshotError, Supervised

STEPS = 10
STEP_SECONDS = 0.5


def main() -> int:
    try:
        run = Supervised()
    except SelfhealConfigError as error:
        print(f"{error}\nrun me as: npx selfheal watch --state-dir DIR -- python3 {sys.argv[0]}")
        return 2
    try:
        state: Dict[str, List[str]] = run.restore(default={"notes": []})
    except SnapshotError as error:
        print(f"cannot resume: {error}", file=sys.stderr)
        return 1  # never start afresh over a corrupt snapshot: a person looks at it
    lock = threading.Lock()  # the handlers run on selfheal_agent's thread

    def on_nudge(message: InboxMessage) -> None:
        print(f"nudged: {message.get('text', '')}", flush=True)

    def on_context_reset(message: InboxMessage) -> None:
        with lock:  # shrink the context and make it durable before the acknowledgement
            state["notes"] = state["notes"][-3:]
            run.snapshot(state)
        print("context reset: kept the last 3 notes", flush=True)

    run.on_nudge(on_nudge)
    run.on_context_reset(on_context_reset)
    run.start()

    step = run.restored_step or 0
    print(f"generation {run.generation}: starting from step {step}", flush=True)
    run.beat("planning", step)
    while step < STEPS:
        time.sleep(STEP_SECONDS)  # one step's work: a tool call, an LLM call...
        with lock:
            state["notes"].append(f"step {step + 1} done")
            tokens = 500 * len(state["notes"])
            step = run.advance("tool_call", context_tokens=tokens, last_tool="search")
            run.snapshot(state)
    run.close()
    print(f"done: {len(state['notes'])} notes", flush=True)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # Ctrl-C: selfheal watch passed SIGINT on
        sys.exit(130)
