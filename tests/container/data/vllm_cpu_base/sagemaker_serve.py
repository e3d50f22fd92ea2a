"""Stand-in for the AWS image's /usr/local/bin/sagemaker_serve.py (NOT AWS's code).

vLLM is started with `--middleware sagemaker_serve.SageMakerRouteMiddleware` when this
file exists, as in the AWS image; this one is a pass-through ASGI middleware, so the
real vLLM loads and runs it without routing anything.
"""

from typing import Any


class SageMakerRouteMiddleware:
    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)
