"""keras-relational: relational reasoning layers for Keras 3.

Importing this package has no side effects and loads neither Keras nor TensorFlow: the public
layer names below are resolved lazily, on first use (PEP 562), so that
``import keras_relational.environments`` stays a NumPy + dm_env import. It never touches
``tf.keras`` or ``TF_USE_LEGACY_KERAS`` (only ``keras_relational.agents.tf_agents`` does, for
TF-Agents).

```python
from keras_relational import SimplicialAttention  # imports Keras here, on first use
```

Loading a saved ``.keras`` model needs the layers registered: use any layer name first, or
``import keras_relational.layers``, which imports and registers them all.
"""

import importlib

from keras_relational.version import __version__

# Public name -> the module (under keras_relational.layers) that defines it. The first use of any
# of them imports `keras_relational.layers`, which imports (and so registers for
# `keras.saving.load_model`) every layer.
_LAYERS = {
    "ConvStackMemory": "conv_stack_memory",
    "ConvStackMemoryCell": "conv_stack_memory_cell",
    "EntityMaxPool": "entity_max_pool",
    "MLPCentral": "mlp_central",
    "MultiHeadAttentionCentral": "multi_head_attention_central",
    "MultiHeadDotProductAttention": "multi_head_dot_product_attention",
    "PrediNet": "predinet",
    "RelationNetCentral": "relation_net_central",
    "RelationalBlock": "relational_block",
    "RelationalModule": "relational_module",
    "SequenceSimplicialAttention": "sequence_simplicial_attention",
    "ShiftEntropyPenalty": "shift_entropy_penalty",
    "SimplicialAttention": "simplicial_attention",
    "SimplicialTransformerBlock": "simplicial_transformer_block",
    "SpatialEntities": "spatial_entities",
    "SymbolConvolution": "symbol_convolution",
    "TPRMemory": "tpr_memory",
    "TPRMemoryCell": "tpr_memory_cell",
    "TPRSentenceEncoder": "tpr_sentence_encoder",
}

__all__ = sorted(_LAYERS) + ["__version__"]


def __getattr__(name):
    if name in _LAYERS:
        importlib.import_module("keras_relational.layers")
        value = getattr(importlib.import_module(f"keras_relational.layers.{_LAYERS[name]}"), name)
        globals()[name] = value  # later lookups skip this function
        return value
    raise AttributeError(f"module 'keras_relational' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
