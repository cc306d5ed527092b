"""The layers, one public class a module. Importing this package imports every layer, which
registers them all with Keras' serialization (so ``keras.saving.load_model`` finds them)."""

from keras_relational.layers.conv_stack_memory import ConvStackMemory
from keras_relational.layers.conv_stack_memory_cell import ConvStackMemoryCell
from keras_relational.layers.entity_max_pool import EntityMaxPool
from keras_relational.layers.mlp_central import MLPCentral
from keras_relational.layers.multi_head_attention_central import MultiHeadAttentionCentral
from keras_relational.layers.multi_head_dot_product_attention import MultiHeadDotProductAttention
from keras_relational.layers.predinet import PrediNet
from keras_relational.layers.relation_net_central import RelationNetCentral
from keras_relational.layers.relational_block import RelationalBlock
from keras_relational.layers.relational_module import RelationalModule
from keras_relational.layers.sequence_simplicial_attention import SequenceSimplicialAttention
from keras_relational.layers.shift_entropy_penalty import ShiftEntropyPenalty
from keras_relational.layers.simplicial_attention import SimplicialAttention
from keras_relational.layers.simplicial_transformer_block import SimplicialTransformerBlock
from keras_relational.layers.spatial_entities import SpatialEntities
from keras_relational.layers.symbol_convolution import SymbolConvolution
from keras_relational.layers.tpr_memory import TPRMemory
from keras_relational.layers.tpr_memory_cell import TPRMemoryCell
from keras_relational.layers.tpr_sentence_encoder import TPRSentenceEncoder

__all__ = [
    "ConvStackMemory",
    "ConvStackMemoryCell",
    "EntityMaxPool",
    "MLPCentral",
    "MultiHeadAttentionCentral",
    "MultiHeadDotProductAttention",
    "PrediNet",
    "RelationNetCentral",
    "RelationalBlock",
    "RelationalModule",
    "SequenceSimplicialAttention",
    "ShiftEntropyPenalty",
    "SimplicialAttention",
    "SimplicialTransformerBlock",
    "SpatialEntities",
    "SymbolConvolution",
    "TPRMemory",
    "TPRMemoryCell",
    "TPRSentenceEncoder",
]
