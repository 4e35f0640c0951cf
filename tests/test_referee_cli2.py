"""An outside referee's inputs to the transfer CLI, the NTK-change diagnostic and the optimizer settings that zoo's
other tests do not use: each was accepted silently, misreported or ended in a traceback before its fix."""

from __future__ import annotations


def test_a_run_files_default_eps_follows_a_new_optimizer():
    """A run's config.json holds its optimizer's resolved eps: an Adafactor run's 1e-30 rerun with --optimizer adam
    trained Adam with eps 1e-30 (its default is 1e-8), and an Adam run's 1e-8 became Adafactor's eps1 (default
    1e-30). A default eps now follows the optimizer; an eps the file chose, or a flag's, is kept."""
    from zoo.config import resolve

    adafactor_run = {"model": "mlp_resnet", "optimizer": "adafactor", "eps": 1e-30}
    assert resolve({"optimizer": "adam"}, adafactor_run).optim.eps == 1e-8
    assert resolve({}, adafactor_run).optim.eps == 1e-30
    assert resolve({"optimizer": "adam", "eps": 1e-5}, adafactor_run).optim.eps == 1e-5
    assert resolve({"optimizer": "adafactor"}, {"model": "gpt", "eps": 1e-8}).optim.eps == 1e-30  # gpt: adamw
    assert resolve({"optimizer": "adafactor"}, {"model": "mlp_resnet", "eps": 1e-6}).optim.eps == 1e-6
