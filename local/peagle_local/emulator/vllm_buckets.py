"""vLLM 0.30.0's histogram bucket bounds, for the emulator's stand-in metric lines.

Copied as data from `vllm/v1/metrics/buckets.py` of the vllm 0.30.0 wheel (the
families the latency histograms use in `vllm/v1/metrics/loggers.py`);
`tests/container/test_container_contract.py` compares them with the installed vLLM.
"""

from __future__ import annotations

from typing import Final

TIME_TO_FIRST_TOKEN: Final[tuple[float, ...]] = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
    1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
INTER_TOKEN_LATENCY: Final[tuple[float, ...]] = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75,
    1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
)  # fmt: skip
REQUEST_LATENCY: Final[tuple[float, ...]] = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0,
    30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip

BY_LINE_KEY: Final[dict[str, tuple[float, ...]]] = {
    "ttft_s": TIME_TO_FIRST_TOKEN,
    "itl_s": INTER_TOKEN_LATENCY,
    "e2e_s": REQUEST_LATENCY,
}
"""contract.SERVING_HISTOGRAMS line key -> bounds (time_to_first_token,
inter_token_latency and request_latency families)."""
