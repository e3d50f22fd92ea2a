"""The hostile-input corpus, through `peagle` in this process: specs, flags, gates files
and environment values. Every case must be refused the same way (hostile_kit)."""

from __future__ import annotations

import codecs
import os
from pathlib import Path

import pytest
from hostile_kit import (
    HF_TOKEN,
    MODEL,
    ROLE,
    Case,
    assert_refused,
    billion_laughs,
    deep_json,
    deep_yaml_block,
    deep_yaml_flow,
    random_bytes,
    recording_aws_calls,
    run_cli,
    tokenizer_json,
    write_files,
)

PLAN = ("plan", MODEL)
GATES_OK = "version: 1\nstages:\n  staging:\n    bench: null\n"
PROMOTE = ("promote", "--from", "dev", "--to", "staging", "--gates", "{tmp}/gates.yaml")


def spec(name: str, body: bytes | str, *more: str, fld: str = "--file", **kw: object) -> Case:
    """A spec file given with --file."""
    return Case(
        id=f"spec-{name}",
        argv=("plan", "--file", f"{{tmp}}/{name}", *more),
        field=fld,
        files={name: body},
        **kw,  # type: ignore[arg-type]
    )


def gates(name: str, body: bytes | str, fld: str = "--gates", **kw: object) -> Case:
    """A gates file given to `peagle promote`."""
    return Case(
        id=f"gates-{name}",
        argv=PROMOTE,
        field=fld,
        files={"gates.yaml": body},
        **kw,  # type: ignore[arg-type]
    )


def flags(name: str, *argv: str, fld: str, **kw: object) -> Case:
    return Case(id=f"flag-{name}", argv=argv, field=fld, **kw)  # type: ignore[arg-type]


UTF16_SPEC = codecs.BOM_UTF16_LE + f"model: {MODEL}\n".encode("utf-16-le")
IMAGE = (
    "763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:0.18.0-gpu-py312-cu129-ubuntu22.04-sagemaker"
)
BIG_NAME = "n" * 120_000  # an argv word can hold 128 KiB (Linux MAX_ARG_STRLEN)

SPECS = [
    spec("bomb-model.yaml", billion_laughs("model"), also=("aliases expand",)),
    spec("bomb-env.yaml", billion_laughs("env.SM_VLLM_X"), also=("aliases expand",)),
    spec("bomb-alarms.yaml", billion_laughs("rollout.alarms"), also=("aliases expand",)),
    spec("deep.json", deep_json(), also=("nested deeper than 32",)),
    spec("deep-flow.yaml", deep_yaml_flow(), also=("nested deeper than 32",)),
    spec("deep-block.yaml", deep_yaml_block(600), also=("nested deeper than 32",)),
    spec("deep-object.json", '{"model": ' + '{"a": ' * 3000 + "1" + "}" * 3001),
    spec("bad-utf8.yaml", b"model: gpt\xff\xfe-oss-20b\n", also=("not UTF-8",)),
    spec("random.yaml", random_bytes(), also=("UTF-8",)),
    spec("random.json", random_bytes(seed=14)),
    spec("utf16-bom.yaml", UTF16_SPEC, also=("UTF-16",)),
    spec(
        "utf32-bom.yaml", codecs.BOM_UTF32_LE + "model: x\n".encode("utf-32-le"), also=("UTF-32",)
    ),
    spec("nul.yaml", b"model: gpt-oss-20b\x00\n", also=("NUL",)),
    spec("dup.json", '{"model": "gpt-oss-20b", "model": "gpt-oss-120b"}', also=("twice",)),
    spec("dup.yaml", f"model: {MODEL}\nstage: dev\nstage: prod\n", also=("twice",)),
    spec("dup-nested.yaml", f"model: {MODEL}\nrollout:\n  alarms: [a]\n  alarms: [b]\n"),
    spec("nan.json", '{"model": "gpt-oss-20b", "custom": {"weights_gb": NaN}}'),
    spec("inf.json", '{"model": "gpt-oss-20b", "max_model_len": 1e999}'),
    spec("nan.yaml", f"model: {MODEL}\ncustom:\n  weights_gb: .nan\n"),
    spec("huge-int.json", '{"model": "gpt-oss-20b", "initial_instance_count": ' + "9" * 5000 + "}"),
    spec("tokenizer-5mb.json", tokenizer_json(5_000_000), also=("larger than 1 MiB",)),
    spec("tokenizer.json", tokenizer_json(600_000), fld="model", also=("a valid string",)),
    spec("top-list.yaml", f"- {MODEL}\n", also=("a mapping",)),
    spec("top-string.json", '"gpt-oss-20b"', also=("a mapping",)),
    spec("unclosed.yaml", "model: [gpt-oss-20b\n", also=("not valid YAML",)),
    spec("python-tag.yaml", "model: !!python/object/apply:os.system [id]\n"),
    spec("env-list.yaml", f"model: {MODEL}\nenv: ['HF_TOKEN={HF_TOKEN}']\n", fld="env"),
    spec("env-string.yaml", f"model: {MODEL}\nenv: HF_TOKEN={HF_TOKEN}\n", fld="env"),
    spec("env-nested.yaml", f"model: {MODEL}\nenv:\n  A: {{b: c}}\n", fld="env.A"),
    spec("empty-region.yaml", f"model: {MODEL}\nregion: ''\n", fld="region", also=("empty",)),
    spec(
        "empty-endpoint.json", '{"model": "gpt-oss-20b", "endpoint_name": ""}', fld="endpoint_name"
    ),
    spec(
        "long-name.yaml", f"model: {MODEL}\nendpoint_name: {'e' * 900_000}\n", fld="endpoint_name"
    ),
    spec(
        "k-huge.yaml",
        f"model: {MODEL}\nspeculative:\n  num_speculative_tokens: {10**20}\n",
        fld="speculative.num_speculative_tokens",
        also=("128",),
    ),
    spec(
        "count-huge.yaml",
        f"model: {MODEL}\ninitial_instance_count: {10**12}\n",
        fld="initial_instance_count",
        also=("2147483647",),
    ),
    spec(
        "scaling-huge.yaml",
        f"model: {MODEL}\nscaling: {{min_instances: 1, max_instances: {2**40}}}\n",
        fld="scaling.max_instances",
    ),
    spec(
        "drafter-tokens-huge.yaml",
        f"model: {MODEL}\ncustom:\n  drafter_parallel_tokens: {10**12}\n",
        fld="custom.drafter_parallel_tokens",
    ),
    spec(
        "drafter-uri-newline.json",
        '{"model": "gpt-oss-20b", "speculative": {"drafter_uri": "s3://bucket/head/\\n"}}',
        fld="speculative.drafter_uri",
    ),
    spec(
        "drafter-channel-path.yaml",
        f"model: {MODEL}\nspeculative:\n  drafter_channel: ../../etc\n",
        fld="speculative.drafter_channel",
    ),
    spec(
        "drafter-kind-bogus.yaml",
        f"model: {MODEL}\nspeculative:\n  drafter_kind: medusa\n",
        fld="speculative.drafter_kind",
    ),
    spec(
        "env-101.yaml",
        f"model: {MODEL}\nenv:\n" + "".join(f"  K{i}: v\n" for i in range(101)),
        fld="env",
    ),
    spec(
        "flat-list.yaml",
        f"model: {MODEL}\nrollout:\n  alarms: [{', '.join(['x'] * 340_000)}]\n",
        also=("more than 100000 values",),
    ),
    spec("many-keys.yaml", "".join(f"k{i}: v\n" for i in range(90_000)), also=("more than",)),
    spec(
        "flat-list.json",
        '{"model": "gpt-oss-20b", "tags": [' + ",".join(["0"] * 400_000) + "]}",
        also=("more than 100000 values",),
    ),
    spec("directory", b"", fld="--file"),
    *(
        # Their vLLM is recorded (aws/deep-learning-containers docs/src/data/vllm-server):
        # the refusal names vLLM 0.30.0 instead of an unknown engine.
        spec(
            f"k-schedule-{tag}.yaml",
            f"model: {MODEL}\n"
            f"image_uri: 763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:{tag}\n"
            "speculative:\n  mode: p-eagle\n  num_speculative_tokens: 5\n"
            "  num_speculative_tokens_per_batch_size: [[1, 8, 5], [9, 64, 3]]\n",
            fld="speculative.num_speculative_tokens_per_batch_size",
            also=("breaks the draft shapes in vLLM 0.30.0", f"AWS image tag {tag}"),
        )
        for tag in ("server-sagemaker-cuda-v2.5", "server-sagemaker-cuda-v2.6")
    ),
]
# `directory`: replaced by a directory below (a spec path that is not a file).

FLAGS = [
    # `peagle image base`: the base is published in 35 regions; China has none of it
    flags(
        "image-base-china",
        *("image", "base", "--region", "cn-north-1"),
        fld="--region",
        also=("vllm:server-sagemaker-cuda-v2.5 is not published in cn-north-1",),
    ),
    flags("image-base-injection", *("image", "base", "--region", "us-east-1; rm"), fld="--region"),
    # the Qwen3-Coder head's model card: trained for 18 parallel tokens
    flags(
        "qwen-k-200",
        *("plan", "qwen3-coder-30b-a3b-instruct", "-k", "200"),
        fld="speculative.num_speculative_tokens",
        also=("the drafter was trained for 18 parallel tokens",),
    ),
    flags(
        "instance-type-empty", *PLAN, "--instance-type", "", fld="--instance-type", also=("empty",)
    ),
    flags("region-empty", *PLAN, "--region", "", fld="--region"),
    flags("endpoint-name-empty", *PLAN, "--endpoint-name", "", fld="--endpoint-name"),
    flags("role-empty", *PLAN, "--role-arn", "", fld="--role-arn"),
    flags("k-empty", *PLAN, "-k", "", fld="--num-speculative-tokens"),
    flags("file-empty", "plan", "--file", "", fld="--file"),
    flags("tag-empty", *PLAN, "--tag", "", fld="--tag"),
    flags("alarm-empty", *PLAN, "--alarm", "ok", "--alarm", "", fld="--alarm"),
    flags("subnet-empty", *PLAN, "--subnet", "", fld="--subnet"),
    flags("model-empty", "plan", "", fld="MODEL"),
    flags("doctor-instance-empty", "doctor", MODEL, "-i", "", fld="--instance-type"),
    flags(
        "deploy-region-empty", "deploy", MODEL, "--role-arn", ROLE, "--region", "", fld="--region"
    ),
    flags("status-name-empty", "status", "", fld="NAME"),
    flags("status-region-empty", "status", "peagle-x-dev", "--region", "", fld="--region"),
    flags("invoke-prompt-empty", "invoke", "peagle-x-dev", "", fld="PROMPT"),
    flags("invoke-system-empty", "invoke", "peagle-x-dev", "hi", "--system", "", fld="--system"),
    flags("delete-name-empty", "delete", "", "--yes", fld="NAME"),
    flags("list-stage-empty", "list", "--stage", "", fld="--stage"),
    flags("promote-to-empty", "promote", "--from", "dev", "--to", "", fld="--to"),
    flags(
        "promote-gates-empty",
        "promote",
        "--from",
        "dev",
        "--to",
        "staging",
        "--gates",
        "",
        fld="--gates",
    ),
    flags(
        "k-huge",
        *PLAN,
        "-k",
        "99999999999999999999",
        fld="speculative.num_speculative_tokens",
        also=("vLLM verifies at most 128", "trained for 10"),
    ),
    flags(
        "k-vs-max-model-len",
        *PLAN,
        "-k",
        "300",
        "--max-model-len",
        "256",
        fld="speculative.num_speculative_tokens",
        also=("max_model_len 256", "1-128"),
    ),
    flags("k-zero", *PLAN, "-k", "0", fld="speculative.num_speculative_tokens"),
    flags("k-negative", *PLAN, "-k", "-5", fld="speculative.num_speculative_tokens"),
    flags("k-5000-digits", *PLAN, "-k", "9" * 5000, fld="-k"),
    # the fast path of `plan --json` took these to int() and was a traceback (past
    # Python's 4300-digit limit); it leaves them to typer now, which refuses them
    flags("json-k-5000-digits", *PLAN, "--json", "-k", "9" * 5000, fld="-k"),
    flags(
        "json-max-model-len-5000-digits",
        *PLAN,
        "--json",
        "--max-model-len=" + "9" * 5000,
        fld="--max-model-len",
    ),
    flags(
        "instance-count-huge",
        *PLAN,
        "--instance-count",
        "99999999999",
        fld="initial_instance_count",
    ),
    flags("max-model-len-huge", *PLAN, "--max-model-len", str(10**15), fld="max_model_len"),
    flags("tp-huge", *PLAN, "--tp", str(10**9), fld="tensor_parallel_size"),
    flags("mode-bogus", *PLAN, "--mode", "x" * 100_000, fld="speculative.mode"),
    flags("tag-aws-emoji", *PLAN, "--tag", "aws:x=1", fld="tags.aws:x", absent=("\u274c",)),
    flags("tag-markup", *PLAN, "--tag", "k[/]=v", fld="tags.k[/]"),
    flags("env-not-pair", *PLAN, "-e", HF_TOKEN, fld="--env"),
    flags("env-bad-key", *PLAN, "-e", "1BAD=x", fld="env"),
    flags("endpoint-name-120k", *PLAN, "--endpoint-name", BIG_NAME, fld="endpoint_name"),
    flags("endpoint-name-newline", *PLAN, "--endpoint-name", "peagle-a\n", fld="endpoint_name"),
    flags("role-newline", *PLAN, "--role-arn", ROLE + "\n", fld="execution_role_arn"),
    flags("region-escape", *PLAN, "--region", "us-east-1\x1b[2J", fld="region", absent=("\x1b",)),
    flags("status-bad-name", "status", "bad name[/]", fld="NAME"),
    flags(
        "status-timeout-nan",
        "status",
        "peagle-x-dev",
        "--wait",
        "--timeout",
        "nan",
        fld="--timeout",
    ),
    flags(
        "invoke-temperature-inf",
        "invoke",
        "peagle-x-dev",
        "hi",
        "--temperature",
        "inf",
        fld="--temperature",
    ),
    flags(
        "invoke-max-tokens-huge",
        "invoke",
        "peagle-x-dev",
        "hi",
        "--max-tokens",
        "9" * 30,
        fld="--max-tokens",
    ),
    flags("list-region-bad", "list", "--region", "moon-1", fld="--region"),
    flags(
        "promote-same-stage",
        "promote",
        "--from",
        "staging",
        "--to",
        "staging",
        "--gates",
        "gates.example.yaml",
        fld="--to",
    ),
    flags(
        "promote-bad-name",
        "promote",
        "--from",
        "dev",
        "--to",
        "staging",
        "--gates",
        "gates.example.yaml",
        "--name",
        "a_b",
        fld="--name",
    ),
    flags(
        "promote-role",
        "promote",
        "--from",
        "dev",
        "--to",
        "staging",
        "--gates",
        "gates.example.yaml",
        "--role-arn",
        "admin",
        fld="--role-arn",
    ),
    flags("image-newline", *PLAN, "--image-uri", IMAGE + "\n", fld="image_uri"),
    flags("jumpstart-id-newline", "plan", "openai-reasoning-gpt-oss-20b\n", fld="model"),
    flags("kms-newline", *PLAN, "--kms-key-id", "alias/x\n", fld="kms_key_id"),
    flags(
        "env-spec-config-deep",
        *PLAN,
        "-e",
        "SM_VLLM_SPECULATIVE_CONFIG=" + "[" * 5000,
        fld="env.SM_VLLM_SPECULATIVE_CONFIG",
    ),
    flags(
        "env-v2-runner",
        *PLAN,
        "-e",
        "VLLM_USE_V2_MODEL_RUNNER=1",
        fld="env.VLLM_USE_V2_MODEL_RUNNER",
    ),
    # the metric lines' names are the plan's: another stage's endpoint name would publish
    # acceptance metrics under that endpoint (issue 34, Low 3)
    flags(
        "env-endpoint-name",
        *PLAN,
        "-e",
        "PEAGLE_ENDPOINT_NAME=peagle-gpt-oss-20b-prod",
        fld="env.PEAGLE_ENDPOINT_NAME",
        also=("endpoint_name",),
    ),
    flags(
        "env-variant-name",
        *PLAN,
        "-e",
        "PEAGLE_VARIANT_NAME=Candidate",
        fld="env.PEAGLE_VARIANT_NAME",
    ),
    flags("env-value-100k", *PLAN, "-e", "A=" + "a" * 100_000, fld="env.A"),
    flags(
        "deploy-k-huge",
        "deploy",
        MODEL,
        "--role-arn",
        ROLE,
        "-k",
        "1000",
        fld="speculative.num_speculative_tokens",
    ),
    flags("deploy-no-role", "deploy", MODEL, fld="execution_role_arn", also=("placeholder",)),
    flags(
        "deploy-timeout-zero",
        "deploy",
        MODEL,
        "--role-arn",
        ROLE,
        "--timeout",
        "0",
        fld="--timeout",
    ),
    flags("doctor-k-huge", "doctor", MODEL, "-k", "129", fld="speculative.num_speculative_tokens"),
    flags("unknown-option", *PLAN, "--" + "x" * 50_000, fld="No such option"),
    Case(
        id="flag-stage-file-bomb",
        argv=(*PROMOTE[:-1], "gates.example.yaml", "--stage-file", "{tmp}/stage.yaml"),
        field="--stage-file",
        files={"stage.yaml": billion_laughs("model")},
    ),
]

GATES = [
    gates("same-stage-twice", GATES_OK + "  staging:\n    bench: null\n", also=("twice",)),
    gates("bomb", billion_laughs("stages.staging.smoke.prompt"), also=("aliases expand",)),
    gates("deep", deep_yaml_flow(key="stages")),
    gates("deep-block", deep_yaml_block(600)),
    gates("bad-utf8", b"stages:\n  staging: {}\n# \xc3\x28\n", also=("not UTF-8",)),
    gates("utf16", codecs.BOM_UTF16_LE + GATES_OK.encode("utf-16-le"), also=("UTF-16",)),
    gates("random", random_bytes(seed=15)),
    gates("nan", "stages:\n  staging:\n    thresholds:\n      max_error_rate: .nan\n"),
    gates("missing-stage", "stages:\n  prod: {bench: null}\n", fld="gates.stages.staging"),
    gates(
        "unknown-key",
        "stages:\n  staging:\n    bench: null\n    smok: {}\n",
        fld="gates.stages.staging.smok",
    ),
    gates(
        "empty-prompt",
        "stages:\n  staging:\n    bench: null\n    smoke: {prompt: ''}\n",
        fld="gates.stages.staging.smoke.prompt",
    ),
    gates("list", "- staging\n", fld="gates"),
    gates(
        "huge-max-tokens",
        f"stages:\n  staging:\n    bench: null\n    smoke: {{max_tokens: {10**30}}}\n",
        fld="gates.stages.staging.smoke.max_tokens",
    ),
]

ENV = [
    Case("env-aws-region-empty", PLAN, "AWS_REGION", env={"AWS_REGION": ""}, also=("empty",)),
    Case("env-aws-region-bad", PLAN, "AWS_REGION", env={"AWS_REGION": "us east 1"}),
    Case(
        "env-default-region-empty", ("list",), "AWS_DEFAULT_REGION", env={"AWS_DEFAULT_REGION": ""}
    ),
    Case(
        "env-status-region-bad",
        ("status", "peagle-x-dev"),
        "AWS_REGION",
        env={"AWS_REGION": "x" * 5000},
    ),
    Case(
        "env-max-attempts-huge",
        ("status", "peagle-x-dev"),
        "PEAGLE_AWS_MAX_ATTEMPTS",
        env={"PEAGLE_AWS_MAX_ATTEMPTS": "9" * 20},
        also=("1-50",),
    ),
    Case(
        "env-max-attempts-superscript",  # isdigit() says yes, int() used to raise
        ("status", "peagle-x-dev"),
        "PEAGLE_AWS_MAX_ATTEMPTS",
        env={"PEAGLE_AWS_MAX_ATTEMPTS": "\u00b2"},
        also=("1-50",),
    ),
    Case(
        "env-max-attempts-empty",
        ("status", "peagle-x-dev"),
        "PEAGLE_AWS_MAX_ATTEMPTS",
        env={"PEAGLE_AWS_MAX_ATTEMPTS": ""},
    ),
    Case("env-image-base-region-bad", ("image", "base"), "AWS_REGION", env={"AWS_REGION": "x y"}),
    Case(
        "env-retry-mode-empty",
        ("status", "peagle-x-dev"),
        "PEAGLE_AWS_RETRY_MODE",
        env={"PEAGLE_AWS_RETRY_MODE": ""},
    ),
]

CORPUS = [*SPECS, *FLAGS, *GATES, *ENV]


def test_the_corpus_is_large_and_ids_are_unique() -> None:
    ids = [case.id for case in CORPUS]
    assert len(ids) == len(set(ids))
    assert len(CORPUS) >= 60


@pytest.fixture(scope="module", autouse=True)
def _warm() -> None:
    """Import what a plan needs once, so the hang guard times refusals, not imports."""
    from peagle_deploy.cli.app import main
    from peagle_deploy.plan import build_plan
    from peagle_deploy.spec import load_spec

    build_plan(load_spec(model=MODEL))
    assert main(["plan", "--help"]) == 0


@pytest.mark.parametrize("case", CORPUS, ids=lambda c: c.id)
def test_refused_cleanly(
    case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    write_files(tmp_path, case.files)
    if case.id == "spec-directory":
        (tmp_path / "directory").unlink()
        (tmp_path / "directory").mkdir()
    monkeypatch.chdir(Path(__file__).resolve().parents[2])  # gates.example.yaml, stages/
    with recording_aws_calls(monkeypatch) as calls:
        for name, value in case.env.items():
            monkeypatch.setenv(name, value)
        argv = [a.replace("{tmp}", str(tmp_path)) for a in case.argv]
        result = run_cli(capsys, calls, argv)
    assert_refused(result, case.field, case.also, case.absent)


def test_tag_with_emoji_code_is_shown_as_typed(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with recording_aws_calls(monkeypatch) as calls:
        result = run_cli(capsys, calls, ["plan", MODEL, "--tag", "aws:x=1"])
    assert "tags.aws:x: uses a reserved prefix" in result.err


def test_a_valid_plan_still_passes_and_shows_values_literally(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The positive control: the same runner on good input exits 0 with no AWS call, and
    user values with markup or emoji codes come out as typed."""
    uri = "s3://peagle-bucket/weights[bold]:x:/"
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(f"model: {MODEL}\ncustom:\n  model_data_uri: '{uri}'\n")
    with recording_aws_calls(monkeypatch) as calls:
        result = run_cli(capsys, calls, ["plan", "-f", str(spec_file), "--tag", "team=a:x:b"])
    assert result.code == 0 and result.aws_calls == [], result.err
    assert uri in result.out and "\u274c" not in result.out


@pytest.mark.parametrize(
    ("argv", "fld"),
    [
        (["plan", "--file", "{fifo}"], "--file"),
        (["deploy", "--file", "{fifo}", "--no-wait"], "--file"),
        (
            ["promote", "--from", "dev", "--to", "staging", "--gates", "{fifo}", "--dry-run"],
            "--gates",
        ),
    ],
    ids=["plan-spec", "deploy-spec", "promote-gates"],
)
def test_named_pipe_nobody_writes_to_is_refused(
    argv: list[str],
    fld: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from peagle_deploy import documents

    monkeypatch.setattr(documents, "PIPE_WAIT_S", 0.2)
    fifo = tmp_path / "spec.yaml"
    os.mkfifo(fifo)
    monkeypatch.chdir(Path(__file__).resolve().parents[2])
    with recording_aws_calls(monkeypatch) as calls:
        result = run_cli(capsys, calls, [a.replace("{fifo}", str(fifo)) for a in argv])
    assert_refused(result, fld, ("nothing to read",))
