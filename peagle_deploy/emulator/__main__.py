"""`python -m peagle_deploy.emulator`: serve LocalAWS on loopback until Ctrl-C.

For shell-driven rehearsals: prints `export` lines for the environment, then keeps the
emulated AWS running. Every endpoint gets the scripted lifecycle and stream pacing given
on the command line.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import threading

from peagle_deploy.emulator.chat import StreamSettings
from peagle_deploy.emulator.local import LocalAWS
from peagle_deploy.emulator.moto_ext import EndpointScript


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m peagle_deploy.emulator", description=__doc__)
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--creating-s", type=float, default=2.0, help="seconds in Creating")
    parser.add_argument("--updating-s", type=float, default=2.0, help="seconds in Updating")
    parser.add_argument("--ttft-s", type=float, default=0.05)
    parser.add_argument("--token-delay-s", type=float, default=0.005)
    parser.add_argument("--tokens-per-chunk", type=int, default=1)
    parser.add_argument("--acceptance-rate", type=float, default=None)
    parser.add_argument("--num-speculative-tokens", type=int, default=3)
    args = parser.parse_args(argv)
    aws = LocalAWS(
        port=args.port,
        default_script=EndpointScript(creating_s=args.creating_s, updating_s=args.updating_s),
        stream=StreamSettings(
            ttft_s=args.ttft_s,
            token_delay_s=args.token_delay_s,
            tokens_per_chunk=args.tokens_per_chunk,
        ),
    )
    with aws:
        if args.acceptance_rate is not None:
            aws.set_acceptance_metrics(
                None,
                acceptance_rate=args.acceptance_rate,
                num_speculative_tokens=args.num_speculative_tokens,
            )
        for key, value in aws.env().items():
            print(f"export {key}={value}")
        sys.stdout.flush()
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
