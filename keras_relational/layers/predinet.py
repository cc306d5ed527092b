"""PrediNet: entities -> a flat vector of propositions (Shanahan et al. 2020, Sec. 2)."""

import keras
from keras import ops

from keras_relational import validation
from keras_relational.layers import _utils, initializers


def default_kernel_initializer():
    """Truncated normal, mean 0, stddev 0.1, re-drawn beyond 2 stddev (Shanahan et al. 2020,
    reference notebook; the same for every model of the paper)."""
    return initializers.truncated_normal_kernel()


@keras.saving.register_keras_serializable(package="keras_relational")
class PrediNet(keras.layers.Layer):
    """PrediNet central module: each head picks two entities and compares them along shared axes.

    In words (letters: B batch, N entities, m features per entity, H heads, g key/query size,
    j relations): the entities ``L`` (``[B, N, m]``, the last ``position_dims`` features being the
    entity's position) get keys ``K = L W_K`` through a projection shared by all heads. The whole
    input is flattened entity-major (``F[b, n*m + f] = L[b, n, f]``) and two linear maps give two
    queries per head, ``Q1 = F W_Q1`` and ``Q2 = F W_Q2`` (``[B, H, g]``). Each query attends over
    the entities with an unscaled softmax, ``A1 = softmax_N(Q1 K^T)`` and ``A2 = softmax_N(Q2 K^T)``
    (``[B, H, N]``), selecting two soft entities ``E1 = A1 L`` and ``E2 = A2 L`` (``[B, H, m]``,
    the raw entity vectors, positions included). A projection shared by all heads and both
    entities maps each onto ``j`` relation axes and the head's relation values are the signed
    difference ``D = E1 W_S - E2 W_S`` (``[B, H, j]``). Each head outputs ``[D, P1, P2]``, where
    ``P1``/``P2`` are the last ``position_dims`` features of ``E1``/``E2`` (the attention-weighted
    positions), and the heads are concatenated head-major into ``[B, H * (j + 2 * position_dims)]``.
    No weight has a bias; there is no nonlinearity, normalisation or residual.

    Because the queries read the flattened input, ``W_Q1`` and ``W_Q2`` are position-specific
    (``[N*m, H*g]``): the layer needs a fixed, known ``N`` when built and is *not* invariant to
    the order of the entities. It works for any batch size, including 1, and any number of heads.

    Where the paper is silent, the defaults follow the authors' reference notebook:
    the attention logits are not scaled by ``1/sqrt(g)``; the comparator is the signed difference
    (no ``abs``); positions are attention-weighted, not argmax; ``W_S`` and ``W_K`` also see the
    positions; weights are initialised with a truncated normal of stddev 0.1.

    Args:
        num_heads: H, the number of heads. Defaults to 32 (Shanahan et al. 2020, Table S2).
        key_dim: g, the size of keys and queries. Defaults to 16 (Table S2).
        num_relations: j, the number of relation axes (columns of ``W_S``). Defaults to 16
            (Table S2).
        position_dims: how many trailing features of each entity are its position and are copied
            to the output as ``P1``/``P2``. Defaults to 2, the (x, y) coordinates (Sec. 2); 0
            outputs ``D`` only.
        kernel_initializer: initializer of ``W_K``, ``W_Q1``, ``W_Q2`` and ``W_S``. ``None`` (the
            default) means truncated normal, stddev 0.1 (reference notebook). Each weight gets its
            own clone.
        query_network: ``None`` (the default: the queries read the flattened input, as in
            Sec. 2) or a Keras layer mapping the entities ``[B, N, m]`` to a vector ``[B, q]``
            that replaces the flattened input ``F``; ``W_Q1`` and ``W_Q2`` are then ``[q, H*g]``.
            The Atari agent (Supplement S11) uses a small strided CNN over the feature map here,
            which makes the query weights independent of ``N``.
        **kwargs: standard ``keras.layers.Layer`` arguments (``name``, ``dtype``, ...).

    Call arguments:
        inputs: entities of shape ``[B, N, m]`` with ``N`` and ``m`` known.
        return_attention_scores: if True, also return the two attention masks.

    Returns:
        The propositions ``[B, H * (j + 2 * position_dims)]``; with
        ``return_attention_scores=True`` the tuple ``(propositions, A1, A2)``, with ``A1`` and
        ``A2`` of shape ``[B, H, N]`` (each sums to 1 over ``N``).

    Example:

    >>> entities = np.random.rand(2, 25, 34).astype("float32")
    >>> layer = keras_relational.PrediNet(num_heads=4, key_dim=5, num_relations=6)
    >>> outputs, attention_1, attention_2 = layer(entities, return_attention_scores=True)
    >>> tuple(outputs.shape), tuple(attention_1.shape)
    ((2, 40), (2, 4, 25))

    Reference: Shanahan, Nikiforou, Creswell, Kaplanis, Barrett, Garnelo, "An Explicitly
    Relational Neural Network Architecture", ICML 2020.
    """

    def __init__(
        self,
        num_heads=32,  # Shanahan et al. 2020, Table S2
        key_dim=16,  # Shanahan et al. 2020, Table S2
        num_relations=16,  # Shanahan et al. 2020, Table S2
        position_dims=2,  # Shanahan et al. 2020, Sec. 2: (x, y) appended to each entity
        kernel_initializer=None,
        query_network=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        validation.check_positive_int("PrediNet", "num_heads", num_heads)
        validation.check_positive_int("PrediNet", "key_dim", key_dim)
        validation.check_positive_int("PrediNet", "num_relations", num_relations)
        validation.check_positive_int("PrediNet", "position_dims", position_dims, allow_zero=True)
        self.num_heads = num_heads
        self.key_dim = key_dim
        self.num_relations = num_relations
        self.position_dims = position_dims
        if kernel_initializer is None:
            kernel_initializer = default_kernel_initializer()
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        if isinstance(query_network, dict):
            query_network = keras.saving.deserialize_keras_object(query_network)
        if query_network is not None and not isinstance(query_network, keras.layers.Layer):
            raise ValueError(f"PrediNet expects `query_network` to be None or a Keras layer, "
                             f"received query_network={query_network!r}.")
        self.query_network = query_network

    @property
    def head_output_dim(self):
        """Size of one head's output, ``j + 2 * position_dims``."""
        return self.num_relations + 2 * self.position_dims

    def build(self, input_shape):
        validation.check_rank(self, "inputs", input_shape, 3, "[batch, entities, features]")
        num_entities = validation.check_known_dim(self, "inputs", input_shape, 1,
                                               "number of entities N")
        features = validation.check_known_dim(self, "inputs", input_shape, 2, "feature size m")
        if features < self.position_dims:
            raise ValueError(
                f"PrediNet expects the feature size of `inputs` (axis 2) to be at least "
                f"position_dims={self.position_dims}, received shape {tuple(input_shape)}."
            )
        self.num_entities = num_entities
        self.features = features
        queries = self.num_heads * self.key_dim
        query_inputs = num_entities * features
        if self.query_network is not None:
            if not self.query_network.built:
                self.query_network.build(tuple(input_shape))
            query_shape = self.query_network.compute_output_shape(tuple(input_shape))
            if len(query_shape) != 2 or query_shape[-1] is None:
                raise ValueError(f"PrediNet expects `query_network` to map `inputs` to a vector "
                                 f"[batch, q] with q known, received output shape "
                                 f"{tuple(query_shape)} for inputs {tuple(input_shape)}.")
            query_inputs = int(query_shape[-1])

        def weight(name, shape):
            return self.add_weight(name=name, shape=shape,
                                   initializer=_utils.clone_initializer(self.kernel_initializer))

        self.key_kernel = weight("key_kernel", (features, self.key_dim))
        self.query_kernel_1 = weight("query_kernel_1", (query_inputs, queries))
        self.query_kernel_2 = weight("query_kernel_2", (query_inputs, queries))
        self.relation_kernel = weight("relation_kernel", (features, self.num_relations))
        super().build(input_shape)

    def _attend(self, flat, keys, query_kernel):
        """One attention mask per head, ``[B, H, N]``."""
        queries = ops.reshape(ops.matmul(flat, query_kernel), (-1, self.num_heads, self.key_dim))
        # Unscaled (reference notebook); float32 under a 16-bit policy (a float16 logit
        # overflows past 65504), the weights back in the compute dtype.
        logits = ops.einsum("bhg,bng->bhn", _utils.at_least_float32(queries),
                            _utils.at_least_float32(keys))
        return ops.cast(ops.softmax(logits, axis=-1), keys.dtype)

    def call(self, inputs, return_attention_scores=False):
        # Its query kernels flatten all N entities, so N is fixed when it is built.
        validation.check_built_shape(self, "inputs", inputs.shape,
                                     (None, self.num_entities, self.features),
                                     "[batch, entities N, features m]")
        keys = ops.einsum("bnm,mg->bng", inputs, self.key_kernel)
        if self.query_network is not None:
            flat = self.query_network(inputs)
        else:
            flat = ops.reshape(inputs, (-1, self.num_entities * self.features))
        attention_1 = self._attend(flat, keys, self.query_kernel_1)
        attention_2 = self._attend(flat, keys, self.query_kernel_2)
        entity_1 = ops.einsum("bhn,bnm->bhm", attention_1, inputs)
        entity_2 = ops.einsum("bhn,bnm->bhm", attention_2, inputs)
        difference = (ops.einsum("bhm,mj->bhj", entity_1, self.relation_kernel)
                      - ops.einsum("bhm,mj->bhj", entity_2, self.relation_kernel))
        parts = [difference]
        if self.position_dims:
            parts += [entity_1[..., self.features - self.position_dims:],
                      entity_2[..., self.features - self.position_dims:]]
        per_head = ops.concatenate(parts, axis=-1) if len(parts) > 1 else difference
        outputs = ops.reshape(per_head, (-1, self.num_heads * self.head_output_dim))
        if return_attention_scores:
            return outputs, attention_1, attention_2
        return outputs

    def compute_output_shape(self, input_shape, return_attention_scores=False):
        batch, entities = input_shape[0], input_shape[1]
        outputs = (batch, self.num_heads * self.head_output_dim)
        if return_attention_scores:
            attention = (batch, self.num_heads, entities)
            return outputs, attention, attention
        return outputs

    def compute_output_spec(self, inputs, return_attention_scores=False):
        validation.check_built_shape(self, "inputs", inputs.shape,
                                     (None, self.num_entities, self.features),
                                     "[batch, entities N, features m]")
        return _utils.output_spec(
            self.compute_output_shape(inputs.shape, return_attention_scores), self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config.update({
            "num_heads": self.num_heads,
            "key_dim": self.key_dim,
            "num_relations": self.num_relations,
            "position_dims": self.position_dims,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "query_network": (None if self.query_network is None else
                              keras.saving.serialize_keras_object(self.query_network)),
        })
        return config
