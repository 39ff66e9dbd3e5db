"""The pass on a PyTorch device (speclib.lm.torch_pass) computes what the numpy pass computes.

Run on PyTorch's CPU build (requirements-hf.txt), the same code that benchmarks/accelerator.py
runs on a GPU: every comparison is against the numpy pass, the reference, within float32
rounding; a pass with another GELU is the negative control.
"""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from speclib.book.accelerator import stepped_logit_difference  # noqa: E402
from speclib.core.decoding import speculative_generate  # noqa: E402
from speclib.lm import torch_pass  # noqa: E402
from speclib.lm.drafters import DRAFTER_NAMES, load_drafter  # noqa: E402
from speclib.lm.transformer import TransformerConfig, load_pair, random_transformer  # noqa: E402

TOL = 1e-4  # float32 rounding of logits of a few units, over a few layers


@pytest.mark.parametrize("tied", [True, False])
def test_random_models_agree_across_window_moves_and_rollbacks(tied):
    cfg = TransformerConfig(vocab_size=11, block_size=16, d_model=24, n_layers=2, n_heads=3, tied=tied)
    model = random_transformer(cfg, seed=3)
    ids = np.random.default_rng(1).integers(0, 11, 70)  # past the 16-token block: the window moves
    assert stepped_logit_difference(model, model.with_device("cpu"), ids) < TOL


def test_the_shipped_target_agrees_and_keeps_the_same_features():
    target = load_pair()[0]
    ids = np.random.default_rng(2).integers(0, target.vocab_size, 150)
    dev = target.with_device("cpu")
    assert dev.device == "cpu" and target.device is None
    assert stepped_logit_difference(target, dev, ids) < TOL
    a, b = target.cache(features=True), dev.cache(features=True)
    a.extend(ids[:40])
    b.extend(ids[:40])
    assert isinstance(b._keys, torch.Tensor)  # the cache lives on the device
    assert np.abs(a.features - b.features).max() < TOL


def test_trees_agree_and_the_kept_branch_continues_alike():
    target = load_pair()[0]
    ids = np.random.default_rng(4).integers(0, target.vocab_size, 30)
    a, b = target.cache(), target.with_device("cpu").cache()
    a.extend(ids)
    b.extend(ids)
    tokens, parents = np.array([5, 6, 7, 8, 9, 10]), np.array([-1, 0, 0, 1, 2, 2])
    assert np.abs(a.extend_tree_logits(tokens, parents) - b.extend_tree_logits(tokens, parents)).max() < TOL
    a.accept_tree(4)
    b.accept_tree(4)
    assert np.abs(a.extend_logits(ids[:3]) - b.extend_logits(ids[:3])).max() < TOL


def test_a_pass_with_another_gelu_is_caught(monkeypatch):
    """Negative control: the exact GELU instead of GPT-2's tanh form moves the logits past TOL."""
    target = load_pair()[0]
    ids = np.random.default_rng(5).integers(0, target.vocab_size, 40)
    real_gelu = torch_pass.F.gelu
    monkeypatch.setattr(torch_pass.F, "gelu", lambda x, approximate="none": real_gelu(x))
    assert stepped_logit_difference(target, target.with_device("cpu"), ids) > TOL


@pytest.mark.parametrize("name", DRAFTER_NAMES)
def test_every_drafter_writes_the_same_tokens_on_the_device(name):
    host, dev = load_drafter(name), load_drafter(name, device="cpu")
    assert getattr(dev.target, "model", dev.target).device == "cpu"
    prompt = np.random.default_rng(6).integers(1, 90, 12)
    for seed in range(3):
        a, sa = speculative_generate(host.target, host, prompt, 40, 4, rng=seed)
        b, sb = speculative_generate(dev.target, dev, prompt, 40, 4, rng=seed)
        assert np.array_equal(a, b) and sa.accepted == sb.accepted


def test_eagle_and_medusa_rows_agree_on_the_device():
    for name in ("eagle", "medusa"):
        host, dev = load_drafter(name), load_drafter(name, device="cpu")
        prompt = np.random.default_rng(7).integers(1, 90, 20)
        rows = []
        for d in (host, dev):
            cache = d.target.cache()
            d.start(prompt, d.vocab_size)
            cache.extend(prompt[:-1])
            proposal = d.propose(prompt, 4, _KeepAll(), _Greedy(), None)
            rows.append(proposal.rows)
        assert rows[0].shape == rows[1].shape and np.abs(rows[0] - rows[1]).max() < 1e-5


def test_eagles_pass_on_the_device_gives_the_numpy_states(eagle_state_error):
    """Entries fed one to five at a time, past the 127-entry window: the window mask matters."""
    assert eagle_state_error(load_drafter("eagle", device="cpu"), load_drafter("eagle")) < TOL


class _KeepAll:
    def keep_drafting(self, row, token):
        return True


class _Greedy:
    def token(self, row):
        return int(np.argmax(row))


def test_bad_devices_and_mixed_settings_are_refused_by_name():
    target = load_pair()[0]
    with pytest.raises(ValueError, match="device: 'nonsense' is not a PyTorch device"):
        target.with_device("nonsense")
    with pytest.raises(ValueError, match="device: expected 'cpu' or a CUDA device"):
        target.with_device("meta")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="sees no CUDA device"):
            target.with_device("cuda")
    dev = target.with_device("cpu")
    with pytest.raises(ValueError, match="compiled: this model runs on the PyTorch device 'cpu'"):
        dev.compiled = True
    with pytest.raises(ValueError, match="device: a compiled pass runs on the host"):
        load_drafter("pair", compiled=True, device="cpu")
    assert dev.with_device(None).device is None


def test_a_pass_runs_without_tf32_and_leaves_the_process_setting_alone(monkeypatch):
    """A process that enabled TF32 for other work gets float32 rows, and keeps its setting."""
    matmul = torch.backends.cuda.matmul
    seen = []
    real_norm = torch_pass.F.layer_norm
    monkeypatch.setattr(torch_pass.F, "layer_norm", lambda *a, **k: seen.append(matmul.allow_tf32) or real_norm(*a, **k))
    before = matmul.allow_tf32
    matmul.allow_tf32 = True  # a property of torch's module: set and restored by hand
    try:
        load_pair()[0].with_device("cpu").cache().extend(np.array([1, 2, 3]))
        assert seen and not any(seen)
        assert matmul.allow_tf32 is True
    finally:
        matmul.allow_tf32 = before
