"""Numbers a user types are ASCII everywhere zoo reads one from text: Python's int() and float() also read any
Unicode digit ('١', Arabic-Indic one; '３', full-width three) and underscores ('1_0' is 10). The command lines refuse
them (zoo.schema.to_int / to_float); these are the readers below them, which a script or an environment reaches."""

from __future__ import annotations

import pytest

import zoo.param
from zoo.sweeps.grid import parse_ints, parse_lrs
from zoo.train import distributed
from zoo.train.mesh import given_axes


@pytest.mark.parametrize("text", ["2^-٣", "١e-3", "-12:-٤:1", "-12:-4:١", "1_0e-3"])
def test_learning_rates_in_other_digits_are_refused(text):
    with pytest.raises(ValueError, match="cannot read learning rates"):
        parse_lrs(text)


def test_ascii_learning_rates_and_widths_still_read():
    assert parse_lrs("2^-12:2^-10:1") == [2.0**-12, 2.0**-11, 2.0**-10]
    assert parse_lrs(" 1e-3, 2^-8") == [1e-3, 2.0**-8]
    assert parse_ints(" 64, 128", "--widths") == [64, 128]


@pytest.mark.parametrize("text", ["٣٢", "３２", "6_4"])
def test_widths_in_other_digits_are_refused(text):
    with pytest.raises(ValueError, match="--widths must be a comma list of integers"):
        parse_ints(text, "--widths")


def test_a_mesh_size_in_other_digits_is_refused():
    assert given_axes("data= 2,tensor=1") == {"data": 2, "tensor": 1}
    with pytest.raises(ValueError, match="needs an integer size"):
        given_axes("data=١")


@pytest.mark.parametrize("var,value", [("JAX_NUM_PROCESSES", "٢"), ("JAX_PROCESS_ID", "１"),
                                       ("ZOO_COORDINATOR_TIMEOUT", "٣٠")])
def test_multi_host_environment_numbers_in_other_digits_are_refused(monkeypatch, var, value):
    """The JAX_* variables of a multi-host launch: '٢' processes read as 2 and went on to wait for a coordinator."""
    monkeypatch.setenv("JAX_COORDINATOR_ADDRESS", "localhost:1")
    monkeypatch.setenv(var, value)
    with pytest.raises(ValueError, match=f"{var}=.* is not"):
        distributed.initialize()


@pytest.mark.parametrize("plugin,options", [("completep", {"gamma": "٠.٥"}), ("abcd", {"hidden": "0,٠.٥,1,1"}),
                                            ("critical", {"sigma_w": "١.٥"}), ("completep", {"gamma": "0_5"})])
def test_plugin_options_in_other_digits_are_refused(plugin, options):
    """--param-opt gamma=٠.٥ (Arabic-Indic 0.5) gave completep gamma 0.5: options without a default type, abcd's
    exponent lists and critical's sigmas read them with float()."""
    with pytest.raises(ValueError, match="must be a number|need four numbers"):
        zoo.param.get(plugin, **options)


def test_plugin_options_in_ascii_still_read():
    assert zoo.param.get("completep", gamma="0.5").gamma == 0.5
    assert zoo.param.get("abcd", hidden="0, 0.5,1,1").hidden == (0.0, 0.5, 1.0, 1.0)
    assert zoo.param.get("critical", sigma_w=" 1.5").sigma_w == 1.5
