"""bench/compile_profile.py: an event's self time is its duration less its direct children's on the same thread,
and a profiled compile lists XLA's own events."""


from cli_utils import bench_script


def load(monkeypatch):
    return bench_script("compile_profile", monkeypatch)


def test_self_times_subtract_direct_children_per_thread(monkeypatch):
    bench = load(monkeypatch)
    main = [("compile", 0, 100), ("pass", 10, 30), ("verify", 15, 5), ("pass", 50, 20), ("after", 120, 7)]
    other = [("pass", 0, 40)]  # another thread: nothing nests across lines
    got = bench.self_times([main, other])
    assert got == {"compile": (1, 50.0), "pass": (3, 85.0), "verify": (1, 5.0), "after": (1, 7.0)}
    # every nanosecond of a line's busy span is some event's self time, once
    assert sum(ns for _, ns in bench.self_times([main]).values()) == 100 + 7


def test_a_profiled_compile_lists_the_compilers_events(monkeypatch, tmp_path, capsys):
    bench = load(monkeypatch)
    monkeypatch.setenv("ZOO_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "profile.md"
    bench.main(["--model", "mlp_resnet", "--width", "16", "--depth", "1", "--batch-size", "8", "--steps", "2",
                "--data", "synthetic", "--members", "1", "--top", "5", "--write", str(out)])
    text = out.read_text()
    assert "## 1 members: compile" in text and text in capsys.readouterr().out
    rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| event")]
    assert len(rows) == 6 and any("Compile" in r for r in rows[:5])  # XLA's compile among the top five
