"""`python bench/gpt2_vs_nanogpt.py --size small` (the CI smoke test of the GPT-2 against nanoGPT benchmark) runs
without a nanoGPT checkout: a zoo variant compiled with its XLA options, timed, profiled, its row in the table and in
$OUT's JSON. It asserts nothing about speed."""

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_small_size_runs_without_nanogpt(tmp_path, monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    monkeypatch.setenv("OUT", str(tmp_path))
    spec = importlib.util.spec_from_file_location("gpt2_vs_nanogpt", ROOT / "bench" / "gpt2_vs_nanogpt.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    bench.main(["--size", "small", "--variants", "previous+xla_backend_optimization_level=0", "--rounds", "1",
                "--iters", "2", "--profile", "previous+xla_backend_optimization_level=0"])
    out = capsys.readouterr().out
    assert "profile of zoo previous" in out and out.rstrip().splitlines()[-2].startswith("zoo previous+")
    rows = json.loads((tmp_path / "gpt2_vs_nanogpt.json").read_text())["rows"]
    assert [r["side"] for r in rows] == ["zoo previous+xla_backend_optimization_level=0"]
    assert rows[0]["ms"] > 0 and 4 < rows[0]["first_loss"] < 6  # ln 128 = 4.85 at init
