"""Live experiments: a candidate's speculative settings against the incumbent's, on the
endpoint's own traffic, as a shadow or a weighted production variant (docs/experiments.md).

`observations` holds the analysis's input (per-variant samples) and the figures made of
it, `stats` the decision rule and the guardrails' tests, `guardrails` the guardrails,
`analysis` the one pure function from samples to a decision, and `design` the set-ups
the rule is valid for (refused otherwise, before any AWS call).
"""
