"""GitHub Actions as an OpenID Connect identity provider of the account.

A workflow job that asks GitHub for an ID token (`permissions: id-token: write`) gets a
JWT issued by `https://token.actions.githubusercontent.com` whose `aud` is what the job
asked for (`sts.amazonaws.com` with aws-actions/configure-aws-credentials) and whose `sub`
names the repository and, for a job bound to a GitHub environment,
`repo:OWNER/REPO:environment:NAME`. IAM trusts those tokens once the account has an OIDC
provider for that URL; an account can hold only one provider per URL, so an existing one
is imported instead of created.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

from peagle_deploy.errors import InputError

GITHUB_OIDC_HOST = "token.actions.githubusercontent.com"
GITHUB_OIDC_URL = f"https://{GITHUB_OIDC_HOST}"
STS_AUDIENCE = "sts.amazonaws.com"
"""The `aud` aws-actions/configure-aws-credentials asks GitHub for (its default)."""

# GitHub's rules: an owner is 1-39 letters, digits or single inner dashes; a repository
# name is 1-100 of letters, digits, `.`, `_` and `-`. Repositories created on github.com
# from 15 July 2026 on (and older ones that opted in) put the permanent numeric ids in
# the `sub` claim, `repo:OWNER@ORG_ID/REPO@REPO_ID:...` (aws-actions/configure-aws-
# credentials README, "Immutable subject claims", v6.2.3 = e6de054238d6): such a
# repository is given the same way.
_OWNER = r"[A-Za-z0-9](?:-?[A-Za-z0-9]){0,38}"
_REPO = r"[A-Za-z0-9._-]{1,100}"
_GITHUB_REPO = re.compile(
    rf"^(?P<owner>{_OWNER}(?:@[0-9]{{1,20}})?)/(?P<name>{_REPO}(?:@[0-9]{{1,20}})?)$"
)
_PROVIDER_ARN = re.compile(
    rf"^arn:aws(?:-cn|-us-gov)?:iam::\d{{12}}:oidc-provider/{re.escape(GITHUB_OIDC_HOST)}$"
)
# GitHub's numeric ids of a repository and of its owner (the `repository_id` and
# `repository_owner_id` claims; the ids of the immutable subject format).
_GITHUB_ID = re.compile(r"^[0-9]{1,20}$")
# A branch name as git allows it, kept to what needs no quoting in a condition value.
_BRANCH = re.compile(r"^(?!/)(?!.*//)(?!.*\.\.)[A-Za-z0-9._/-]{1,200}(?<![/.])$")
DEFAULT_BRANCH = "main"
CREATE = "create"
EXISTING = "existing"


@dataclass(frozen=True)
class GitHubRepo:
    """`OWNER/REPO` (or `OWNER@ORG_ID/REPO@REPO_ID` where GitHub emits immutable subject
    claims), exactly as GitHub spells it: the `sub` claim is compared as is. With
    `repository_id` / `owner_id` (GitHub's numeric ids), the trust also compares the
    token's `repository_id` / `repository_owner_id` claims: a repository re-created under
    the same name, or a name taken over after a rename or transfer, has other ids."""

    owner: str
    name: str
    repository_id: str | None = None
    owner_id: str | None = None

    @classmethod
    def parse(cls, value: object, field: str) -> GitHubRepo:
        match = _GITHUB_REPO.fullmatch(value) if isinstance(value, str) else None
        ids = [part.partition("@")[2] for part in (match["owner"], match["name"])] if match else []
        if (
            match is None
            or match["name"].partition("@")[0] in (".", "..")
            or (bool(ids[0]) != bool(ids[1]))
        ):
            raise InputError(
                field,
                f"{value!r} is not a GitHub repository",
                "OWNER/REPO, or OWNER@ORG_ID/REPO@REPO_ID for immutable subject claims",
            )
        return cls(match["owner"], match["name"])

    def with_ids(
        self, repository_id: object, owner_id: object, fields: tuple[str, str]
    ) -> GitHubRepo:
        """This repository with its numeric ids pinned (None: not pinned). An id that the
        immutable form (`OWNER@ORG_ID/REPO@REPO_ID`) names otherwise is refused: no token
        could match both."""
        given = []
        for value, field, named in zip(
            (repository_id, owner_id),
            fields,
            (self.name.partition("@")[2], self.owner.partition("@")[2]),
            strict=True,
        ):
            text = str(value) if isinstance(value, int) and not isinstance(value, bool) else value
            if text is not None and not (isinstance(text, str) and _GITHUB_ID.fullmatch(text)):
                raise InputError(field, f"{value!r} is not a GitHub id", "1-20 digits")
            if text is not None and named and text != named:
                raise InputError(field, f"{text} is not the id {self} names ({named})", named)
            given.append(text)
        return replace(self, repository_id=given[0], owner_id=given[1])

    def environment_subject(self, environment: str) -> str:
        """The `sub` claim of a job that runs in GitHub environment `environment`."""
        return f"repo:{self.owner}/{self.name}:environment:{environment}"

    def id_claims(self) -> dict[str, str]:
        """The token claims the trust pins to this repository's ids, when they are known."""
        claims = {"repository_id": self.repository_id, "repository_owner_id": self.owner_id}
        return {f"{GITHUB_OIDC_HOST}:{k}": v for k, v in claims.items() if v is not None}

    def __str__(self) -> str:
        return f"{self.owner}/{self.name}"


def check_branch(value: object, field: str) -> str:
    """The branch whose workflow runs may deploy (default `main`)."""
    if value is None:
        return DEFAULT_BRANCH
    if not isinstance(value, str) or not _BRANCH.fullmatch(value) or value.endswith(".lock"):
        raise InputError(field, f"{value!r} is not a branch name", "e.g. main, release/1.x")
    return value


def check_provider_choice(value: object, field: str) -> str:
    """`create`, `existing` or the ARN of the account's GitHub OIDC provider."""
    if value in (None, CREATE):
        return CREATE
    if value == EXISTING or (isinstance(value, str) and _PROVIDER_ARN.fullmatch(value)):
        return str(value)
    raise InputError(
        field,
        f"{value!r} is neither a choice nor the ARN of a GitHub OIDC provider",
        f"{CREATE} (default), {EXISTING}, arn:aws:iam::<account>:oidc-provider/{GITHUB_OIDC_HOST}",
    )


class GitHubOidcProvider(Construct):
    """The account's IAM OIDC provider for GitHub Actions: created (the native
    AWS::IAM::OIDCProvider, no custom-resource Lambda), or imported when the account
    already has one (`existing`: the well-known ARN in this account; or an explicit ARN).

    Created, it accepts only the STS audience. IAM fetches the issuer's certificate
    thumbprint itself when none is given (aws-cdk-lib 2.275, OidcProviderNative).
    """

    def __init__(self, scope: Construct, construct_id: str, *, choice: str = CREATE) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.provider: iam.IOidcProvider
        if choice == CREATE:
            self.provider = iam.OidcProviderNative(
                self, "Provider", url=GITHUB_OIDC_URL, client_ids=[STS_AUDIENCE]
            )
        else:
            arn = (
                stack.format_arn(
                    service="iam",
                    region="",
                    resource="oidc-provider",
                    resource_name=GITHUB_OIDC_HOST,
                )
                if choice == EXISTING
                else choice
            )
            self.provider = iam.OidcProviderNative.from_oidc_provider_arn(self, "Provider", arn)

    @property
    def arn(self) -> str:
        return self.provider.oidc_provider_arn
