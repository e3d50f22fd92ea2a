"""Stand-in for the `vllm` executable in the entrypoint tests (PEAGLE_VLLM_COMMAND).

Records its argv, a few environment variables and its pid in FAKE_VLLM_STATE (JSON),
starts a grandchild (like vLLM's engine core process), then behaves per FAKE_VLLM_MODE:
  exit:N  -> exit with code N at once
  term:N  -> wait; on SIGTERM record it and exit with code N
  ignore  -> ignore SIGTERM and keep running (the supervisor must kill it)
"""

import json
import os
import signal
import subprocess
import sys
import time

state_path = os.environ["FAKE_VLLM_STATE"]
mode = os.environ.get("FAKE_VLLM_MODE", "exit:0")
grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
state = {
    "argv": sys.argv[1:],
    "pid": os.getpid(),
    "grandchild": grandchild.pid,
    "VLLM_USE_V2_MODEL_RUNNER": os.environ.get("VLLM_USE_V2_MODEL_RUNNER"),
    "signals": [],
}


def save() -> None:
    tmp = state_path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(state, f)
    os.replace(tmp, state_path)


kind, _, arg = mode.partition(":")
if kind == "exit":
    save()
    sys.exit(int(arg))
if kind == "term":

    def on_term(signum: int, _frame: object) -> None:
        state["signals"].append(signum)
        save()
        sys.exit(int(arg))

    signal.signal(signal.SIGTERM, on_term)
elif kind == "ignore":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
save()
while True:
    time.sleep(0.1)
