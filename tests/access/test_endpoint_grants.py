"""The grants of an endpoint's roles, derived from its identity once; when two endpoints'
grants could name one resource (issue 29, High)."""

from __future__ import annotations

import fnmatch
import itertools
import random

import pytest

from peagle_deploy.access import endpoint_grants, grants_overlap, patterns_intersect
from peagle_deploy.naming import derived_grant, derived_head, derived_name

SHARED_53 = "peagle-" + "a-custom-model-name-of-forty-six-characters-x1"
"""53 characters: `custom.name` of 46 characters makes default names share them."""


def _witness_exists(a: str, b: str, alphabet: str, longest: int) -> bool:
    """Brute force: some name over `alphabet` up to `longest` characters matches both."""
    for n in range(longest + 1):
        for chars in itertools.product(alphabet, repeat=n):
            name = "".join(chars)
            if fnmatch.fnmatchcase(name, a) and fnmatch.fnmatchcase(name, b):
                return True
    return False


def test_pattern_intersection_agrees_with_brute_force() -> None:
    rng = random.Random(29)
    symbols = "ab*?"
    for _ in range(400):
        a = "".join(rng.choice(symbols) for _ in range(rng.randint(0, 4)))
        b = "".join(rng.choice(symbols) for _ in range(rng.randint(0, 4)))
        # `*` and `?` in a witness stand for any character; "abc" covers what differs
        assert patterns_intersect(a, b) == _witness_exists(a, b, "abc", 6), (a, b)


def test_pattern_intersection_is_case_insensitive() -> None:
    assert patterns_intersect("model/ABC-m????????", "model/abc-m0123abcd")


def test_every_grant_comes_from_the_identity() -> None:
    grants = endpoint_grants(SHARED_53 + "-prod")
    head = derived_head(SHARED_53 + "-prod")
    assert grants.models.resource == f"model/{derived_grant(SHARED_53 + '-prod', 'm')}"
    assert grants.models.resource == f"model/{head}-m????????"
    assert grants.configs.resource == f"endpoint-config/{head}-c????????"
    assert grants.endpoint.arn("aws", "us-east-1", "123456789012") == (
        f"arn:aws:sagemaker:us-east-1:123456789012:endpoint/{SHARED_53}-prod"
    )
    assert grants.log_streams.resource == (f"log-group:/aws/sagemaker/Endpoints/{SHARED_53}-prod:*")


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (f"{SHARED_53}-dev", f"{SHARED_53}-prod"),  # the finding: one 53-character head
        ("e" * 62 + "1", "e" * 62 + "2"),  # equal but for the last character
        ("peagle-gpt-oss-20b-dev", "peagle-gpt-oss-20b-prod"),  # the defaults
        ("peagle-x-dev", "peagle-x-dev-2"),  # one a prefix of the other
        ("e" * 53, "e" * 54),  # either side of the cut
    ],
)
def test_different_endpoints_share_no_grant(a: str, b: str) -> None:
    assert grants_overlap(a, b) is None
    for kind in ("m", "c"):
        assert not fnmatch.fnmatchcase(derived_name(b, kind, "0123abcd"), derived_grant(a, kind))


def test_equal_names_and_their_spellings_share_every_grant() -> None:
    assert grants_overlap("peagle-x-dev", "peagle-x-dev") is not None
    assert grants_overlap("Peagle-X-Dev", "peagle-x-dev") is not None


def test_a_short_name_spelled_like_a_long_names_head_is_caught() -> None:
    long = "peagle-" + "q" * 60
    shaped = derived_head(long)  # 53 characters: a valid name of its own
    overlap = grants_overlap(long, shaped)
    assert overlap is not None and "-c????????" in overlap
