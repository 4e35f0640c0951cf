"""Registries open to outside packages: a package with zoo entry points adds a plugin, a data source and a model,
which train.py, zoo.sweep and zoo.coord_check take by name."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from cli_utils import ROOT, SMALL, TINY, child_env, one_line_error

import zoo.models
from zoo.cli import train as train_cli

EXTERNAL = {
    "zoo_ext/__init__.py": '''
        """An outside package adding a plugin, a data source and a model to zoo through entry points."""
        import dataclasses

        import numpy as np

        from zoo.data.dataset import Dataset
        from zoo.models.mlp_resnet import MLPResNet
        from zoo.param.base import MUP_TABLE, Parametrization


        @dataclasses.dataclass(frozen=True)
        class HalfMuP(Parametrization):
            name = "half_mup"
            table = {**MUP_TABLE, "output": (0.5, 0.5, 0.5, 1)}


        def stripes(arg, cfg, limit):
            """Images whose class is the row of a bright stripe."""
            rng = np.random.default_rng(0)
            y = rng.integers(0, 4, 512).astype(np.int32)
            x = np.zeros((512, 8, 8, 1), np.uint8)
            x[np.arange(512), y * 2] = 255
            split = {"x": x, "y": y}
            return Dataset(kind="image", splits={"train": split, "test": split}, num_classes=4, in_shape=(8, 8, 1),
                           eval_split="test")


        class SmallNet(MLPResNet):
            recipe = dict(data="stripes", optimizer="adam", lr=3e-3, batch_size=32, steps=3, eval_every=3)
        ''',
    "zoo_ext-0.1.dist-info/METADATA": "Metadata-Version: 2.1\nName: zoo-ext\nVersion: 0.1\n",
    "zoo_ext-0.1.dist-info/entry_points.txt": "[zoo.params]\nhalf_mup = zoo_ext:HalfMuP\n\n"
                                              "[zoo.data]\nstripes = zoo_ext:stripes\n\n"
                                              "[zoo.models]\nsmall_net = zoo_ext:SmallNet\n",
}


@pytest.mark.slow
def test_an_installed_package_adds_a_plugin_a_data_source_and_a_model(tmp_path):
    """A package on the path with zoo entry points (as pip installs it): its plugin, data source and model work by
    name from train.py (the model's recipe picks its data), and its plugin from zoo.sweep and zoo.coord_check."""
    site = tmp_path / "site"
    for name, text in EXTERNAL.items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_text(textwrap.dedent(text).lstrip())
    env = child_env({"PYTHONPATH": f"{site}:{ROOT}"})

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, *args], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=300)

    trained = run(str(ROOT / "train.py"), "--model", "small_net", "--param", "half_mup", "--width", "32",
                  "--depth", "2", "--run-dir", str(tmp_path / "run"))
    assert trained.returncode == 0, trained.stderr
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert (config["model"]["name"], config["param"]["name"], config["data"]["name"]) == \
        ("small_net", "half_mup", "stripes")
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["steps"] == 3
    swept = run("-m", "zoo.sweep", "--out", str(tmp_path / "sweep"), *SMALL[:2], "--param", "half_mup",
                "--widths", "16,32", "--depth", "2", "--lrs", "1e-3", "--steps", "2", "--batch-size", "8",
                "--data", "synthetic")
    assert swept.returncode == 0, swept.stderr
    assert len((tmp_path / "sweep" / "results.jsonl").read_text().splitlines()) == 2
    checked = run("-m", "zoo.coord_check", "--param", "half_mup", "--widths", "32,64", "--depth", "2", "--seeds",
                  "1", "--steps", "1", "--model-opt", "in_shape=8", "--out", str(tmp_path / "coord"))
    assert checked.returncode in (0, 1), checked.stderr  # a verdict either way
    assert json.loads((tmp_path / "coord" / "coord_check_width.json").read_text())["param"] == "half_mup"
    listed = run(str(ROOT / "train.py"), "--help")
    assert "half_mup" in listed.stdout and "small_net" in listed.stdout


def test_a_broken_model_of_another_package_breaks_nothing_else(tmp_path, monkeypatch, capsys):
    """An installed package's zoo.models entry point whose module raises as it is imported (or that is no model):
    --help imports every model's recipe for its defaults, so train.py failed for every model, with 'unexpected
    RuntimeError: boom at import', naming neither the entry point nor its module. Now the others train, and the
    broken one is one line naming its module when it is asked for."""
    (tmp_path / "boom_models.py").write_text("raise RuntimeError('boom at import')\n")
    (tmp_path / "not_models.py").write_text("Net = dict\n")
    (tmp_path / "exit_models.py").write_text("import sys\nsys.exit(3)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(zoo.models.MODELS._lazy, "boom", "boom_models:Net")
    monkeypatch.setitem(zoo.models.MODELS._lazy, "notamodel", "not_models:Net")
    monkeypatch.setitem(zoo.models.MODELS._lazy, "exits", "exit_models:Net")
    train_cli.parser().format_help()
    train_cli.main([*TINY, "--steps", "1", "--run-dir", str(tmp_path / "ok")])
    capsys.readouterr()
    line = one_line_error(train_cli.main, [*TINY, "--model", "boom", "--run-dir", str(tmp_path / "b")], capsys)
    assert "importing the model 'boom_models:Net' failed in its own code: RuntimeError: boom at import" in line
    line = one_line_error(train_cli.main, [*TINY, "--model", "notamodel", "--run-dir", str(tmp_path / "n")], capsys)
    assert "'notamodel' is not a zoo model" in line
    line = one_line_error(train_cli.main, [*TINY, "--model", "exits", "--run-dir", str(tmp_path / "e")], capsys)
    assert "importing the model 'exit_models:Net' failed in its own code: it called sys.exit(3)" in line, line


def test_a_name_two_packages_or_zoo_and_a_package_register_is_said(tmp_path, monkeypatch, capsys):
    """A name another installed package, or zoo itself, also registered was dropped without a word (the first on
    the path won: another package installed changed what --param NAME trained). zoo's own name stays zoo's, a name
    two packages give other objects is refused where it is asked for, naming both; a warning line for each. An
    entry point to an object of the wrong kind names its package."""
    from zoo.registry import Registry

    def package(name: str, entries: str) -> None:
        info = tmp_path / f"{name.replace('-', '_')}-0.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
        (info / "entry_points.txt").write_text(f"[zoo_test.things]\n{entries}\n")

    package("pkg-a", "own = pkg_a:Own\ntwice = pkg_a:Twice\nwrong = pkg_a:wrong")
    package("pkg-b", "twice = pkg_b:Twice")
    (tmp_path / "pkg_a.py").write_text("Own = Twice = 'a string'\nwrong = 3\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    def check(name: str, obj: object) -> object:
        if isinstance(obj, int):
            raise ValueError(f"{name!r} is not a thing")
        return obj

    things = Registry("thing", "zoo_test.things", check)
    things.register("own", ["zoo's"])
    assert things.names() == ["own", "wrong"]
    err = capsys.readouterr().err
    assert "warning: pkg-a (pkg_a:Own) registers the thing 'own', which zoo's own holds: left out" in err, err
    assert ("warning: pkg-a (pkg_a:Twice) and pkg-b (pkg_b:Twice) each register the thing 'twice': give the one "
            "meant as module:Object") in err, err
    assert things.get("own") == ["zoo's"]
    with pytest.raises(ValueError, match=r"pkg-a \(pkg_a:Twice\) and pkg-b \(pkg_b:Twice\) each register"):
        things.get("twice")
    with pytest.raises(ValueError, match=r"'wrong' is not a thing \(the entry point wrong = pkg_a:wrong of the "
                                         r"installed package pkg-a\)"):
        things.get("wrong")


def test_a_class_cannot_take_a_name_another_class_holds():
    """`zoo.param.register` of a class named "mup" replaced zoo's muP for every model and tool in the process, while
    its runs recorded "mup", which every other process reads as zoo's. Refused now, naming the holder; the same class
    again is no clash, and the registry is unchanged."""
    import zoo.param
    from zoo.param.sp import SP

    held = zoo.param.PLUGINS.get("mup")
    impostor = type("Impostor", (SP,), {"name": "mup"})
    with pytest.raises(TypeError, match=r"the parametrization name 'mup' is taken \(by zoo\.param\.mup:MuP\): give "
                                        r".*:Impostor a name of its own"):
        zoo.param.register(impostor)
    assert zoo.param.register(held) is held and zoo.param.PLUGINS.get("mup") is held


@pytest.mark.parametrize("row, shown", [(None, "None"), ((0, 0.5, 0), r"\(0, 0.5, 0\)"),
                                        ((0, "0.5", 0, 0), r"\(0, '0.5', 0, 0\)")])
def test_a_plugin_table_is_checked_when_registered(row, shown):
    """A table without a kind, with three exponents or with a text one was registered, and failed where a model or an
    optimizer first read it (KeyError 'hidden', IndexError, "bad operand type for unary -"): refused at once now."""
    import zoo.param
    from zoo.param.base import SP_TABLE
    from zoo.param.sp import SP

    table = {k: v for k, v in SP_TABLE.items() if k != "hidden"} | ({} if row is None else {"hidden": row})
    with pytest.raises(TypeError, match=f"plugin 'odd_table': its table must give every kind .* hidden: {shown}$"):
        zoo.param.register(type("OddTable", (SP,), {"name": "odd_table", "table": table}))
    assert "odd_table" not in zoo.param.names()


def test_the_flags_a_printed_command_needs_to_read_its_file():
    """zoo.transfer printed `train.py --config OUT/my_params:MyParam/target.json` for a model and plugin of the user's
    own, which train.py refuses without --allow-import for each (a file never names code to import): the printed
    command now carries them, once each, quoted; registered names need none."""
    from zoo.registry import import_flags

    assert import_flags("mycnn:MLP2", "my params:MyParam", "mycnn:MLP2") == \
        " --allow-import mycnn:MLP2 --allow-import 'my params:MyParam'"
    assert import_flags("gpt", "mup") == ""


def test_a_module_an_entry_point_names_may_register_its_own_class(monkeypatch):
    """A package whose entry point `myep = mymod:MyParam` names a class its module also registers (@register): the
    entry point was still pending as the module ran, and the class was refused as taking a name 'held' by itself. A
    numpy-typed or read-only table (np.float32 exponents, a MappingProxyType) is a table too."""
    import types

    import numpy as np

    import zoo.param
    from zoo.param.base import MUP_TABLE
    from zoo.param.sp import SP

    cls = type("SelfRegistered", (SP,), {"name": "self_registered", "__module__": "mymod",
                                         "table": types.MappingProxyType({k: tuple(np.float32(x) for x in v)
                                                                          for k, v in MUP_TABLE.items()})})
    monkeypatch.setattr(zoo.param.PLUGINS, "entries", dict(zoo.param.PLUGINS.entries))  # left as it was after
    monkeypatch.setattr(zoo.param.PLUGINS, "_lazy", {**zoo.param.PLUGINS._lazy,
                                                     "self_registered": "mymod:SelfRegistered"})
    assert zoo.param.register(cls) is cls and zoo.param.PLUGINS.get("self_registered") is cls
    other = type("Other", (SP,), {"name": "self_registered"})
    with pytest.raises(TypeError, match="is taken \\(by mymod:SelfRegistered\\)"):
        zoo.param.register(other)
