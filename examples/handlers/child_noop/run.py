"""The no-op handler: read the job on stdin, sleep emitting PROGRESS on stderr, report on stdout."""

import json
import sys
import time

job = json.loads(sys.stdin.readline())
seconds = float(job["params"]["seconds"])
steps = 10
for step in range(steps + 1):
    print(f"PROGRESS:{step / steps:.2f} sleeping", file=sys.stderr, flush=True)
    if step < steps:
        time.sleep(seconds / steps)
print(json.dumps({"slept_s": seconds, "entities": [], "relations": [], "notes": ""}))
