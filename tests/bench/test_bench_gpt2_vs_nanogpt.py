"""`python bench/gpt2_vs_nanogpt.py --size small` (the CI smoke test of the GPT-2 against nanoGPT benchmark) runs
without a nanoGPT checkout: a zoo variant compiled with its XLA options, timed, profiled, its row in the table and in
$OUT's JSON. It asserts nothing about speed."""

import json
import subprocess

from cli_utils import bench_script


def load_bench(monkeypatch):
    return bench_script("gpt2_vs_nanogpt", monkeypatch)


def test_small_size_runs_without_nanogpt(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("OUT", str(tmp_path))
    bench = load_bench(monkeypatch)
    bench.main(["--size", "small", "--variants", "previous+xla_backend_optimization_level=0", "--rounds", "1",
                "--iters", "2", "--profile", "previous+xla_backend_optimization_level=0"])
    out = capsys.readouterr().out
    assert "profile of zoo previous" in out and out.rstrip().splitlines()[-2].startswith("zoo previous+")
    rows = json.loads((tmp_path / "gpt2_vs_nanogpt.json").read_text())["rows"]
    assert [r["side"] for r in rows] == ["zoo previous+xla_backend_optimization_level=0"]
    assert rows[0]["ms"] > 0 and 4 < rows[0]["first_loss"] < 6  # ln 128 = 4.85 at init


def test_the_nanogpt_commit_is_its_own_checkouts(tmp_path, monkeypatch):
    """nanoGPT's row names its checkout's commit; a copy of its files inside another repository (zoo's .gpu/nanoGPT,
    on a lent GPU) is named with none, not with the enclosing repository's commit."""
    bench = load_bench(monkeypatch)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    outer, inner, own = tmp_path / "outer", tmp_path / "outer" / "nanoGPT", tmp_path / "nano GPT"  # a space too
    for repo in (outer, own):
        repo.mkdir()
        (repo / "bench.py").write_text("")
        subprocess.run([*git, "init", "-q", str(repo)], check=True)
        subprocess.run([*git, "-C", str(repo), "add", "."], check=True)
        subprocess.run([*git, "-C", str(repo), "commit", "-qm", "c"], check=True)
    inner.mkdir()
    head = subprocess.run(["git", "-C", str(own), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    assert bench.commit_of(own) == head.stdout.strip() and bench.commit_of(inner) is None
    assert bench.commit_of(tmp_path / "elsewhere") is None
