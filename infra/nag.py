"""Acknowledging cdk-nag findings, always one finding on one construct, with a reason.

cdk-nag 3 reads CDK's native acknowledgements (`Validations.of(c).acknowledge`), so
the constructs need no cdk-nag import: the rule pack is only loaded where checks run
(tests, or `cdk synth -c peagle:nag=true`). Acknowledging on the narrowest construct
and naming the finding (`AwsSolutions-IAM5[Resource::...]`) keeps any new wildcard
or new resource from being waved through by an old acknowledgement.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import Acknowledgment, Stack, Validations
from constructs import IConstruct


def acknowledge(construct: IConstruct, rule: str, reason: str, finding: str | None = None) -> None:
    """Record that `rule` (optionally one `finding` of it) is accepted on `construct`."""
    if not reason.strip():
        raise ValueError(f"an acknowledgement of {rule} needs a reason")
    rule_id = f"{rule}[{finding}]" if finding else rule
    Validations.of(construct).acknowledge(Acknowledgment(id=rule_id, reason=reason))


def nag_summary(scope: IConstruct, stacks: int) -> str:
    """The line `cdk synth -c peagle:nag=true` ends with, so a clean run says it checked.

    Reached only after a successful synth: cdk-nag stops synthesis on any finding that is
    not acknowledged.
    """
    key = Validations.ACKNOWLEDGED_RULES_METADATA_KEY
    acknowledged = sum(
        len(dict(entry.data))
        for construct in scope.node.find_all()
        for entry in construct.node.metadata
        if entry.type == key
    )
    return (
        f"cdk-nag AwsSolutions: checked {stacks} stack(s), no unacknowledged findings "
        f"({acknowledged} acknowledged, each on one construct with its reason: infra/nag.py)"
    )


def nag_text(stack: Stack, value: str) -> str:
    """How cdk-nag prints a (possibly tokenized) string in a finding id.

    cdk-nag renders `Ref` as `<Name>` and `Fn::GetAtt` as `<Logical.Attr>` inside an
    `Fn::Join`; acknowledgements must use the same text to match one finding only.
    """
    return _render(stack.resolve(value))


def _render(node: Any) -> str:
    if isinstance(node, str):
        return node
    if isinstance(node, dict) and len(node) == 1:
        ((fn, arg),) = node.items()
        if fn == "Ref":
            return f"<{arg}>"
        if fn == "Fn::GetAtt":
            return f"<{arg[0]}.{arg[1]}>"
        if fn == "Fn::Join":
            sep, parts = arg
            return str(sep).join(_render(p) for p in parts)
    raise ValueError(f"cannot render {node!r} as cdk-nag text")
