"""Mixed-size images (an ImageNet-like folder): each image gets the evaluation transform on its own."""

from __future__ import annotations

import numpy as np
import torch


def _tree(root, sizes):
    from PIL import Image

    g = np.random.default_rng(0)
    for k, (w, h) in enumerate(sizes):
        d = root / f"c{k % 2}"
        d.mkdir(parents=True, exist_ok=True)
        Image.fromarray(g.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(d / f"img{k}.png")


def test_each_image_is_resized_and_cropped_on_its_own(tmp_path):
    from PIL import Image

    from accelbench.data import load_images, to_model_input
    from accelbench.data.transforms import EvalTransform, apply

    _tree(tmp_path, [(80, 60), (48, 96), (80, 60), (48, 96)])
    raw = load_images(str(tmp_path), 4)
    assert isinstance(raw.images, list) and {tuple(a.shape) for a in raw.images} == {(3, 60, 80), (3, 96, 48)}
    t = EvalTransform(size=32, resize=36)
    x = to_model_input(raw.images, 32, (0.0, 0.0, 0.0), (1.0, 1.0, 1.0), transform=t)
    decoded = [
        torch.from_numpy(np.asarray(Image.open(f).convert("RGB"))).permute(2, 0, 1)
        for f in sorted(tmp_path.rglob("*.png"))
    ]
    for i, a in enumerate(raw.images):
        # the file this tensor came from, decoded alone: the same pixels, and its own transform is the model input
        (img,) = [d for d in decoded if d.shape == a.shape and torch.equal(d, a)]
        want = apply(img[None].float() / 255, t)[0]
        assert torch.allclose(x[i], want, atol=1e-6)
    # a shorter-side resize keeps each aspect ratio: a squashed 48x96 image would differ
    tall = next(i for i, a in enumerate(raw.images) if a.shape[1] == 96)
    squashed = apply(
        torch.nn.functional.interpolate(
            raw.images[tall][None].float() / 255, size=(60, 80), mode="bilinear", antialias=True
        ),
        t,
    )[0]
    assert not torch.allclose(x[tall], squashed, atol=1e-2)


def test_one_size_still_stacks(tmp_path):
    from accelbench.data import load_images

    _tree(tmp_path, [(40, 30)] * 4)
    raw = load_images(str(tmp_path), 4)
    assert isinstance(raw.images, torch.Tensor) and tuple(raw.images.shape) == (4, 3, 30, 40)
