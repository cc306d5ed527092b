"""Every layer's mixed-precision cases for ``layer_contract.check_mixed_precision``.

A case is one layer configuration and its inputs in several variants: the degenerate inputs of
the float32 tests (all zeros, collinear entities, pairwise orthogonal entities, fully masked
rows) next to random ones. ``tests/layers/test_mixed_precision.py`` runs every case on the test
process's backend and, through ``python tests/mixed_precision_cases.py``, the cases of
``JAX_CASES`` in one fresh JAX process (every case there takes minutes of XLA compilation on a
2-core CPU: run the script without arguments for all of them).

Run as a script: checks the cases named on the command line (default: every case) on the
``KERAS_BACKEND`` backend and prints the failures as JSON (an empty list when all pass).
"""

import json
import os
import sys

if __name__ == "__main__":
    # Compile fast, run slow: every layer is compiled three times (float32 and both 16-bit
    # policies) for tiny inputs; XLA's optimisation passes dominate the run time on a CPU.
    os.environ.setdefault("XLA_FLAGS", "--xla_backend_optimization_level=0 "
                                       "--xla_llvm_disable_expensive_passes=true")

import numpy as np  # noqa: E402
from layer_contract import check_mixed_precision  # noqa: E402

B, N, F = 2, 5, 6  # N <= F: N pairwise orthogonal entities exist


def _entities(seed, count=N, features=F):
    return np.random.RandomState(seed).normal(size=(B, count, features)).astype("float32")


def _variants(x, rng):
    """A rank-3 float input ``[B, N, F]`` as random, zeros, collinear and orthogonal entities."""
    b, n, f = x.shape
    collinear = rng.normal(size=(b, n, 1)) * rng.normal(size=(b, 1, f))
    orthogonal = np.eye(n, f)[None] * rng.uniform(0.5, 2.0, size=(b, n, 1))
    return {"random": x, "zeros": np.zeros_like(x), "collinear": collinear.astype(x.dtype),
            "orthogonal": orthogonal.astype(x.dtype)}


def _mask(count, fully_masked_row=True):
    """``[B, count]``: batch 0 fully masked (or all but entity 0), batch 1 half masked."""
    mask = np.ones((B, count), bool)
    mask[0, 1:] = False
    if fully_masked_row:
        mask[0, 0] = False
    mask[1, count // 2:] = False
    return mask


def _layers():
    import keras_relational as kr

    return kr


def cases():
    """``(name, make_layer(dtype), args, masks)``: ``args`` the positional call arguments (the
    first one varied as degenerate entities when it is rank 3), ``masks`` the Keras masks to
    try (``None`` means: no masked variant)."""
    kr = _layers()
    rng = np.random.RandomState(0)
    grid = np.zeros((B, 12, 3), "float32")
    grid[np.arange(B)[:, None], rng.randint(12, size=(B, 3)), np.arange(3)] = 1.0
    steps = rng.normal(size=(B, 4, 4)).astype("float32")
    logits = rng.normal(size=(B, 4, 4, 3))
    filters = (np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)).reshape(B, 4, 12)
    tokens = np.array([[1, 2, 0, 0], [3, 4, 5, 6]], "int32")
    stories = rng.randint(1, 12, size=(B, 3, 5)).astype("int32")
    stories[..., -2:] = 0
    tpr_inputs = [rng.normal(size=(B, 4, 10)).astype("float32"),
                  rng.normal(size=(B, 10)).astype("float32")]
    return [
        ("MultiHeadDotProductAttention",
         lambda dtype: kr.MultiHeadDotProductAttention(2, 4, output_dim=3, dtype=dtype),
         (_entities(1),), [_mask(N)]),
        ("MultiHeadDotProductAttention[separate,rmc]",
         lambda dtype: kr.MultiHeadDotProductAttention(2, 4, qkv_norm="separate",
                                                       attention_scale="rmc", dtype=dtype),
         (_entities(2),), [_mask(N)]),
        ("MultiHeadDotProductAttention[none]",
         lambda dtype: kr.MultiHeadDotProductAttention(2, 4, qkv_norm="none", dtype=dtype),
         (_entities(3),), [_mask(N)]),
        ("RelationalBlock",
         lambda dtype: kr.RelationalBlock(2, 4, mlp_hidden_units=(8,), dtype=dtype),
         (_entities(4),), [_mask(N)]),
        ("RelationalModule",
         lambda dtype: kr.RelationalModule(num_blocks=2, num_heads=2, key_dim=4, model_dim=8,
                                           dtype=dtype),
         (_entities(5),), [_mask(N)]),
        ("SimplicialAttention[virtual]",
         lambda dtype: kr.SimplicialAttention(2, 3, value_dim=2, dtype=dtype),
         (_entities(6),), [_mask(N)]),
        ("SimplicialAttention[full]",
         lambda dtype: kr.SimplicialAttention(2, 3, value_dim=2, mode="full", use_bias=True,
                                              dtype=dtype),
         (_entities(7),), [_mask(N)]),
        ("SimplicialTransformerBlock",
         lambda dtype: kr.SimplicialTransformerBlock(
             num_heads=2, key_dim=3, simplicial_num_heads=2, simplicial_key_dim=3,
             mlp_hidden_units=(5,), dtype=dtype),
         (_entities(8),), [_mask(N)]),
        ("SequenceSimplicialAttention",
         lambda dtype: kr.SequenceSimplicialAttention(2, 3, num_key_value_heads=1,
                                                      window=(3, 2), query_chunk_size=2,
                                                      dtype=dtype),
         (_entities(14),), [_mask(N)]),
        ("SequenceSimplicialAttention[triple_product]",
         lambda dtype: kr.SequenceSimplicialAttention(2, 3, window=(3, 3), causal=False,
                                                      logit_form="triple_product",
                                                      dtype=dtype),
         (_entities(15),), [_mask(N)]),
        ("EntityMaxPool", lambda dtype: kr.EntityMaxPool(dtype=dtype), (_entities(9),),
         # A fully masked row pools to the dtype's lowest value: -65504 in float16.
         [_mask(N, fully_masked_row=False)]),
        ("PrediNet",
         lambda dtype: kr.PrediNet(num_heads=2, key_dim=3, num_relations=4, dtype=dtype),
         (_entities(10),), None),
        ("MLPCentral", lambda dtype: kr.MLPCentral(hidden_units=(6, 5), dtype=dtype),
         (_entities(11),), None),
        ("RelationNetCentral",
         lambda dtype: kr.RelationNetCentral(hidden_units=4, output_dim=3, dtype=dtype),
         (_entities(12),), None),
        ("MultiHeadAttentionCentral",
         lambda dtype: kr.MultiHeadAttentionCentral(num_heads=2, key_dim=3, value_dim=4,
                                                    dtype=dtype),
         (_entities(13),), None),
        ("SpatialEntities", lambda dtype: kr.SpatialEntities(dtype=dtype),
         (rng.normal(size=(B, 3, 4, 2)).astype("float32"),), None),
        ("SymbolConvolution",
         lambda dtype: kr.SymbolConvolution(2, use_bias=True, dtype=dtype), (grid,), None),
        ("ConvStackMemory[gated]",
         lambda dtype: kr.ConvStackMemory(4, stack_depth=6, return_sequences=True,
                                          dtype=dtype), (steps,), None),
        ("ConvStackMemory[embedding_on_push]",
         lambda dtype: kr.ConvStackMemory(4, stack_depth=6, write_mode="embedding_on_push",
                                          return_sequences=True, dtype=dtype), (steps,), None),
        ("ShiftEntropyPenalty", lambda dtype: kr.ShiftEntropyPenalty(0.5, dtype=dtype),
         (steps, filters.astype("float32"), tokens), None),
        ("TPRMemory[factored]",
         lambda dtype: kr.TPRMemory(6, 4, 8, dtype=dtype), (tpr_inputs,), [_mask(4)]),
        ("TPRMemory[dense]",
         lambda dtype: kr.TPRMemory(6, 4, 8, implementation="dense", dtype=dtype),
         (tpr_inputs,), [_mask(4, fully_masked_row=False)]),
        ("TPRSentenceEncoder",
         lambda dtype: kr.TPRSentenceEncoder(12, symbol_dim=6, dtype=dtype), (stories,), None),
    ]


# The layers whose own code has 16-bit paths (float32 logits, softmax, norms, mask constants),
# checked on JAX by the test suite; the others only compose Keras layers and these.
JAX_CASES = ("MultiHeadDotProductAttention", "PrediNet", "MultiHeadAttentionCentral",
             "SimplicialAttention[virtual]", "SimplicialAttention[full]",
             "EntityMaxPool", "ShiftEntropyPenalty")


def case_names():
    return [name for name, *_ in cases()]


# Layers whose output is compared with float32 stage by stage, not end to end (see
# check_tpr_memory_stages): the end-to-end output is checked finite only.
_STAGED = ("TPRMemory[factored]", "TPRMemory[dense]")


def check_tpr_memory_stages(make_layer, args, call_kwargs):
    """Failure messages of TPRMemory under each 16-bit policy, checked in its two stages.

    TPRMemory's output is three chained layer norms (epsilon 1e-7) of reads from its memory. A
    read whose cue nearly misses the stored keys nearly vanishes (a one-sentence story, an
    orthogonal or collinear one), and the norm scales its absolute error up by 1/std of the read
    (20 to 60 times on the contract's inputs): the float32 layer itself moves by more than the
    end-to-end tolerance when only its weights and inputs are rounded to bfloat16, so an
    end-to-end comparison fails a correct layer for some draws of the weights (and passed one
    that binds and reads its memory in 16 bits for most of them). The two stages instead:

    1. the 16-bit stage, the update and inference MLPs (the policy's compute dtype), within
       ``MIXED_PRECISION_TOLERANCE`` of the float32 layer's MLPs (well conditioned);
    2. the float32 stage, memory, reads and norms: the 16-bit layer's output equals the float64
       reference (tests/reference_tpr_memory.py) run on the 16-bit layer's own MLP outputs, up
       to the final rounding to the compute dtype (``UNIT_ROUNDOFF``) and float32 rounding
       amplified by the norms (1e-4 of the scale). A memory, read or norm computed in 16 bits
       misses this by 3.7 to 800 times under bfloat16 (six draws of the weights).
    """
    import keras
    from layer_contract import MIXED_PRECISION_TOLERANCE, UNIT_ROUNDOFF
    from reference_tpr_memory import chained_reads, memory_from_parts

    def to_numpy(x):
        return np.asarray(keras.ops.convert_to_numpy(keras.ops.cast(x, "float32")), "float64")

    reference = make_layer(dtype="float32")
    _, expected = reference(*args, return_internals=True, **call_kwargs)
    mask = call_kwargs.get("mask")
    failures = []
    for policy, tolerance in MIXED_PRECISION_TOLERANCE.items():
        layer = make_layer(dtype=policy)
        layer(*args, **call_kwargs)
        layer.set_weights(reference.get_weights())
        output, internals = layer(*args, return_internals=True, **call_kwargs)
        names = (*layer.update_names, *layer.inference_names)
        for name in names:
            e, a = to_numpy(expected[name]), to_numpy(internals[name])
            scale = max(1.0, float(np.max(np.abs(e), initial=0.0)))
            error = float(np.max(np.abs(a - e), initial=0.0))
            if not error <= tolerance * scale:
                failures.append(f"{policy}: MLP output {name} differs from float32 by "
                                f"{error:.3g} > {tolerance} * {scale:.3g}")
        parts = {n: to_numpy(internals[n]) for n in layer.update_names}
        steps = parts["e1"].shape[:2]
        memory = memory_from_parts(parts, np.ones(steps) if mask is None else mask,
                                   layer.use_move, layer.use_backlink)
        # The norms' scalars as the 16-bit layer reads them: autocast to its compute dtype.
        gain, bias = (to_numpy(keras.ops.cast(v.value, layer.compute_dtype))
                      for v in (layer.ln_gain, layer.ln_bias))
        path = chained_reads(memory, {n: to_numpy(internals[n]) for n in layer.inference_names},
                             gain, bias, layer.layer_norm_epsilon)
        scale = max(1.0, float(np.max(np.abs(path), initial=0.0)))
        error = np.abs(to_numpy(output) - path)
        allowed = UNIT_ROUNDOFF[policy] * np.abs(path) + 1e-4 * scale
        if not np.all(error <= allowed):
            failures.append(f"{policy}: output differs from the float64 memory and reads on its "
                            f"own MLP outputs by {float(np.max(error / allowed)):.3g} times the "
                            f"final rounding to {layer.compute_dtype}")
    return failures


def keras_tree_flatten(x):
    import keras

    return keras.tree.flatten(x)


def keras_tree_pack(structure, flat):
    import keras

    return keras.tree.pack_sequence_as(structure, flat)


def _tile(x, times):
    return x if not isinstance(x, np.ndarray) else np.concatenate([x] * times)


def check_case(name):
    """Failure messages of the case ``name``: one call on a batch of every input variant (each
    of the layers treats batch rows independently), one with each of its masks."""
    (_, make_layer, args, masks), = [case for case in cases() if case[0] == name]
    first = args[0]
    sentences = first[0] if isinstance(first, list) else first  # TPRMemory: [sentences, q]
    runs = []
    compare = name not in _STAGED
    if isinstance(sentences, np.ndarray) and sentences.ndim == 3 and sentences.dtype.kind == "f":
        kinds = _variants(sentences, np.random.RandomState(1))
        batch = np.concatenate(list(kinds.values()))
        times = len(kinds)
        head = [batch, _tile(first[1], times)] if isinstance(first, list) else batch
        runs.append([list(kinds), [head, *(_tile(x, times) for x in args[1:])], {}, compare])
    else:
        runs.append([["random", "zeros"], [np.concatenate([x, np.zeros_like(x)])
                                           if x.dtype.kind == "f" else _tile(x, 2)
                                           for x in args], {}, compare])
    for mask in masks or ():  # the masked rows join the first run: one compilation per policy
        group, call_args, _, _ = runs[0]
        rows = len(call_args[0][0] if isinstance(call_args[0], list) else call_args[0])
        joined = [np.concatenate([x, y]) for x, y in zip(keras_tree_flatten(call_args),
                                                          keras_tree_flatten(list(args)),
                                                          strict=True)]
        call_args = keras_tree_pack(call_args, joined)
        full_mask = np.concatenate([np.ones((rows, mask.shape[1]), bool), mask])
        runs[0] = [group + ["masked"], call_args, {"mask": full_mask}, runs[0][3]]
    failures = []
    for kinds, call_args, call_kwargs, compare in runs:
        messages = check_mixed_precision(make_layer, tuple(call_args), call_kwargs,
                                         compare=compare)
        if name in _STAGED:
            messages += check_tpr_memory_stages(make_layer, tuple(call_args), call_kwargs)
        failures += [f"{name} [{'+'.join(kinds)}] {message}" for message in messages]
    return failures


def main(names):
    failures = []
    for name in names or case_names():
        try:
            failures += check_case(name)
        except Exception as error:  # report every layer, not the first one that raises
            failures.append(f"{name}: {type(error).__name__}: {error}")
    print(json.dumps(failures))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
