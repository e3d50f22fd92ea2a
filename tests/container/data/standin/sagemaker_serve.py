"""Stand-in for the AWS image's /usr/local/bin/sagemaker_serve.py (NOT AWS's code).

The AWS vLLM SageMaker image ships a route middleware at that path and starts vLLM with
`--middleware sagemaker_serve.SageMakerRouteMiddleware`; peagle-serve does the same when
the file exists. This pass-through class only lets the stand-in server import the name.
"""


class SageMakerRouteMiddleware:
    def __init__(self, app: object) -> None:
        self.app = app
