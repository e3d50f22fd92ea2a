"""The emulator's table drafter on its own: fitting, and acceptance counted as vLLM counts it."""

from __future__ import annotations

from peagle_local.emulator.chat import VOCABULARY, ChatRequest, generate, token_ids
from peagle_local.emulator.table_drafter import (
    NO_TOKEN,
    TableDrafter,
    drafter_config,
    drafter_files,
    read_drafter,
    speculate,
)

SIZE = len(VOCABULARY)


def table_from(rows: dict[int, list[int]], depth: int) -> TableDrafter:
    """A drafter proposing rows[t] after token t (NO_TOKEN elsewhere)."""
    return TableDrafter(
        tuple(tuple(rows.get(t, [NO_TOKEN] * depth)[k] for t in range(SIZE)) for k in range(depth))
    )


def test_a_position_counts_only_when_every_earlier_draft_was_accepted() -> None:
    # after 0 it drafts 1, 9, 3: the second draft is wrong, so the third (right) is not
    # accepted; the step emits 1 accepted + the target's own token (2), then after 2 it
    # drafts 3 (right) and stops
    drafter = table_from({0: [1, 9, 3], 2: [3, NO_TOKEN, NO_TOKEN]}, depth=3)
    counts = speculate(drafter, [[0, 1, 2, 3]], k=3)
    assert counts.drafts == 2
    assert counts.accepted_per_position == (2, 0, 0)
    assert counts.per_position == (1.0, 0.0, 0.0)
    assert counts.mean_accepted_per_step == 1.0


def test_positions_past_the_depth_trained_are_never_accepted() -> None:
    drafter = table_from({0: [1, 2]}, depth=2)
    counts = speculate(drafter, [[0, 1, 2, 3]], k=4)
    assert counts.accepted_per_position == (1, 1, 0, 0)


def test_fitting_learns_the_emulated_targets_rule_from_its_answers() -> None:
    def answer(i: int) -> list[int]:
        request = ChatRequest([{"role": "user", "content": f"q{i}"}], "m", None, False, False)
        return token_ids(generate(request)[0])

    start = TableDrafter.untrained(3, seed=1)
    fitted = TableDrafter.fit([answer(i) for i in range(10)], start)
    held_out = [answer(i) for i in range(100, 120)]
    assert speculate(fitted, held_out, 3).acceptance_rate > 0.9
    assert speculate(start, held_out, 3).acceptance_rate < 0.1
    # a context never seen keeps what the untrained table had
    assert TableDrafter.fit([], start) == start


def test_the_files_round_trip_and_other_checkpoints_are_not_read_as_tables() -> None:
    drafter = TableDrafter.untrained(2, seed=3)
    target = {"hidden_size": 64, "vocab_size": 256, "model_type": "llama"}
    config = drafter_config(
        drafter,
        serving_format="speculators",
        target_config=target,
        draft_vocab_size=32,
        num_layers=1,
        mask_token_id=255,
    )
    files = drafter_files(drafter, config, draft_vocab_size=32)
    assert read_drafter(files["config.json"], files["model.safetensors"]) == drafter
    assert (
        read_drafter(b'{"architectures": ["LlamaForCausalLMEagle3"]}', files["model.safetensors"])
        is None
    )
    assert read_drafter(files["config.json"], b"\0" * 8) is None
