#!/usr/bin/env bash
# Downloads the wheels the accelerator lane needs on a JAX-on-CUDA machine without TensorFlow and
# without a package index (docs/contributing.md, "The accelerator lane"), into gpu_wheels/:
#
#   bash benchmarks/gpu_wheels.sh [DEST] [PYTHON_VERSIONS]
#
# DEST defaults to gpu_wheels (git-ignored), PYTHON_VERSIONS to "3.10 3.11 3.12" (a wheel for each
# of the binary packages per version; pip on the GPU machine picks its own). What such a machine is
# assumed to have: Python, pip, numpy, and jax with its CUDA plugin (jax brings ml-dtypes, scipy
# and opt-einsum). The lane's other imports:
#   keras 3.15 (pure Python)          -> absl-py, namex, packaging, rich (markdown-it-py, mdurl,
#                                        pygments): pure; h5py, optree: binary (cp3xx
#                                        manylinux); ml-dtypes: binary, already there with jax
#   optree                            -> typing-extensions (pure)
#   pytest                            -> pluggy, iniconfig, packaging, pygments (pure)
#   dm-env, dm-tree (the environments, not the lane itself) -> attrs (pure), dm-tree and wrapt:
#                                        binary
#   setuptools, wheel (pure)          -> `pip install --no-build-isolation .` of keras_relational
#                                        itself (benchmarks/gpu_session.py), where the machine
#                                        has no setuptools
#   simplicial-attention 0.1.6 (pure) -> einops (pure), opt-einsum (with jax), torch and triton
#                                        (on the GPU machine): lucidrains' Triton kernel, which
#                                        benchmarks/simplicial_kernel_speed.py runs beside ours
set -euo pipefail
DEST=${1:-gpu_wheels}
VERSIONS=${2:-"3.10 3.11 3.12"}
PIP=${PIP:-python -m pip}
PURE=(keras==3.15.1 namex rich markdown-it-py mdurl pygments absl-py packaging typing-extensions
      pytest pluggy iniconfig dm-env attrs setuptools wheel simplicial-attention==0.1.6 einops)
BINARY=(h5py optree dm-tree==0.1.10 wrapt)
mkdir -p "$DEST"
$PIP download --quiet --no-deps --only-binary=:all: -d "$DEST" "${PURE[@]}"
for version in $VERSIONS; do
  $PIP download --quiet --no-deps --only-binary=:all: --python-version "$version" \
    --implementation cp --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux_2_27_x86_64 --platform manylinux_2_28_x86_64 -d "$DEST" "${BINARY[@]}"
done
ls "$DEST"
du -sh "$DEST"
