"""Live experiments: a candidate's speculative settings against the incumbent's, on the
endpoint's own traffic, as a shadow or a weighted production variant (docs/experiments.md).

`stats` holds the decision rule, `observations` and `analysis` turn what the platform
reports into per-variant figures and a decision.
"""
