"""CDK constructs and stacks for P-EAGLE SageMaker endpoints (one construct per concern).

Modules: encryption (KMS key), role (execution role) over execution_policy (its
statements, no CDK), model (CreateModel custom resource and its provider's statements),
endpoint (PeagleEndpoint), monitoring (alarms, metric filters, dashboard), scaling
(autoscaling), stages (cdk.json context), stack (PeagleStack), deploy_role (a stage's CI
role) over deploy_policy (its statements, no CDK), github_oidc, ci_stack (PeagleCiRoles),
nag (cdk-nag acknowledgements). Every name grant comes from
`peagle_deploy.access.endpoint_grants`. Import the modules directly: `aws_cdk` is only
imported by the ones that need it.
"""
