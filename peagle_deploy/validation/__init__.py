"""The project's own checks, before any AWS call, one module per concern.

botocore validates required fields and minimums client-side but not enums, maxima or
anything that needs to know the instance, the model or the engine; SageMaker would only
refuse those minutes into a deployment (or start a container that cannot work). Every
check raises InputError naming the field and what is allowed, or returns PlanWarnings.

- aws_shapes: names, URIs, ARNs, tags and environment limits of the SageMaker API
- fit: instance type, tensor parallelism, GPU memory
- speculative: speculative-decoding setup against the drafter
- engine: the serving image's vLLM against what the plan renders, region, host AMI
- variant: production-variant fields against the instance
- rollout: blue/green rollout and its alarms
- network: network isolation and VPC
- cloudformation: what the CDK path cannot express
- secrets: credentials in the model environment, and their redaction for display
"""
