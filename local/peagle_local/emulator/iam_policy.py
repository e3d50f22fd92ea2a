"""A small IAM identity-policy evaluator: the test double behind the emulator's
SimulatePrincipalPolicy (moto 5.2.5 does not implement that API).

It answers "may this principal call ACTION on RESOURCE" the way IAM's policy simulator
does for identity-based policies, for the subset of the policy language a SageMaker
execution role uses:

- `Effect` Allow / Deny; an explicit Deny wins, nothing matching is an implicit deny;
- `Action` / `NotAction` (case-insensitive) and `Resource` / `NotResource`, with the
  `*` and `?` wildcards;
- `Condition` with the String*, Arn* and Bool operators (and their `IfExists` forms),
  matched against the request's context entries. A key the context lacks makes a
  positive operator false and a negated one true, as in IAM; keys that were needed but
  missing are reported like the simulator's `MissingContextValues`.
- a permissions boundary, when given, must allow the call as well.

Resource-based policies (bucket and key policies), SCPs and session policies are out of
scope, as they are for `iam:SimulatePrincipalPolicy` without extra inputs. Anything else
(an unknown condition operator, `ForAllValues:`) raises UnsupportedPolicyError: the double
refuses rather than guessing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Decision = Literal["allowed", "explicitDeny", "implicitDeny"]

_STRING_OPERATORS = {
    "StringEquals": (False, False, True),  # (negated, wildcard, case-sensitive)
    "StringNotEquals": (True, False, True),
    "StringEqualsIgnoreCase": (False, False, False),
    "StringNotEqualsIgnoreCase": (True, False, False),
    "StringLike": (False, True, True),
    "StringNotLike": (True, True, True),
    "ArnEquals": (False, False, True),
    "ArnNotEquals": (True, False, True),
    "ArnLike": (False, True, True),
    "ArnNotLike": (True, True, True),
}


class UnsupportedPolicyError(ValueError):
    """A policy construct this test double does not evaluate."""


@dataclass(frozen=True)
class NamedPolicy:
    """One policy document and where it comes from (for MatchedStatements)."""

    policy_id: str
    policy_type: str
    """`IAM Policy` (managed), `role` (inline), as the simulator labels them."""
    document: Mapping[str, Any]


@dataclass
class Evaluation:
    decision: Decision
    matched: list[NamedPolicy] = field(default_factory=list)
    missing_context: list[str] = field(default_factory=list)


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def _wildcard(pattern: str, value: str, *, case_sensitive: bool = True) -> bool:
    """IAM's matching: `*` any run of characters, `?` one character, nothing else special."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    flags = re.DOTALL if case_sensitive else re.DOTALL | re.IGNORECASE
    return re.fullmatch(regex, value, flags) is not None


def _matches_any(patterns: Iterable[str], value: str, *, case_sensitive: bool) -> bool:
    return any(_wildcard(str(p), value, case_sensitive=case_sensitive) for p in patterns)


def _string_match(expected: str, actual: str, *, wildcard: bool, case_sensitive: bool) -> bool:
    if wildcard:
        return _wildcard(expected, actual, case_sensitive=case_sensitive)
    return actual == expected if case_sensitive else actual.lower() == expected.lower()


def _context_lookup(context: Mapping[str, Sequence[str]], key: str) -> list[str] | None:
    lowered = key.lower()
    for name, values in context.items():
        if name.lower() == lowered:
            return [str(v) for v in values]
    return None


def _condition_holds(
    condition: Mapping[str, Any], context: Mapping[str, Sequence[str]], missing: list[str]
) -> bool:
    for raw_operator, pairs in condition.items():
        if ":" in raw_operator:
            raise UnsupportedPolicyError(f"condition set operator {raw_operator!r}")
        if_exists = raw_operator.endswith("IfExists")
        operator = raw_operator.removesuffix("IfExists")
        if not isinstance(pairs, Mapping):
            raise UnsupportedPolicyError(f"condition {raw_operator!r} is not a key/value map")
        for key, expected in pairs.items():
            actual = _context_lookup(context, key)
            if actual is None:
                if if_exists:
                    continue
                missing.append(key)
                negated = operator in _STRING_OPERATORS and _STRING_OPERATORS[operator][0]
                if not negated:
                    return False
                continue
            wanted = [str(v) for v in _as_list(expected)]
            if operator == "Bool":
                ok = any(a.lower() == w.lower() for a in actual for w in wanted)
            elif operator in _STRING_OPERATORS:
                negated, wildcard, case_sensitive = _STRING_OPERATORS[operator]
                hit = any(
                    _string_match(w, a, wildcard=wildcard, case_sensitive=case_sensitive)
                    for a in actual
                    for w in wanted
                )
                ok = not hit if negated else hit
            else:
                raise UnsupportedPolicyError(f"condition operator {raw_operator!r}")
            if not ok:
                return False
    return True


def _statement_applies(
    statement: Mapping[str, Any],
    action: str,
    resource: str,
    context: Mapping[str, Sequence[str]],
    missing: list[str],
) -> bool:
    if "NotAction" in statement:
        if _matches_any(_as_list(statement["NotAction"]), action, case_sensitive=False):
            return False
    elif not _matches_any(_as_list(statement.get("Action")), action, case_sensitive=False):
        return False
    if "NotResource" in statement:
        if _matches_any(_as_list(statement["NotResource"]), resource, case_sensitive=True):
            return False
    elif not _matches_any(_as_list(statement.get("Resource")), resource, case_sensitive=True):
        return False
    condition = statement.get("Condition")
    return not condition or _condition_holds(condition, context, missing)


def _evaluate_set(
    policies: Sequence[NamedPolicy],
    action: str,
    resource: str,
    context: Mapping[str, Sequence[str]],
    missing: list[str],
) -> Evaluation:
    allowed: list[NamedPolicy] = []
    denied: list[NamedPolicy] = []
    for policy in policies:
        for statement in _as_list(policy.document.get("Statement")):
            if not isinstance(statement, Mapping):
                raise UnsupportedPolicyError(f"statement in {policy.policy_id} is not an object")
            if not _statement_applies(statement, action, resource, context, missing):
                continue
            effect = statement.get("Effect")
            if effect == "Deny":
                denied.append(policy)
            elif effect == "Allow":
                allowed.append(policy)
            else:
                raise UnsupportedPolicyError(f"Effect {effect!r} in {policy.policy_id}")
    if denied:
        return Evaluation("explicitDeny", denied)
    if allowed:
        return Evaluation("allowed", allowed)
    return Evaluation("implicitDeny")


def evaluate(
    policies: Sequence[NamedPolicy],
    action: str,
    resource: str = "*",
    context: Mapping[str, Sequence[str]] | None = None,
    boundary: Sequence[NamedPolicy] | None = None,
) -> Evaluation:
    """The simulator's decision for one action on one resource."""
    ctx = context or {}
    missing: list[str] = []
    result = _evaluate_set(policies, action, resource, ctx, missing)
    if result.decision == "allowed" and boundary is not None:
        limit = _evaluate_set(boundary, action, resource, ctx, missing)
        if limit.decision != "allowed":
            result = Evaluation(
                "explicitDeny" if limit.decision == "explicitDeny" else "implicitDeny",
                limit.matched,
            )
    result.missing_context = sorted(set(missing))
    return result
