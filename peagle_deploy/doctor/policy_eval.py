"""IAM's policy language for one request whose context doctor only partly knows.

The doctor asks "may the execution role do ACTION on RESOURCE" before SageMaker does.
Some of what IAM would look at is known (the role's ARN and account, its tags, the
`s3:prefix` of the listing, `kms:ViaService`), the rest is not (the session name
SageMaker picks, `aws:SourceVpce`, `aws:SecureTransport`, the time). So every test here
has three outcomes: True, False, or None ("depends on a value doctor cannot know"), and
the keys behind a None are collected, so that a decision that hinges on them becomes a
warning naming them, never a failure.

What is evaluated (AWS's policy grammar, https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_grammar.html,
and condition operators, .../reference_policies_elements_condition_operators.html):
`Effect`, `Principal` / `NotPrincipal` (AWS principals; service, federated and canonical
principals never name a role session), `Action` / `NotAction` (case-insensitive
wildcards), `Resource` / `NotResource` (wildcards per ARN component; absent in a
resource policy: the resource itself), `Condition` with the String, Arn, Numeric, Date,
Bool, Null, IpAddress and Binary operators, `...IfExists`, `ForAnyValue:` /
`ForAllValues:`, and `${...}` policy variables (Version 2012-10-17 only).

A key absent from the request makes a positive operator false and a negated one true
(`...IfExists`: true; `Null`: as asked); a key whose value is unknown makes the
condition None. Anything outside the grammar raises PolicyError: the doctor warns that
it could not evaluate the document rather than guess.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

Tri = bool | None
"""True, False, or None: depends on a context value doctor cannot know."""

_NEGATED = frozenset(
    {
        "stringnotequals",
        "stringnotequalsignorecase",
        "stringnotlike",
        "arnnotequals",
        "arnnotlike",
        "numericnotequals",
        "datenotequals",
        "notipaddress",
    }
)
_VARIABLE = re.compile(r"\$\{([^}]*)\}")
_ACCOUNT = re.compile(r"^\d{12}$")


class PolicyError(ValueError):
    """A policy document (or part of one) outside the grammar the doctor evaluates."""


def tri_and(values: Iterable[Tri]) -> Tri:
    """False if any is False, else None if any is None, else True."""
    unknown = False
    for value in values:
        if value is False:
            return False
        if value is None:
            unknown = True
    return None if unknown else True


def tri_or(values: Iterable[Tri]) -> Tri:
    """True if any is True, else None if any is None, else False."""
    unknown = False
    for value in values:
        if value is True:
            return True
        if value is None:
            unknown = True
    return None if unknown else False


def tri_not(value: Tri) -> Tri:
    return None if value is None else not value


@dataclass(frozen=True)
class Principal:
    """Who makes the request: a session of an IAM role (SageMaker assumes the role)."""

    account: str
    role_arn: str | None
    """`arn:<partition>:iam::<account>:role/<path/name>`; None before the role exists
    (a role a CloudFormation stack will create, whose name is generated)."""

    @property
    def role_name(self) -> str | None:
        return self.role_arn.rsplit("/", 1)[-1] if self.role_arn else None


@dataclass(frozen=True)
class Request:
    """One request: action, resource, principal and what is known of its context."""

    action: str
    resource: str
    principal: Principal
    context: Mapping[str, Sequence[str]] = field(default_factory=dict)
    """Context keys whose values are known (names compared case-insensitively)."""
    absent: frozenset[str] = frozenset()
    """Keys known to be absent from the request (lowercase)."""
    absent_prefixes: tuple[str, ...] = ()
    """Key prefixes whose every key not in `context` is absent (e.g. `aws:principaltag/`
    when the role's tags were read)."""

    def lookup(self, key: str) -> list[str] | Literal[False] | None:
        """The key's values; False when known absent; None when unknown."""
        lowered = key.lower()
        for name, values in self.context.items():
            if name.lower() == lowered:
                return [str(v) for v in values]
        if lowered in self.absent or any(lowered.startswith(p) for p in self.absent_prefixes):
            return False
        return None


@dataclass
class Outcome:
    """What one policy document says about a request.

    Resource policies grant either the principal itself (`allow_direct`: the role's
    ARN, or a session of it), everyone (`allow_anyone`: `"*"`), or its account
    (`allow_account`: `"<account>"` or `arn:...:root`, which hands the decision to the
    account's IAM policies). Identity policies have no principal: their grants count as
    `allow_direct`.
    """

    allow_direct: Tri = False
    allow_anyone: Tri = False
    allow_account: Tri = False
    deny: Tri = False
    unknown_keys: set[str] = field(default_factory=set)

    @property
    def allow(self) -> Tri:
        return tri_or([self.allow_direct, self.allow_anyone, self.allow_account])


# --- wildcards and ARNs ------------------------------------------------------------------


def _wildcard(pattern: str, value: str, *, case_sensitive: bool) -> bool:
    """`*`: any run of characters; `?`: one character; nothing else is special."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    flags = re.DOTALL if case_sensitive else re.DOTALL | re.IGNORECASE
    return re.fullmatch(regex, value, flags) is not None


def _arn_like(pattern: str, value: str) -> bool:
    """ArnLike and Resource matching: each of the six colon-separated parts on its own."""
    if pattern == "*":
        return True
    want = pattern.split(":", 5)
    have = value.split(":", 5)
    if len(want) != 6 or len(have) != 6:
        return _wildcard(pattern, value, case_sensitive=True)
    return all(_wildcard(w, h, case_sensitive=True) for w, h in zip(want, have, strict=True))


def _as_list(value: Any, what: str) -> list[Any]:
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    for item in items:
        if not isinstance(item, (str, int, float, bool)):
            raise PolicyError(f"{what}: {item!r} is not a string")
    return items


def _substitute(text: str, request: Request, versioned: bool) -> str | None:
    """`${key}` replaced by the key's one known value; None when one is not known."""
    if not versioned or "${" not in text:
        return text
    unknown = False

    def value(match: re.Match[str]) -> str:
        nonlocal unknown
        name = match.group(1)
        if name in ("*", "?", "$"):
            raise PolicyError(f"the policy variable ${{{name}}} (a literal character)")
        default = None
        if "," in name:  # ${key, 'default'}
            name, _, rest = name.partition(",")
            default = rest.strip().strip("'")
        found = request.lookup(name.strip())
        if isinstance(found, list) and len(found) == 1:
            return found[0]
        if found is False and default is not None:
            return default
        unknown = True
        return ""

    replaced = _VARIABLE.sub(value, text)
    return None if unknown else replaced


# --- principals --------------------------------------------------------------------------


@dataclass(frozen=True)
class _PrincipalMatch:
    direct: Tri = False
    anyone: bool = False
    account: bool = False


def _aws_principal(entry: str, who: Principal) -> _PrincipalMatch:
    if entry == "*":
        return _PrincipalMatch(anyone=True)
    if _ACCOUNT.match(entry):
        return _PrincipalMatch(account=entry == who.account)
    parts = entry.split(":", 5)
    if len(parts) != 6 or parts[0] != "arn":
        return _PrincipalMatch()  # a unique id (AROA...): a role since deleted, not ours
    service, account, resource = parts[2], parts[4], parts[5]
    if account != who.account:
        return _PrincipalMatch()
    if service == "iam" and resource == "root":
        return _PrincipalMatch(account=True)
    if service == "iam" and resource.startswith("role/"):
        if who.role_arn is None:
            return _PrincipalMatch(direct=None)  # a role of this account: maybe the new one
        return _PrincipalMatch(direct=entry == who.role_arn)
    if service == "sts" and resource.startswith("assumed-role/"):
        name = resource.split("/")[1] if resource.count("/") >= 2 else ""
        if who.role_name is not None and name != who.role_name:
            return _PrincipalMatch()
        return _PrincipalMatch(direct=None)  # the session name SageMaker uses is not known
    return _PrincipalMatch()


SESSION_NAME = "the role session's name"
"""What an `assumed-role/<role>/<session>` principal depends on (SageMaker picks it)."""


def _principal_entries(value: Any, what: str) -> list[tuple[str, str]]:
    """(kind, value) pairs of a Principal / NotPrincipal element."""
    if value == "*":
        return [("AWS", "*")]
    if not isinstance(value, Mapping):
        raise PolicyError(f'{what}: {value!r} is neither "*" nor a map')
    out = []
    for kind, entries in value.items():
        if kind not in ("AWS", "Service", "Federated", "CanonicalUser"):
            raise PolicyError(f"{what}: unknown principal type {kind!r}")
        out += [(kind, str(e)) for e in _as_list(entries, what)]
    return out


def _match_principal(statement: Mapping[str, Any], who: Principal) -> _PrincipalMatch | Tri:
    """How a resource-policy statement's principal names the request's principal."""
    if "Principal" in statement:
        direct: list[Tri] = []
        anyone = account = False
        for kind, entry in _principal_entries(statement["Principal"], "Principal"):
            if kind != "AWS":
                continue  # services, web identities and canonical users are not the role
            found = _aws_principal(entry, who)
            direct.append(found.direct)
            anyone = anyone or found.anyone
            account = account or found.account
        return _PrincipalMatch(direct=tri_or(direct), anyone=anyone, account=account)
    if "NotPrincipal" in statement:
        entries = _principal_entries(statement["NotPrincipal"], "NotPrincipal")
        related = [
            e
            for kind, e in entries
            if kind == "AWS" and (e in ("*", who.account) or e.split(":", 5)[4:5] == [who.account])
        ]
        # Whether naming the role, its session or its account exempts the session is not
        # settled by the documentation doctor cites: such a statement is not decided.
        return None if related else _PrincipalMatch(anyone=True)
    raise PolicyError("a resource-policy statement has neither Principal nor NotPrincipal")


# --- conditions ---------------------------------------------------------------------------


def _parse_number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise PolicyError(f"{text!r} is not a number") from None


def _parse_date(text: str) -> datetime:
    try:
        if re.fullmatch(r"\d+", text):
            return datetime.fromtimestamp(int(text), tz=UTC)
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except (ValueError, OverflowError, OSError):
        raise PolicyError(f"{text!r} is not a date") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _compare(base: str, expected: str, actual: str) -> bool:
    """The positive form of `base` (a lowercase operator without Not/IfExists)."""
    if base == "stringequals":
        return actual == expected
    if base == "stringequalsignorecase":
        return actual.lower() == expected.lower()
    if base == "stringlike":
        return _wildcard(expected, actual, case_sensitive=True)
    if base == "arnequals":
        return actual == expected
    if base == "arnlike":
        return _arn_like(expected, actual)
    if base.startswith("numeric"):
        a, e = _parse_number(actual), _parse_number(expected)
        return {
            "numericequals": a == e,
            "numericlessthan": a < e,
            "numericlessthanequals": a <= e,
            "numericgreaterthan": a > e,
            "numericgreaterthanequals": a >= e,
        }[base]
    if base.startswith("date"):
        a_d, e_d = _parse_date(actual), _parse_date(expected)
        return {
            "dateequals": a_d == e_d,
            "datelessthan": a_d < e_d,
            "datelessthanequals": a_d <= e_d,
            "dategreaterthan": a_d > e_d,
            "dategreaterthanequals": a_d >= e_d,
        }[base]
    if base == "bool":
        return actual.lower() == expected.lower()
    if base == "ipaddress":
        try:
            return ipaddress.ip_address(actual) in ipaddress.ip_network(expected, strict=False)
        except ValueError:
            return False
    if base == "binaryequals":
        return actual == expected
    raise PolicyError(f"condition operator {base!r}")


_BASES = frozenset(
    {
        "stringequals",
        "stringequalsignorecase",
        "stringlike",
        "arnequals",
        "arnlike",
        "numericequals",
        "numericlessthan",
        "numericlessthanequals",
        "numericgreaterthan",
        "numericgreaterthanequals",
        "dateequals",
        "datelessthan",
        "datelessthanequals",
        "dategreaterthan",
        "dategreaterthanequals",
        "bool",
        "ipaddress",
        "binaryequals",
        "null",
    }
)


def _base_operator(operator: str) -> tuple[str, bool]:
    """(positive base, negated) of an operator name (lowercase, IfExists removed)."""
    if operator in _NEGATED:
        base = operator.replace("not", "", 1)
        if operator == "notipaddress":
            base = "ipaddress"
        return base, True
    return operator, False


def _condition_key(
    raw_operator: str, key: str, expected: Any, request: Request, versioned: bool
) -> Tri:
    qualifier, _, operator = raw_operator.rpartition(":")
    qualifier = qualifier.lower()
    if qualifier not in ("", "foranyvalue", "forallvalues"):
        raise PolicyError(f"condition set operator {qualifier!r}")
    operator = operator.lower()
    if_exists = operator.endswith("ifexists") and operator != "null"
    operator = operator.removesuffix("ifexists")
    base, negated = _base_operator(operator)
    if base not in _BASES:
        raise PolicyError(f"condition operator {raw_operator!r}")
    wanted = [str(v).lower() if isinstance(v, bool) else str(v) for v in _as_list(expected, key)]
    found = request.lookup(key)
    if base == "null":
        if found is None:
            return None
        is_null = found is False
        return any((w.lower() == "true") == is_null for w in wanted)
    if found is None:
        return None
    if found is False:  # absent from the request
        if if_exists or qualifier == "forallvalues":
            return True
        if qualifier == "foranyvalue":
            return False
        return negated
    substituted = [_substitute(w, request, versioned) for w in wanted]
    if any(s is None for s in substituted):
        return None
    expected_values = [s for s in substituted if s is not None]

    def one(actual: str) -> bool:
        hit = any(_compare(base, e, actual) for e in expected_values)
        return not hit if negated else hit

    if qualifier == "forallvalues":
        return all(one(a) for a in found)
    return any(one(a) for a in found)


def _conditions(condition: Any, request: Request, versioned: bool, unknown: set[str]) -> Tri:
    if condition is None:
        return True
    if not isinstance(condition, Mapping):
        raise PolicyError("Condition is not a map")
    results: list[Tri] = []
    for operator, pairs in condition.items():
        if not isinstance(pairs, Mapping):
            raise PolicyError(f"condition {operator!r} is not a key/value map")
        for key, expected in pairs.items():
            result = _condition_key(str(operator), str(key), expected, request, versioned)
            if result is None:
                unknown.add(str(key))
            results.append(result)
    return tri_and(results)


# --- statements and documents --------------------------------------------------------------


def _action_match(statement: Mapping[str, Any], action: str) -> bool:
    if "NotAction" in statement:
        patterns = _as_list(statement["NotAction"], "NotAction")
        return not any(_wildcard(str(p), action, case_sensitive=False) for p in patterns)
    if "Action" not in statement:
        raise PolicyError("a statement has neither Action nor NotAction")
    patterns = _as_list(statement["Action"], "Action")
    return any(_wildcard(str(p), action, case_sensitive=False) for p in patterns)


def _resource_match(
    statement: Mapping[str, Any], request: Request, versioned: bool, *, implicit: bool
) -> Tri:
    if "NotResource" in statement:
        key, negate = "NotResource", True
    elif "Resource" in statement:
        key, negate = "Resource", False
    elif implicit:
        return True  # a resource policy's statement applies to the resource it is on
    else:
        raise PolicyError("a statement has neither Resource nor NotResource")
    hits: list[Tri] = []
    for pattern in _as_list(statement[key], key):
        text = _substitute(str(pattern), request, versioned)
        hits.append(None if text is None else _arn_like(text, request.resource))
    hit = tri_or(hits)
    return tri_not(hit) if negate else hit


def who_is_known(request: Request) -> bool:
    return request.principal.role_arn is not None


def evaluate(document: Any, request: Request, *, resource_policy: bool) -> Outcome:
    """What `document` (an identity or a resource policy) says about `request`."""
    if not isinstance(document, Mapping):
        raise PolicyError("the policy is not a JSON object")
    versioned = document.get("Version") == "2012-10-17"
    statements = document.get("Statement")
    if isinstance(statements, Mapping):
        statements = [statements]
    if not isinstance(statements, list):
        raise PolicyError("Statement is neither an object nor a list")
    outcome = Outcome()
    direct: list[Tri] = []
    anyone: list[Tri] = []
    account: list[Tri] = []
    deny: list[Tri] = []
    for statement in statements:
        if not isinstance(statement, Mapping):
            raise PolicyError("a statement is not an object")
        effect = statement.get("Effect")
        if effect not in ("Allow", "Deny"):
            raise PolicyError(f"Effect {effect!r}")
        if resource_policy:
            principal = _match_principal(statement, request.principal)
        elif "Principal" in statement or "NotPrincipal" in statement:
            raise PolicyError("an identity policy statement names a principal")
        else:
            principal = _PrincipalMatch(direct=True)
        if principal is False or not _action_match(statement, request.action):
            continue
        unknown: set[str] = set()
        applies = tri_and(
            [
                _resource_match(statement, request, versioned, implicit=resource_policy),
                _conditions(statement.get("Condition"), request, versioned, unknown),
            ]
        )
        if applies is False:
            continue
        if applies is None:
            outcome.unknown_keys |= unknown
        if principal is None:  # a NotPrincipal naming the role's account: not decided
            outcome.unknown_keys.add("NotPrincipal")
            (deny if effect == "Deny" else direct).append(None)
            continue
        assert isinstance(principal, _PrincipalMatch)
        if principal.direct is None:
            outcome.unknown_keys.add(SESSION_NAME if who_is_known(request) else "the role's ARN")
        if effect == "Deny":
            # A deny applies to the principal however the statement names it.
            named = tri_or([principal.direct, principal.anyone, principal.account])
            deny.append(tri_and([named, applies]))
            continue
        direct.append(tri_and([principal.direct, applies]))
        anyone.append(applies if principal.anyone else False)
        account.append(applies if principal.account else False)
    outcome.allow_direct = tri_or(direct)
    outcome.allow_anyone = tri_or(anyone)
    outcome.allow_account = tri_or(account)
    outcome.deny = tri_or(deny)
    return outcome
