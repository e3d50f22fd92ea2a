"""peagle-serve: the entrypoint of the bundled vLLM SageMaker container."""
