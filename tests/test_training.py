"""The training script is reproducible: same seed and settings, same weights; a resumed run
ends where an uninterrupted one does.  Needs PyTorch (installed by `python3 dev.py test`)."""

import importlib.util
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

SCRIPT = Path(__file__).resolve().parents[1] / "training" / "train_transformer.py"


@pytest.fixture(scope="module")
def training():
    spec = importlib.util.spec_from_file_location("train_transformer", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    torch.set_num_threads(1)
    return module


def _train(training, out: Path, steps: int, resume: bool = False, checkpoints: Path | None = None) -> bytes:
    training.train("draft", seed=0, steps=steps, resume=resume, out_dir=out,
                   checkpoint_dir=checkpoints or out / "checkpoints")
    return (out / "neural_draft.npz").read_bytes()


def test_same_seed_same_weights(training, tmp_path):
    a = _train(training, tmp_path / "a", steps=6)
    b = _train(training, tmp_path / "b", steps=6)
    assert a == b
    other = tmp_path / "c"
    training.train("draft", seed=1, steps=6, out_dir=other, checkpoint_dir=other / "ck")
    assert (other / "neural_draft.npz").read_bytes() != a  # negative control: the seed matters


def test_a_resumed_run_ends_with_the_uninterrupted_weights(training, tmp_path, monkeypatch):
    monkeypatch.setattr(training, "CHECKPOINT_EVERY", 4)
    steps = 7
    whole = _train(training, tmp_path / "whole", steps=steps)
    # Interrupt a second run right after its first checkpoint, then resume it.
    ck = tmp_path / "ck"
    real_save = torch.save

    def save_then_stop(obj, path, *args, **kwargs):
        real_save(obj, path, *args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(torch, "save", save_then_stop)
    with pytest.raises(KeyboardInterrupt):
        _train(training, tmp_path / "resumed", steps=steps, checkpoints=ck)
    monkeypatch.setattr(torch, "save", real_save)
    assert (ck / "draft.tmp").exists() or (ck / "draft.pt").exists()
    if not (ck / "draft.pt").exists():
        (ck / "draft.tmp").replace(ck / "draft.pt")
    resumed = _train(training, tmp_path / "resumed", steps=steps, resume=True, checkpoints=ck)
    assert resumed == whole
