"""Local stand-ins for AWS and the rehearsal that runs on them, beside the product.

`peagle_local.emulator` (moto plus what moto lacks: GPU instance types, endpoint
lifecycles, streamed chat answers, Service Quotas, the IAM simulator) and
`peagle_local.demo` (`peagle demo`) serve development, tests and trials; a deployment
never runs them. They import `peagle_deploy`; `peagle_deploy` never imports them: the
`peagle` CLI adds their commands through the `peagle.commands` entry point.
"""
