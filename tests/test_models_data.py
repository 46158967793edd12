import pytest
import torch

from accelbench.core.errors import DataError, UnknownModelError
from accelbench.data import load_images, to_model_input
from accelbench.models import create_model

# The accuracy checks' images: the class-balanced subset ``accelbench run --images 1000`` evaluates (load_images
# takes image k of each class in turn, classes and file names sorted: the first 100 test images of each class).
SUBSET = 1000


@pytest.fixture(scope="module")
def subset():
    return load_images("cifar10-test", SUBSET)


def _correct(name: str, raw) -> int:
    """How many of ``raw``'s images ``name`` (bundled fp32 weights, CPU) labels right (top-1)."""
    loaded = create_model(name)
    x = to_model_input(raw.images, 32, loaded.info.mean, loaded.info.std)
    with torch.inference_mode():
        return sum(
            (loaded.module(x[i : i + 100]).argmax(1) == raw.labels[i : i + 100]).sum().item()
            for i in range(0, len(x), 100)
        )


# The references below were computed once with this code: fp32 on the CPU, batches of 100, 500 and 1000 alike, and
# float64 gave the same counts. They are asserted exactly: the smallest gap between an image's two highest logits is
# 0.017 (ResNet-20) and 0.0078 (ResNet-56), over 400 times the largest difference between float32 and float64 logits
# (1.8e-5), so no image's top-1 flips with another CPU's kernels; a changed count means changed weights, data,
# transform or model.
def test_cifar_resnet20_top1_on_a_fixed_test_subset(subset, one_thread):
    """912 of the 1,000 (91.2 %); on all 10,000 test images the bundled weights score 91.73 % (assets README)."""
    assert subset.images.shape[0] == SUBSET and torch.bincount(subset.labels).tolist() == [100] * 10
    assert _correct("cifar-resnet20", subset) == 912


def test_cifar_resnet56_top1_on_a_fixed_test_subset(subset, one_thread):
    """919 of the 1,000 (91.9 %); on all 10,000 test images the bundled weights score 93.39 % (assets README)."""
    assert _correct("cifar-resnet56", subset) == 919


def test_cifar_resnet_architecture_and_weights():
    m = create_model("cifar-resnet20")
    assert m.info.pretrained and m.info.label_space == "cifar10" and m.info.image_size == 32

    def n_tensors(mod):  # the 2016 checkpoints predate BatchNorm's num_batches_tracked buffer
        return sum(not k.endswith("num_batches_tracked") for k in mod.state_dict())

    assert n_tensors(m.module) == 97
    assert sum(p.numel() for p in m.module.parameters()) == 269_722  # He et al.: 0.27M
    assert n_tensors(create_model("cifar-resnet56").module) == 277


def test_torchvision_model_random_weights_said():
    m = create_model("resnet18")
    assert m.info.source == "torchvision" and m.info.image_size == 224
    assert m.info.pretrained is False and m.info.weights == "random" and m.info.label_space is None


def test_timm_and_user_models():
    t = create_model("timm:resnet18")
    assert t.info.source == "timm" and t.info.image_size == 224
    u = create_model("helpers:oom_model")
    assert u.info.source == "user" and u.info.image_size == 32


@pytest.mark.parametrize(
    "name, match",
    [
        ("resnet9000", "unknown model 'resnet9000'"),
        ("timm:no_such_net", "unknown timm model"),
        ("nomodule_xyz:factory", "cannot import model factory"),
        ("helpers:not_a_module", "not nn.Module"),
    ],
)
def test_unknown_models_clear_error(name, match):
    with pytest.raises(UnknownModelError, match=match):
        create_model(name)


def test_balanced_subset_and_labels():
    raw = load_images("cifar10-test", 20)
    assert raw.images.shape == (20, 3, 32, 32) and raw.images.dtype == torch.uint8
    assert sorted(raw.labels.tolist()) == sorted(list(range(10)) * 2)
    assert raw.label_space == "cifar10" and "20 of 10000 real images" in raw.description


def test_image_folder_dir_and_archive(tmp_path):
    from PIL import Image

    for cls in ("cats", "dogs"):
        (tmp_path / "imgs" / cls).mkdir(parents=True)
        for i in range(3):
            Image.new("RGB", (20 + i, 16), (i * 40, 10, 200)).save(tmp_path / "imgs" / cls / f"{i}.png")
    raw = load_images(str(tmp_path / "imgs"), 100)
    # mixed sizes: each image keeps its own (the evaluation transform then runs per image)
    assert [tuple(a.shape) for a in raw.images] == [
        (3, 16, 20),
        (3, 16, 20),
        (3, 16, 21),
        (3, 16, 21),
        (3, 16, 22),
        (3, 16, 22),
    ]
    assert raw.classes == ("cats", "dogs") and raw.label_space == "folder"
    import tarfile

    with tarfile.open(tmp_path / "imgs.tar.gz", "w:gz") as tar:
        tar.add(tmp_path / "imgs", arcname="imgs")
    raw2 = load_images(str(tmp_path / "imgs.tar.gz"), 4)
    assert len(raw2.images) == 4 and raw2.labels.tolist() == [0, 1, 0, 1]


def test_bad_data_paths(tmp_path):
    with pytest.raises(DataError, match="not found"):
        load_images(str(tmp_path / "nope"), 4)
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="no images"):
        load_images(str(tmp_path / "empty"), 4)


def test_to_model_input_resizes_and_normalises():
    raw = load_images("cifar10-test", 4)
    x = to_model_input(raw.images, 64, (0.5, 0.5, 0.5), (0.25, 0.25, 0.25))
    assert x.shape == (4, 3, 64, 64) and x.dtype == torch.float32
    assert x.min() >= -2.0 - 1e-5 and x.max() <= 2.0 + 1e-5
    s = load_images("synthetic", 3, image_size=40)
    assert s.images.shape == (3, 3, 40, 40) and s.labels is None and s.images.float().std() > 50


def test_seeded_builds_hand_out_a_fresh_build_copy_and_its_random_state():
    import torch

    from accelbench.models import SeededBuilds, create_model

    b = SeededBuilds()
    first = b.create("resnet18", 3)
    r1 = torch.rand(4)
    first.module.half()  # a case changes its own module in place: the cached build stays as built
    again = b.create("resnet18", 3)
    r2 = torch.rand(4)
    torch.manual_seed(3)
    fresh = create_model("resnet18")
    r3 = torch.rand(4)
    got, want = again.module.state_dict(), fresh.module.state_dict()
    assert again.module is not first.module and again.info == fresh.info
    assert got.keys() == want.keys() and all(torch.equal(got[k], want[k]) for k in want)
    assert torch.equal(r1, r3) and torch.equal(r2, r3)  # the random state after the build, cached or not
    other = b.create("resnet18", 4)  # another seed: built again
    assert not torch.equal(other.module.conv1.weight, fresh.module.conv1.weight) and b.key == ("resnet18", 4)
    b.create("helpers:counting_net", 3)  # a user factory may do anything: never cached
    assert b.key is None and b.module is None
