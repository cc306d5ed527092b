"""keras_relational.experiments.devices: the notebooks' device report."""

import keras
import pytest

from keras_relational.experiments import devices


def test_the_report_names_the_backend_and_the_devices_or_the_gpu_hint():
    lines = []
    assert devices.report_devices(print_fn=lines.append) is None
    backend, names = keras.backend.backend(), devices.gpu_names()
    assert lines[0].startswith(f"Keras {keras.__version__}, {backend} backend: ")
    if names:  # a GPU machine: every GPU named, no hint
        assert lines == [lines[0]] and all(name in lines[0] for name in names)
        assert f"{len(names)} GPU" in lines[0]
    else:
        assert "no GPU found, running on the CPU" in lines[0]
        assert lines[1] == devices.COLAB_GPU_HINT
        assert "Runtime > Change runtime type" in lines[1]


def test_an_unknown_backend_is_an_error_naming_it():
    with pytest.raises(ValueError, match=r"`backend`: expected one of tensorflow, jax, torch, "
                                         r"received 'numpy'"):
        devices.gpu_names("numpy")
