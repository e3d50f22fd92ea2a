"""CDK constructs and stacks for P-EAGLE SageMaker endpoints (one construct per concern).

Modules: access (IAM resources from the plan, no CDK), encryption (KMS key), role
(execution role), model (CreateModel custom resource), endpoint (PeagleEndpoint),
monitoring (alarms, metric filters, dashboard), scaling (autoscaling), stages
(cdk.json context), stack (PeagleStack), nag (cdk-nag acknowledgements).
Import the modules directly: `aws_cdk` is only imported by the ones that need it.
"""
