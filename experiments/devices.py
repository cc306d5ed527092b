"""The devices Keras' backend sees: the notebooks' first cells report them.

``report_devices()`` prints the Keras backend and the GPUs it found; on a CPU-only runtime it says
how to choose a GPU runtime in Colab. It imports only the framework of Keras' backend
(TensorFlow under ``KERAS_BACKEND=tensorflow``, JAX under ``jax``, torch under ``torch``), so under
JAX it loads no TensorFlow.

Example::

    from keras_relational.experiments.devices import report_devices

    report_devices()
    # Keras 3.15.1, tensorflow backend: no GPU found, running on the CPU (2 cores).
    # To train on a GPU in Colab: Runtime > Change runtime type > Hardware accelerator: a GPU
    # (e.g. T4), then run the notebook again from the top.
"""

import os

COLAB_GPU_HINT = ("To train on a GPU in Colab: Runtime > Change runtime type > Hardware "
                  "accelerator: a GPU (e.g. T4), then run the notebook again from the top.")


def gpu_names(backend=None):
    """The names of the GPUs that Keras' backend (or ``backend``) sees; ``[]`` on a CPU.

    Raises:
        ValueError: for a backend other than tensorflow, jax and torch.
    """
    if backend is None:
        import keras

        backend = keras.backend.backend()
    if backend == "jax":
        import jax

        try:
            devices = jax.devices("gpu")
        except RuntimeError:  # jaxlib without a CUDA plugin, or no visible device
            return []
        return [f"{device.device_kind} ({device})" for device in devices]
    if backend == "tensorflow":
        import tensorflow as tf

        names = []
        for device in tf.config.list_physical_devices("GPU"):
            details = tf.config.experimental.get_device_details(device)
            names.append(f"{details.get('device_name', 'GPU')} ({device.name})")
        return names
    if backend == "torch":
        import torch

        return [f"{torch.cuda.get_device_name(i)} (cuda:{i})"
                for i in range(torch.cuda.device_count())]
    raise ValueError(f"`backend`: expected one of tensorflow, jax, torch, received {backend!r}.")


def report_devices(print_fn=print):
    """Prints the Keras backend and the GPUs found; without a GPU, how to choose a GPU runtime.

    Returns nothing (a notebook cell ending with the call shows only the printed lines);
    :func:`gpu_names` gives the names.
    """
    import keras

    backend = keras.backend.backend()
    names = gpu_names(backend)
    if names:
        print_fn(f"Keras {keras.__version__}, {backend} backend: {len(names)} GPU"
                 f"{'s' if len(names) > 1 else ''} found: {', '.join(names)}.")
    else:
        print_fn(f"Keras {keras.__version__}, {backend} backend: no GPU found, running on the CPU "
                 f"({os.cpu_count()} cores).")
        print_fn(COLAB_GPU_HINT)
