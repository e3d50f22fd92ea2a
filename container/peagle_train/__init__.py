"""The peagle-deploy training driver: a P-EAGLE drafter trained with vllm-project/speculators
inside a SageMaker training job (regenerate -> extract -> train -> export -> validate).

`peagle_train.contract` is standard library only and shared with the SDK; the driver's
other modules import torch, vLLM and speculators lazily, inside the training image.
"""
