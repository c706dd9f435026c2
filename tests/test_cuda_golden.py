"""CUDA as one more platform: every registered algorithm's golden set-up runs on the GPU and is compared with its recordings.

A GPU rounds differently from any CPU, so it is compared as an unknown processor is (tests/golden_histories.py): the
invariants of the default history (rounds, clients, metric names, bytes) and the first local steps, to the portable
tolerance; where the GPU has a recording of its own (`--record-platform` run on it), the whole history to float slack.
TF32 is switched off for these runs: it would round the convolutions to 10 mantissa bits, a thousand times the slack.
The clients train one after another (the batched path is compared with the loop by tests/test_batched_clients.py).
"""
from __future__ import annotations

import pytest
import torch

from golden_histories import check, platform, record_run, registered_algorithms

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here: the GPU platform is checked on a GPU machine")


@pytest.fixture(autouse=True)
def full_float32():
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


@pytest.mark.parametrize("name", registered_algorithms())
def test_the_golden_set_up_on_cuda_agrees_with_the_recordings(name):
    history, steps = record_run(name, device="cuda", client_batching="sequential")
    problems, how = check(name, history, steps, described=platform("cuda"))
    assert not problems, f"{name} on {torch.cuda.get_device_name()}:\n" + "\n".join(problems[:20]) + f"\n(compared: {how})"
