"""--augment, --augment-opt and --label-smoothing as run settings: the recipes', flags over them, a run's identity,
the older boolean form, and the one-line refusals where augmentation cannot apply."""

import json
from types import SimpleNamespace

import pytest

from zoo.config import RunConfig, identity_changes, resolve
from zoo.train.setup import augmentation


def test_flags_over_the_recipes_augmentation():
    vit = resolve({"model": "vit"})
    assert vit.data.augment == "crop,flip,autoaugment,erasing,mixup,cutmix" and vit.loop.label_smoothing == 0.1
    assert vit.data.augment_options["mix_prob"] == 0.5 and vit.model.options["drop_path"] == 0.1
    more = resolve({"model": "vit", "augment_opt": {"mix_prob": "1"}})  # options merge over the recipe's
    assert more.data.augment_options == {**vit.data.augment_options, "mix_prob": 1.0}
    # another list drops the recipe's options (they were for its ops), spelled out as stored
    assert resolve({"model": "vit", "augment": "crop_flip"}).data.augment_options == {}
    assert resolve({"model": "vit", "augment": "crop_flip"}).data.augment == "crop,flip"
    assert resolve({"model": "mixer"}).data.augment == "crop,crop,autoaugment,cutmix"
    with pytest.raises(ValueError, match="--augment-opt mixup_alpha is read by mixup, which --augment crop does not"):
        resolve({"model": "vit", "augment": "crop", "augment_opt": {"mixup_alpha": "0.2"}})
    with pytest.raises(ValueError, match="--label-smoothing must be in"):
        resolve({"model": "vit", "label_smoothing": 1.0})
    # options with no op to read them were dropped without a word (mlp_resnet's recipe augments nothing)
    with pytest.raises(ValueError, match="--augment-opt mix_prob sets options of --augment's ops, but --augment is"):
        resolve({"model": "mlp_resnet", "augment_opt": {"mix_prob": "0.5"}})
    with pytest.raises(ValueError, match="synthetic data is augmented only by an --augment given"):
        resolve({"model": "vit", "data": "synthetic", "augment_opt": {"mix_prob": "0.5"}})


def test_a_files_augment_options_go_with_the_augment_flag():
    """A config file's augment options given without its own augment are for the augment the flags give: they were
    dropped without a word (a valid mix_prob 0.3 vanished, an invalid -5 passed), as the recipe's are. A file's
    options given with its own augment are for those ops, and a flag's augment drops them."""
    flags = {"model": "vit", "augment": "erasing,mixup"}
    assert resolve(flags, {"augment_opt": {"mix_prob": 0.3}}).data.augment_options == {"mix_prob": 0.3}
    with pytest.raises(ValueError, match="mix_prob must be in"):
        resolve(flags, {"augment_opt": {"mix_prob": -5}})
    assert resolve(flags, {"augment": "crop", "augment_opt": {"pad": 2}}).data.augment_options == {}
    assert resolve({**flags, "augment_opt": {"mix_prob": 0.2}}, {"augment_opt": {"mix_prob": 0.3}}
                   ).data.augment_options == {"mix_prob": 0.2}  # the flag's over the file's


def test_older_runs_boolean_augment_is_crop_flip_and_augmentation_is_identity():
    """A run dir from before (augment: true) reads as crop,flip, resumes under --augment crop_flip, and is refused
    under other augmentation or label smoothing, as any changed setting."""
    old = {"data": {"name": "synthetic", "augment": True}, "loop": {"steps": 10}}
    assert RunConfig.from_json(old).data.augment == "crop,flip"
    assert RunConfig.from_json({"data": {"augment": False}}).data.augment == "none"
    same = RunConfig.from_flat({"data": "synthetic", "augment": "crop_flip", "steps": 10})
    assert identity_changes(old, same) == []
    changed = RunConfig.from_flat({"data": "synthetic", "augment": "crop,flip,mixup", "steps": 10,
                                   "label_smoothing": 0.1, "augment_opt": {"mix_prob": 0.5}})
    stored = json.loads(json.dumps(same.to_json()))
    assert identity_changes(stored, changed) == ['augment "crop,flip" -> "crop,flip,mixup"',
                                                 'augment_opt {} -> {"mix_prob": 0.5}', "label_smoothing 0 -> 0.1"]


def data(kind: str, shape: tuple) -> SimpleNamespace:
    return SimpleNamespace(kind=kind, in_shape=shape, num_classes=10)


@pytest.mark.parametrize("augment, given, error", [
    ("crop_flip", data("text", (256,)), "--augment crop,flip augments images (height, width, channels), but d is a "
                                        "text set; leave it out"),
    ("mixup", data("image", (16,)), "but d is a set of examples of shape (16,)"),
    ("crop,autoaugment", data("image", (28, 28, 1)), "AutoAugment's colour ops weigh R, G and B, but d's images "
                                                     "have 1 channel(s); leave autoaugment out"),
])
def test_augmentation_refused_where_it_cannot_apply(augment, given, error):
    cfg = RunConfig.from_flat({"data": "d", "augment": augment})
    with pytest.raises(ValueError) as e:
        augmentation(cfg, given)
    assert str(e.value).endswith(error) or error in str(e.value)


def test_a_pad_as_wide_as_the_images_is_refused():
    """--augment crop --augment-opt pad=1000 on 32x32 images trained, 12 s a step in 3.2 GB, on crops of padding."""
    cfg = RunConfig.from_flat({"data": "d", "augment": "crop,flip", "augment_opt": {"pad": 8}})
    with pytest.raises(ValueError, match="pad=8 pads d's 8x10 images by as much as they are wide"):
        augmentation(cfg, data("image", (8, 10, 3)))
    assert augmentation(cfg, data("image", (9, 10, 3))) is not None


def test_augmentation_of_a_run():
    cfg = resolve({"model": "vit"})  # the recipe: its data is CIFAR-10, here stood in for by `data`
    aug = augmentation(cfg, data("image", (32, 32, 3)))
    assert aug.ops == ("crop", "flip", "autoaugment", "erasing", "mixup", "cutmix") and aug.num_classes == 10
    assert (aug.options.pad_mode, aug.options.erasing_prob, aug.options.mix_prob) == ("constant", 0.25, 0.5)
    assert augmentation(cfg.replace(augment="none", augment_opt={}), data("text", (256,))) is None


@pytest.mark.parametrize("model", ["vit", "mixer"])
def test_synthetic_data_drops_the_recipes_augmentation_but_not_a_given_one(model):
    """The recipes augment CIFAR-10; on synthetic data (whose labels do not survive crops or mixing) none, unless
    --augment (a flag or the file) asks for it."""
    assert resolve({"model": model}).data.augment != "none"
    assert resolve({"model": model, "data": "synthetic:teacher"}).data.augment == "none"
    assert resolve({"model": model, "data": "synthetic", "augment": "flip"}).data.augment == "flip"
    assert resolve({"model": model}, {"data": "synthetic", "augment": "crop"}).data.augment == "crop"
    assert resolve({"model": model, "data": "synthetic"}).loop.label_smoothing == 0.1  # not an augmentation
