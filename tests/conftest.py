import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # tests/helpers.py as an importable factory module


def pytest_collection_modifyitems(config, items):
    try:
        import torch

        ngpu = torch.cuda.device_count() if torch.cuda.is_available() else 0
    except ImportError:
        ngpu = 0
    import shutil

    for item in items:
        if "gpu" in item.keywords and ngpu < 1:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU"))
        if "multigpu" in item.keywords and ngpu < 2:
            item.add_marker(pytest.mark.skip(reason="needs 2 or more CUDA GPUs"))
        if "ncu" in item.keywords and (ngpu < 1 or shutil.which("ncu") is None):
            item.add_marker(pytest.mark.skip(reason="needs ncu and a CUDA GPU"))


@pytest.fixture
def db(tmp_path):
    return tmp_path / "results.db"


@pytest.fixture(autouse=True)
def _threads():
    # Keep CPU tests predictable on a 2-core CI machine.
    os.environ.setdefault("OMP_NUM_THREADS", "2")
    yield


@pytest.fixture
def one_thread():
    """One torch intra-op thread for the test (restored after): small CPU kernels on a shared 2-core machine
    run several times faster than with 2 threads competing with other processes."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
