"""The flag table: each knob declared once on the spec model, used by CLI and SDK alike."""

from __future__ import annotations

import pytest
from start_up_probe import modules_loaded

from peagle_deploy.errors import InputError
from peagle_deploy.spec import DeploymentSpec, load_spec
from peagle_deploy.spec.flag_table import parse_pairs
from peagle_deploy.spec.flags import keyword_overrides, spec_flag, spec_flags


def _walk_path(path: str) -> object:
    """The field info at a dotted path of DeploymentSpec (AssertionError if none)."""
    from peagle_deploy.spec.errors import models_in

    model: type = DeploymentSpec
    info = None
    for part in path.split("."):
        info = model.model_fields[part]
        model = next(iter(models_in(info.annotation)), model)
    assert info is not None
    return info


def test_every_flag_points_at_a_documented_field() -> None:
    flags = spec_flags()
    assert len(flags) == 23  # with --secret and --expected-bucket-owner (issue 19)
    for flag in flags:
        info = _walk_path(flag.path)
        assert flag.doc and flag.doc == " ".join(info.description.split())  # type: ignore[attr-defined]
        assert flag.flag.startswith("--") and flag.help.endswith(f"(spec: {flag.path})")


def test_keywords_and_options_are_unique_and_never_shadow_other_fields() -> None:
    flags = spec_flags()
    keywords = [f.keyword for f in flags]
    options = [d for f in flags for d in f.decls]
    assert len(set(keywords)) == len(keywords)
    assert len(set(options)) == len(options)
    # A keyword that is also a top-level field must mean that field, else the SDK's
    # `deploy_peagle(**knobs)` would be ambiguous.
    for flag in flags:
        if flag.keyword in DeploymentSpec.model_fields:
            assert flag.path == flag.keyword


def test_the_cli_spellings_users_know_are_kept() -> None:
    assert spec_flag("num_speculative_tokens").decls == ("--num-speculative-tokens", "-k")
    assert spec_flag("tensor_parallel_size").flag == "--tp"
    assert spec_flag("role_arn").path == "execution_role_arn"
    assert spec_flag("network_isolation").flag == "--no-network-isolation"
    assert spec_flag("network_isolation").from_cli(True) is False
    assert spec_flag("network_isolation").from_cli(False) is None
    assert spec_flag("alarms").path == "rollout.alarms"
    assert spec_flag("rollout_strategy").choices == ("canary", "linear", "all-at-once")
    assert "One of: LEAST_OUTSTANDING_REQUESTS" in spec_flag("routing_strategy").help


def test_sdk_keywords_become_spec_paths_and_the_rest_passes_through() -> None:
    overrides = keyword_overrides(
        {
            "num_speculative_tokens": 5,
            "role_arn": "arn:aws:iam::123456789012:role/x",
            "alarms": ["a"],
            "tags": ["team=ml"],
            "speculative.drafter_channel": "draft",
            "rollout": {"wait_interval_s": 60},
            "region": None,
        }
    )
    assert overrides == {
        "speculative.num_speculative_tokens": 5,
        "execution_role_arn": "arn:aws:iam::123456789012:role/x",
        "rollout.alarms": ["a"],
        "tags": {"team": "ml"},
        "speculative.drafter_channel": "draft",
        "rollout": {"wait_interval_s": 60},
    }
    spec = load_spec(model="gpt-oss-20b", **overrides)
    assert spec.rollout.alarms == ["a"] and spec.rollout.wait_interval_s == 60
    assert spec.speculative.num_speculative_tokens == 5


def test_a_dotted_key_wins_over_its_section_whatever_the_order() -> None:
    for overrides in (
        {"rollout.alarms": ["x"], "rollout": {"alarms": ["y"], "wait_interval_s": 5}},
        {"rollout": {"alarms": ["y"], "wait_interval_s": 5}, "rollout.alarms": ["x"]},
    ):
        spec = load_spec(model="gpt-oss-20b", **overrides)
        assert (spec.rollout.alarms, spec.rollout.wait_interval_s) == (["x"], 5)


def test_pairs() -> None:
    assert parse_pairs("--env", ["A=1", "B=x=y", "C="]) == {"A": "1", "B": "x=y", "C": ""}
    with pytest.raises(InputError) as caught:
        parse_pairs("--tag", ["=x"])
    assert (caught.value.field, caught.value.allowed) == ("--tag", "KEY=VALUE")


def test_the_clis_table_is_the_models_table() -> None:
    """flag_table.json is data written from the models; after editing them, regenerate it
    with `python -m peagle_deploy.spec.flags`."""
    from peagle_deploy.spec.flags import TABLE_FILE, cli_table, model_doc, spec_table_json

    assert TABLE_FILE.read_text(encoding="utf-8") == spec_table_json()
    assert cli_table() == (model_doc(), spec_flags())


def test_a_commands_help_builds_no_spec_model() -> None:
    """`peagle plan --help` builds the plan command's options from flag_table.json,
    without the spec models (typer's help loads pydantic for its own conversions)."""
    names = ("peagle_deploy.spec.models", "peagle_deploy.cli.plan")
    assert modules_loaded(["plan", "--help"], names) == ["peagle_deploy.cli.plan"]


def test_the_root_help_builds_no_command_and_no_spec_model() -> None:
    """`peagle --help` lists the commands from the registry's summaries: it imports no
    command module and builds no pydantic model."""

    names = ("pydantic", "peagle_deploy.spec.models", "peagle_deploy.cli.plan")
    assert modules_loaded(["--help"], names) == []
