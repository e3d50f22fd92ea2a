"""Promotion between stages through performance gates (`peagle promote`).

`gates` holds the gates-file models, `evaluate` the pure pass/fail rules, `report` the
table/JSON rendering, and `runner` the promotion itself (manifest -> gates against the
source endpoint -> deploy or write the target spec -> record).
"""
