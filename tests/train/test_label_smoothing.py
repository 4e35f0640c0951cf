"""Label smoothing and mixed labels in the training loss, against PyTorch's cross-entropy (label_smoothing=e, class
probabilities as targets), the loss timm's Mixup targets are trained with."""

import jax.numpy as jnp
import numpy as np
import pytest

from zoo.train.loss import soft_cross_entropy

torch = pytest.importorskip("torch", reason="the bench extra: pip install -e '.[bench]'")


@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.3])
def test_cross_entropy_equals_torchs(smoothing):
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(16, 10)).astype(np.float32) * 3
    y = rng.integers(0, 10, 16)
    lam = rng.uniform(size=(16, 1)).astype(np.float32)
    target = lam * np.eye(10)[y] + (1 - lam) * np.eye(10)[y[::-1]]
    want_hard = torch.nn.functional.cross_entropy(torch.tensor(logits), torch.tensor(y), reduction="none",
                                                  label_smoothing=smoothing).numpy()
    want_soft = torch.nn.functional.cross_entropy(torch.tensor(logits), torch.tensor(target), reduction="none",
                                                  label_smoothing=smoothing).numpy()
    hard, _ = soft_cross_entropy(jnp.asarray(logits), jnp.asarray(y), None, smoothing)
    soft, _ = soft_cross_entropy(jnp.asarray(logits), jnp.asarray(y), jnp.asarray(target), smoothing)
    np.testing.assert_allclose(hard, want_hard, rtol=1e-5)
    np.testing.assert_allclose(soft, want_soft, rtol=1e-5)
