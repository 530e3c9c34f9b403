"""Work that changes nothing is skipped, and the time of every phase of a step is logged."""

import pytest
import torch

from grpo_lab.trainer import tiny
from grpo_lab.trainer.decode import Sampling
from grpo_lab.trainer.rollout import sample, token_logprobs
from grpo_lab.trainer.timing import PHASES
from shared_runs import grpo_run, one_pass_run  # noqa: F401 (fixtures: pytest finds them by name)
from trainer_helpers import read_table


def test_pi_old_from_the_update_forward_equals_a_separate_no_grad_forward_bit_for_bit():
    tokenizer = tiny.build_tokenizer()
    model = tiny.build_model(tokenizer, seed=0).eval()
    rollout = sample(model, tokenizer, ["1+2=", "3+4="], Sampling(4, 4), torch.device("cpu"))
    with torch.no_grad():
        separate, entropy_separate = token_logprobs(model, rollout, 1.0, with_entropy=True)
    logp, entropy = token_logprobs(model, rollout, 1.0, with_entropy=True)
    assert logp.requires_grad and torch.equal(logp.detach(), separate) and torch.equal(entropy, entropy_separate)


@pytest.fixture(scope="module")
def runs(grpo_run, one_pass_run):
    """The session's runs: "four" the default 4 passes (shared_runs.GRPO_FLAGS), "one" --passes 1."""
    return {"four": grpo_run, "one": one_pass_run}


def test_every_phase_is_timed_and_they_add_up_to_the_step(runs):
    scalars = read_table(runs["four"], "scalars")
    phases = scalars[[f"time/{p}_s" for p in PHASES]]
    assert (phases >= 0).all().all() and (scalars["time/generation_s"] > 0).all()
    assert (scalars["time/old_logp_s"] > 0).all() and (scalars["time/update_s"] > 0).all()
    # the phases inside the step (all but the part-file writes counted in log) fit in its time
    inside = phases.drop(columns="time/log_s").sum(axis=1)
    assert (inside <= scalars["time/step_s"] + 1e-3).all() and (inside >= 0.5 * scalars["time/step_s"]).all()
    assert (scalars["perf/generation_tokens_per_s"] > 0).all() and (scalars["perf/update_tokens_per_s"] > 0).all()


def test_one_pass_skips_the_separate_pi_old_forward_and_still_sees_ratio_one(runs):
    scalars = read_table(runs["one"], "scalars")
    assert (scalars["time/old_logp_s"] == 0).all()
    assert (scalars["ratio/min"] == 1.0).all() and (scalars["ratio/max"] == 1.0).all()
    tokens = read_table(runs["one"], "tokens")
    assert (tokens["logp_old"] == tokens["logp_new"]).all() and tokens["logp_old"].notna().all()
