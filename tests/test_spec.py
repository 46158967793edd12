import pytest
from specs import build_spec, expand

from accelbench.core.config import load_toml, parse_list
from accelbench.core.errors import ConfigError
from accelbench.scenarios.inference import CPU_DEFAULTS, GPU_DEFAULTS


def test_gpu_default_is_full_study():
    spec = build_spec(cuda=True)
    assert spec.batch_sizes == (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
    assert spec.precisions == ("fp32", "tf32", "amp-fp16", "amp-bf16")
    assert spec.modes == ("eager", "compile")
    assert spec.images == 1000 and spec.models == ("resnet50",) and spec.data == "cifar10-test"
    assert len(expand(spec)) == 11 * 4 * 2


def test_cpu_default_is_small():
    spec = build_spec(cuda=False)
    assert spec.batch_sizes == CPU_DEFAULTS["batch_sizes"] and spec.images == CPU_DEFAULTS["images"]
    assert len(expand(spec)) == 3


def test_expand_order_and_keys():
    spec = build_spec({"batch_sizes": "1,8", "precisions": "fp32,amp-bf16", "modes": "eager"}, cuda=False)
    cases = expand(spec, "cpu")
    assert [(c.precision, c.batch_size) for c in cases] == [("fp32", 1), ("fp32", 8), ("amp-bf16", 1), ("amp-bf16", 8)]
    assert cases[0].key == "resnet50|bs=1|fp32|eager|cl=auto"
    assert len({c.key for c in cases}) == 4 and all(c.device == "cpu" for c in cases)


@pytest.mark.parametrize(
    "layer, field, allowed",
    [
        ({"precisions": "fp32,fp4"}, "precision", "amp-bf16"),
        ({"modes": "jit"}, "mode", "cudagraphs"),
        ({"batch_sizes": "0,8"}, "batch_sizes", "positive integers"),
        ({"batch_sizes": "a,b"}, "batch_sizes", "integers"),
        ({"device": "tpu"}, "device", "cuda:N"),
        ({"images": 0}, "images", ">= 1"),
        ({"colour": "red"}, "config key", "batch_sizes"),
    ],
)
def test_invalid_values_name_field_and_allowed(layer, field, allowed):
    with pytest.raises(ConfigError) as info:
        build_spec(layer, cuda=False)
    msg = str(info.value)
    assert msg.startswith(f"invalid {field} ") and allowed in msg and "\n" not in msg


def test_toml_then_flags_override(tmp_path):
    cfg = tmp_path / "sweep.toml"
    cfg.write_text('model = "cifar-resnet20"\nbatch_sizes = [2, 4]\nprecisions = ["bf16"]\n[unused]\n')
    cfg.write_text('[sweep]\nmodel = "cifar-resnet20"\nbatch_sizes = [2, 4]\nprecisions = ["bf16"]\nimages = 10\n')
    spec = build_spec(load_toml(cfg), {"batch_sizes": "16", "images": None}, cuda=False)
    assert spec.models == ("cifar-resnet20",) and spec.batch_sizes == (16,) and spec.precisions == ("bf16",)
    assert spec.images == 10


def test_malformed_toml_is_one_line_error(tmp_path):
    cfg = tmp_path / "bad.toml"
    cfg.write_text("batch_sizes = [1, 2\n")
    with pytest.raises(ConfigError, match="invalid config"):
        load_toml(cfg)
    with pytest.raises(ConfigError, match="readable TOML"):
        load_toml(tmp_path / "missing.toml")


def test_spec_hash_stable_and_sensitive():
    a = build_spec({"batch_sizes": "1,2"}, cuda=False)
    assert a.spec_hash() == build_spec({"batch_sizes": [1, 2]}, cuda=False).spec_hash()
    assert a.spec_hash() != build_spec({"batch_sizes": "1,4"}, cuda=False).spec_hash()


def test_parse_list():
    assert parse_list("batch_sizes", "1, 8,32") == (1, 8, 32)
    assert parse_list("models", "a,b") == ("a", "b")
    assert parse_list("batch_sizes", 4) == (4,)
    assert GPU_DEFAULTS["images"] == 1000
