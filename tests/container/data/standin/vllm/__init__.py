"""NOT vLLM: a stand-in installed into the container test's stand-in base image only.

It answers the way vLLM's OpenAI server answers SageMaker (/ping, /invocations,
/metrics) so that the project's image can be run end to end without a GPU; see
vllm/entrypoints/openai/api_server.py and tests/container/test_container_image.py.
"""

__version__ = "0.0.0+peagle-standin"
