"""`python -m peagle_local.emulator`: serve LocalAWS on loopback until Ctrl-C.

The same server as `peagle emulator start` (emulator.shell.serve), with every pacing
knob on the command line: prints `export` lines for another shell (a free port and an
access key, new on every start), then keeps the emulated AWS running. Every endpoint
gets the scripted lifecycle and stream pacing given.
"""

from __future__ import annotations

import argparse
import contextlib
import sys

from peagle_deploy.errors import PeagleError
from peagle_local.emulator.chat import StreamSettings
from peagle_local.emulator.shell import ServeSettings, serve


def _say(line: str) -> None:
    print(line, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m peagle_local.emulator", description=__doc__)
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--region", default="us-east-1")
    parser.add_argument("--creating-s", type=float, default=2.0, help="seconds in Creating")
    parser.add_argument("--updating-s", type=float, default=2.0, help="seconds in Updating")
    parser.add_argument("--ttft-s", type=float, default=0.05)
    parser.add_argument("--token-delay-s", type=float, default=0.005)
    parser.add_argument("--tokens-per-chunk", type=int, default=1)
    parser.add_argument("--acceptance-rate", type=float, default=None)
    parser.add_argument("--num-speculative-tokens", type=int, default=3)
    args = parser.parse_args(argv)
    try:
        settings = ServeSettings(
            port=args.port,
            region=args.region,
            creating_s=args.creating_s,
            updating_s=args.updating_s,
            stream=StreamSettings(
                ttft_s=args.ttft_s,
                token_delay_s=args.token_delay_s,
                tokens_per_chunk=args.tokens_per_chunk,
            ),
            acceptance_rate=args.acceptance_rate,
            num_speculative_tokens=args.num_speculative_tokens,
        )
        with contextlib.suppress(KeyboardInterrupt):
            serve(settings, _say)
    except PeagleError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
