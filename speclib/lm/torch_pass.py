"""The numpy transformer's pass in PyTorch, on any device PyTorch has: a GPU, or the CPU.

This module is optional: it needs PyTorch (``pip install -r requirements-hf.txt`` installs
the pinned CPU build; a machine with an accelerator brings its own).  It is what
:meth:`Transformer.with_device <speclib.lm.transformer.Transformer.with_device>` runs:

* :class:`TorchPass` holds a model's weights on the device and computes
  :meth:`Transformer._run <speclib.lm.transformer.Transformer._run>`'s arithmetic there, in
  float32 (TF32 off during each pass, :func:`full_float32`), the same layers in the same order:
  token and position embeddings, per block a layer norm, the query/key/value product,
  attention over the cached keys (a causal or token-tree mask), the output product, a
  second layer norm and the GELU MLP (tanh form), then the final layer norm and the output
  head.  The key/value cache lives on the device (:meth:`TorchPass.zeros` makes its
  arrays, which :class:`~speclib.lm.transformer.KVCache` holds and rolls back as it holds
  numpy's); the logits, and the final hidden states when a cache keeps them, come back to
  the host as float32 numpy arrays, where the loop turns them into rows and samples.
* :class:`TorchEaglePass` and :func:`medusa_logits` do the same for the EAGLE drafter's
  block and Medusa's heads, so that every network of a step runs on the device.

Rows agree with the numpy pass up to float32 rounding (``tests/test_torch_pass.py``
compares them on the CPU build; ``benchmarks/accelerator.py`` on the accelerator it runs
on, and stores the largest difference it saw).
"""

from __future__ import annotations

INSTALL_HINT = ("a pass on a PyTorch device needs PyTorch, which speclib does not install by default. "
                "Install the pinned CPU build with:  pip install -r requirements-hf.txt  (from the repository root)")

try:
    import torch
    import torch.nn.functional as F
except ImportError as exc:  # pragma: no cover - exercised where torch is absent
    raise ImportError(INSTALL_HINT) from exc

import contextlib
import functools
import math

import numpy as np


def device_of(device: object) -> "torch.device":
    """``device`` as a ``torch.device`` that this PyTorch can use, or a ValueError that says why not."""
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device: {device!r} is not a PyTorch device ({exc})") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device: {device!r} asked for, but this PyTorch sees no CUDA device")
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise ValueError(f"device: {device!r} asked for, but this PyTorch sees {torch.cuda.device_count()} CUDA devices")
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"device: expected 'cpu' or a CUDA device such as 'cuda', got {device!r}")
    return dev


@contextlib.contextmanager
def full_float32():
    """Products in full float32 inside the block (no TF32), the caller's setting restored after.

    Every pass runs inside it, so that the rows match numpy's wherever the process enabled TF32
    for other work; the process's own setting is left as it was.
    """
    matmul = torch.backends.cuda.matmul
    saved = matmul.allow_tf32
    matmul.allow_tf32 = False
    try:
        yield
    finally:
        matmul.allow_tf32 = saved


def _float32_pass(method):
    """A pass: no gradients, full float32 (:func:`full_float32`)."""
    @functools.wraps(method)
    def run(*args, **kwargs):
        with torch.inference_mode(), full_float32():
            return method(*args, **kwargs)
    return run


def _to(array: np.ndarray, dev: "torch.device") -> "torch.Tensor":
    return torch.from_numpy(np.ascontiguousarray(array, dtype=np.float32)).to(dev)


def _host(x: "torch.Tensor") -> np.ndarray:
    return x.detach().to("cpu").numpy()


class TorchPass:
    """A :class:`~speclib.lm.transformer.Transformer`'s pass on a PyTorch device (see the module docstring).

    Called as :class:`speclib.lm.kernel.CompiledPass` is: ``(tokens, filled, keys, values,
    features, positions, mask)`` with ``keys`` and ``values`` made by :meth:`zeros`.
    """

    def __init__(self, params: dict[str, np.ndarray], n_layers: int, n_heads: int, w_out: np.ndarray,
                 eps: float, device: object) -> None:
        self.device = device_of(device)
        dev = self.device
        self.wte, self.wpe = _to(params["wte"], dev), _to(params["wpe"], dev)
        names = ("ln1.g", "ln1.b", "attn.w_qkv", "attn.b_qkv", "attn.w_o", "attn.b_o",
                 "ln2.g", "ln2.b", "mlp.w_up", "mlp.b_up", "mlp.w_down", "mlp.b_down")
        self.layers = [tuple(_to(params[f"h{i}.{n}"], dev) for n in names) for i in range(n_layers)]
        self.ln_f = (_to(params["ln_f.g"], dev), _to(params["ln_f.b"], dev))
        self.w_out = _to(w_out, dev)
        self.d, self.heads, self.eps = self.wte.shape[1], n_heads, float(eps)
        self.scale = 1.0 / math.sqrt(self.d // n_heads)

    def zeros(self, shape: tuple[int, ...]) -> "torch.Tensor":
        """A float32 array of zeros on the device: a cache's keys or values."""
        return torch.zeros(shape, dtype=torch.float32, device=self.device)

    @_float32_pass
    def __call__(self, tokens: np.ndarray, filled: int, keys: "torch.Tensor", values: "torch.Tensor",
                 features: np.ndarray | None, positions: np.ndarray | None, mask: np.ndarray | None) -> np.ndarray:
        dev, n, h = self.device, tokens.size, self.heads
        d, end = self.d, filled + n
        dh = d // h
        ids = torch.from_numpy(np.ascontiguousarray(tokens, dtype=np.int64)).to(dev)
        pos = (torch.arange(filled, end, device=dev) if positions is None
               else torch.from_numpy(np.ascontiguousarray(positions, dtype=np.int64)).to(dev))
        x = self.wte[ids] + self.wpe[pos]
        if mask is not None:
            bias = _to(mask, dev)
        elif n > 1:  # new token j may look at window slots 0 .. filled + j
            bias = torch.full((n, end), -math.inf, device=dev).triu_(filled + 1)
        else:
            bias = None
        for layer, (g1, b1, w_qkv, b_qkv, w_o, b_o, g2, b2, w_up, b_up, w_down, b_down) in enumerate(self.layers):
            qkv = torch.addmm(b_qkv, F.layer_norm(x, (d,), g1, b1, self.eps), w_qkv)
            qkv = qkv.view(n, 3, h, dh).permute(1, 2, 0, 3)  # (3, heads, n, head_dim)
            keys[layer, :, filled:end] = qkv[1]
            values[layer, :, filled:end] = qkv[2]
            att = torch.matmul(qkv[0] * self.scale, keys[layer, :, :end].transpose(1, 2))  # (heads, n, end)
            if bias is not None:
                att = att + bias
            y = torch.matmul(torch.softmax(att, dim=-1), values[layer, :, :end]).permute(1, 0, 2).reshape(n, d)
            x = x + torch.addmm(b_o, y, w_o)
            up = F.gelu(torch.addmm(b_up, F.layer_norm(x, (d,), g2, b2, self.eps), w_up), approximate="tanh")
            x = x + torch.addmm(b_down, up, w_down)
        x = F.layer_norm(x, (d,), *self.ln_f, self.eps)
        if features is not None:
            features[...] = _host(x)
        return _host(x @ self.w_out)


class TorchEaglePass:
    """:class:`~speclib.lm.drafters.EagleDrafter`'s block on a PyTorch device, with its own key/value slots.

    ``(feats, tokens, start, lo, mask)`` feeds entries ``start ..`` (the target's or the
    drafter's own hidden states, and the token after each), attending to slots ``lo ..`` of
    its cache under ``mask`` (``None`` for one entry), and returns the predicted next hidden
    states as a float32 numpy array: the same arithmetic as ``EagleDrafter._pass``.
    """

    def __init__(self, p: dict[str, np.ndarray], wte: np.ndarray, n_heads: int, eps: float, device: object) -> None:
        self.device = device_of(device)
        self.p = {n: _to(a, self.device) for n, a in p.items()}
        self.wte = _to(wte, self.device)
        self.d = self.p["fc.b"].shape[0]
        self.heads, self.eps = n_heads, float(eps)
        self.scale = 1.0 / math.sqrt(self.d // n_heads)
        self.keys = torch.zeros((n_heads, 64, self.d // n_heads), dtype=torch.float32, device=self.device)
        self.values = torch.zeros_like(self.keys)

    @_float32_pass
    def __call__(self, feats: np.ndarray, tokens: np.ndarray, start: int, lo: int, mask: np.ndarray | None) -> np.ndarray:
        p, dev, n, h, d = self.p, self.device, tokens.size, self.heads, self.d
        end = start + n
        if end > self.keys.shape[1]:
            size = max(end, 2 * self.keys.shape[1])
            for attr in ("keys", "values"):
                grown = torch.zeros((h, size, d // h), dtype=torch.float32, device=dev)
                grown[:, :start] = getattr(self, attr)[:, :start]
                setattr(self, attr, grown)
        ids = torch.from_numpy(np.ascontiguousarray(tokens, dtype=np.int64)).to(dev)
        x = torch.addmm(p["fc.b"], torch.cat([_to(feats, dev), self.wte[ids]], dim=1), p["fc.w"])
        qkv = torch.addmm(p["h0.attn.b_qkv"], F.layer_norm(x, (d,), p["h0.ln1.g"], p["h0.ln1.b"], self.eps),
                          p["h0.attn.w_qkv"]).view(n, 3, h, d // h).permute(1, 2, 0, 3)
        self.keys[:, start:end] = qkv[1]
        self.values[:, start:end] = qkv[2]
        att = torch.matmul(qkv[0] * self.scale, self.keys[:, lo:end].transpose(1, 2))
        if mask is not None:
            att = att + _to(mask, dev)
        y = torch.matmul(torch.softmax(att, dim=-1), self.values[:, lo:end]).permute(1, 0, 2).reshape(n, d)
        x = x + torch.addmm(p["h0.attn.b_o"], y, p["h0.attn.w_o"])
        up = F.gelu(torch.addmm(p["h0.mlp.b_up"], F.layer_norm(x, (d,), p["h0.ln2.g"], p["h0.ln2.b"], self.eps),
                                p["h0.mlp.w_up"]), approximate="tanh")
        x = x + torch.addmm(p["h0.mlp.b_down"], up, p["h0.mlp.w_down"])
        x = F.layer_norm(x, (d,), p["ln_f.g"], p["ln_f.b"], self.eps)
        return _host(torch.addmm(p["out.b"], x, p["out.w"]))


class TorchMedusaHeads:
    """:meth:`MedusaHeads.head_logits <speclib.lm.drafters.MedusaHeads.head_logits>` on a PyTorch device."""

    def __init__(self, w: np.ndarray, b: np.ndarray, w_out: np.ndarray, device: object) -> None:
        self.device = device_of(device)
        self.w, self.b, self.w_out = _to(w, self.device), _to(b, self.device), _to(w_out, self.device)

    @_float32_pass
    def __call__(self, features: np.ndarray, m: int) -> np.ndarray:
        f = _to(features, self.device)
        n, d = f.shape
        z = torch.addmm(self.b[:m * d], f, self.w[:, :m * d])
        return _host((F.silu(z).view(n, m, d) + f[:, None, :]) @ self.w_out)


def synchronize(device: object) -> None:
    """Wait for the device's queued work (a no-op on the CPU): for timings."""
    dev = device_of(device)
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
