"""GPU tests run only with `-m gpu` on a machine with torch and a CUDA device; elsewhere they skip."""
import pytest


def pytest_collection_modifyitems(config, items):
    try:
        import torch
        have_gpu = torch.cuda.is_available()
    except ImportError:
        have_gpu = False
    if have_gpu:
        return
    skip = pytest.mark.skip(reason="needs torch with a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
