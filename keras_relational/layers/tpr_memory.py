"""Third-order tensor-product-representation memory over a sequence of sentence vectors."""

import keras
from keras import ops

from keras_relational import validation
from keras_relational.layers import _utils
from keras_relational.layers.dense_stack import dense_stack
from keras_relational.layers.tpr_memory_cell import TPRMemoryCell

_IMPLEMENTATIONS = ("factored", "dense")
_UPDATE_NAMES = ("e1", "e2", "r1", "r2", "r3")
_INFERENCE_NAMES = ("n", "l1", "l2", "l3")


@keras.saving.register_keras_serializable(package="keras_relational")
class TPRMemory(keras.layers.Layer):
    """TPR-RNN memory: write / move / backlink updates, then three chained normalised reads.

    Update module (eqs. 4, 6-14). Five independent MLPs ``f(x) = tanh(W2 tanh(W1 x + b1) + b2)``
    map each sentence vector ``s_t`` to entities ``e1, e2`` (``E``) and relations ``r1, r2, r3``
    (``R``). The memory ``F`` (``[B, E, R, E]``: source entity, relation, target entity) starts
    at zero and for every real sentence ``F_t = F_{t-1} + W_t + M_t + B_t`` where, with the
    unbinding ``U(F, x, y) = sum_{e,r} x[e] y[r] F[e, r, :]`` read from the pre-update state:
    ``W_t = e1 ⊗ r1 ⊗ (e2 - U(F,e1,r1))`` (write), ``M_t = e1 ⊗ r2 ⊗ (U(F,e1,r1) - U(F,e1,r2))``
    (move) and ``B_t = e2 ⊗ r3 ⊗ (e1 - U(F,e2,r3))`` (backlink). Masked (padded) sentences do not
    write: ``F_t = F_{t-1}``.

    Inference module (eqs. 15-20). Four more MLPs map the question vector ``q`` to an entity cue
    ``n`` and relations ``l1, l2, l3``; three chained reads ``i1 = LN1(U(F_T, n, l1))``,
    ``i2 = LN2(U(F_T, i1, l2))``, ``i3 = LN3(U(F_T, i2, l3))`` use a layer norm with a learned
    *scalar* gain and bias per step (eps 1e-7); the output is ``i1 + i2 + i3``.

    Implementations (identical maths, tested against each other):

    * ``"factored"`` (default, memory-light): ``F`` is never materialised. Since
      ``F_t = sum_{tau<=t,k} a_{tau k} ⊗ b_{tau k} ⊗ c_{tau k}`` (three rank-1 terms per step, eqs.
      (6)-(14)) and the keys ``a, b`` come straight from the MLPs, the targets ``c`` solve one
      unit lower-triangular linear system over the ``S*K`` terms (``K`` = number of enabled
      operations). Memory ``O(B (S K)^2)`` instead of ``O(B S E^2 R)`` for backpropagation.
    * ``"dense"``: the literal recurrence, a ``keras.layers.RNN`` over
      :class:`keras_relational.TPRMemoryCell` with the flattened ``F`` as its state (the
      gradient keeps one ``F`` per step).

    Args:
        entity_dim: ``E``. Default 15, the single-task size (Schlag & Schmidhuber 2018, Sec. 7).
        relation_dim: ``R``. Default 10 (not stated in the paper; our choice).
        hidden_dim: ``H``, MLP hidden width. Default 40 (authors' code release).
        use_move: include the move operation (Table 3 ablation "W+B" when False).
        use_backlink: include the backlink operation (Table 3 ablation "W+M" when False).
        inference_steps: number of chained reads (3 in the paper, eqs. 17-19).
        implementation: ``"factored"`` or ``"dense"``, see above.
        layer_norm_epsilon: epsilon of the scalar layer norms (1e-7, authors' code).
        kernel_initializer: MLP kernel initializer (Glorot uniform, authors' code).
        **kwargs: standard ``keras.layers.Layer`` arguments.

    Call arguments:
        inputs: list ``[sentences, question]`` of shapes ``[B, S, D]`` and ``[B, D]``.
        mask: optional boolean ``[B, S]``, True for real sentences (a list whose first element
            is that mask is accepted too). Stories need not be left-aligned. Integer masks (1/0)
            are accepted, float masks refused with a ValueError.
        return_internals: if True, also return a dict with the MLP outputs ``e1 ... r3``
            (``[B, S, E]`` / ``[B, S, R]``), ``n, l1 ...``, the final memory ``F`` and the reads
            ``i1, i2, i3``.

    Returns:
        ``i1 + i2 + ... `` of shape ``[B, E]`` (and the internals dict when requested).

    Example:

    >>> memory = keras_relational.TPRMemory(entity_dim=6, relation_dim=4, hidden_dim=8)
    >>> sentences = np.random.rand(2, 5, 10).astype("float32")
    >>> question = np.random.rand(2, 10).astype("float32")
    >>> tuple(memory([sentences, question]).shape)
    (2, 6)

    Reference: Schlag & Schmidhuber, "Learning to Reason with Third-Order Tensor Products",
    NeurIPS 2018.
    """

    def __init__(
        self,
        entity_dim=15,  # Schlag & Schmidhuber 2018, Sec. 7 (single-task model)
        relation_dim=10,  # not in the paper's main text; our choice
        hidden_dim=40,  # authors' code release
        use_move=True,
        use_backlink=True,
        inference_steps=3,  # Schlag & Schmidhuber 2018, eqs. 17-19
        implementation="factored",
        layer_norm_epsilon=1e-7,  # authors' code release
        kernel_initializer="glorot_uniform",  # authors' code release
        **kwargs,
    ):
        super().__init__(**kwargs)
        name = "TPRMemory"
        validation.check_positive_int(name, "entity_dim", entity_dim)
        validation.check_positive_int(name, "relation_dim", relation_dim)
        validation.check_positive_int(name, "hidden_dim", hidden_dim)
        validation.check_positive_int(name, "inference_steps", inference_steps)
        validation.check_choice(name, "use_move", use_move, (True, False))
        validation.check_choice(name, "use_backlink", use_backlink, (True, False))
        validation.check_choice(name, "implementation", implementation, _IMPLEMENTATIONS)
        validation.check_layer_norm_epsilon(name, layer_norm_epsilon)
        self.entity_dim = entity_dim
        self.relation_dim = relation_dim
        self.hidden_dim = hidden_dim
        self.use_move = use_move
        self.use_backlink = use_backlink
        self.inference_steps = inference_steps
        self.implementation = implementation
        self.layer_norm_epsilon = layer_norm_epsilon
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.supports_masking = True

    @property
    def update_names(self):
        """Names of the update MLPs in use (``r2`` needs move, ``r3`` needs backlink)."""
        return tuple(
            n
            for n in _UPDATE_NAMES
            if (n != "r2" or self.use_move) and (n != "r3" or self.use_backlink)
        )

    @property
    def inference_names(self):
        return ("n",) + tuple(f"l{i + 1}" for i in range(self.inference_steps))

    def _make_mlp(self, prefix, input_dim, output_dim):
        """``f(x) = tanh(W2 tanh(W1 x + b1) + b2)``: layers ``{prefix}_1`` and ``{prefix}_2``."""
        names = (f"{prefix}_1", f"{prefix}_2")
        layers = dense_stack(
            (self.hidden_dim, output_dim), names, activation="tanh", output_activation="tanh",
            input_width=input_dim, kernel_initializer=self.kernel_initializer,
            bias_initializer="zeros", dtype=self.dtype_policy,
        )
        self.mlp_layers.update(dict(zip(names, layers, strict=True)))

    def build(self, input_shape):
        if not isinstance(input_shape, (list, tuple)) or len(input_shape) != 2 or not isinstance(
            input_shape[0], (list, tuple)
        ):
            raise ValueError(
                "TPRMemory expects `inputs` to be a list [sentences [B, S, D], question [B, D]], "
                f"received input shape {input_shape}."
            )
        sentences_shape, question_shape = input_shape
        validation.check_rank(self, "sentences", sentences_shape, 3, "[batch, sentences, dim]")
        validation.check_rank(self, "question", question_shape, 2, "[batch, dim]")
        dim = validation.check_known_dim(self, "sentences", sentences_shape, -1, "sentence dim")
        question_dim = validation.check_known_dim(self, "question", question_shape, -1,
                                               "question dim")
        self._input_dims = (dim, question_dim)
        e, r = self.entity_dim, self.relation_dim
        self.mlp_layers = {}
        for n in self.update_names:
            self._make_mlp(n, dim, e if n.startswith("e") else r)
        for n in self.inference_names:
            self._make_mlp(n, question_dim, e if n == "n" else r)
        self.ln_gain = self.add_weight(
            name="ln_gain", shape=(self.inference_steps,), initializer="ones"
        )
        self.ln_bias = self.add_weight(
            name="ln_bias", shape=(self.inference_steps,), initializer="zeros"
        )
        if self.implementation == "dense":
            memory_dtype = "float32" if _utils.is_half(self.compute_dtype) else self.dtype_policy
            self.cell = TPRMemoryCell(e, r, self.use_move, self.use_backlink, name="cell",
                                      dtype=memory_dtype)
            self.rnn = keras.layers.RNN(self.cell, name="rnn", dtype=memory_dtype)
            self.rnn.build((None, sentences_shape[1], self.cell.input_dim))
        super().build(input_shape)

    def _mlp(self, name, x):
        return self.mlp_layers[f"{name}_2"](self.mlp_layers[f"{name}_1"](x))

    def _scalar_layer_norm(self, x, step):
        mean = ops.mean(x, axis=-1, keepdims=True)
        variance = ops.mean(ops.square(x - mean), axis=-1, keepdims=True)
        normalised = (x - mean) / ops.sqrt(variance + self.layer_norm_epsilon)
        gain, bias = (ops.cast(v[step], x.dtype) for v in (self.ln_gain, self.ln_bias))
        return gain * normalised + bias

    def _terms(self, parts):
        """The key pairs ``(a, b)`` of the enabled operations (write, move, backlink), in order."""
        e1, e2, r1, r2, r3 = (parts.get(n) for n in _UPDATE_NAMES)
        keys = [(e1, r1)]
        if self.use_move:
            keys.append((e1, r2))
        if self.use_backlink:
            keys.append((e2, r3))
        return keys

    def _factored_targets(self, parts, mask):
        """Targets ``c`` ``[B, S*K, E]`` and keys of ``F_T = sum_j a_j ⊗ b_j ⊗ c_j``."""
        e1, e2 = parts["e1"], parts["e2"]
        keys = self._terms(parts)
        k = len(keys)
        shape = ops.shape(e1)
        batch, steps = shape[0], shape[1]
        n_terms = steps * k
        a = ops.reshape(ops.stack([x for x, _ in keys], axis=2), (batch, n_terms, -1))
        b = ops.reshape(ops.stack([y for _, y in keys], axis=2), (batch, n_terms, -1))
        # gram[i, j] = (a_i . a_j)(b_i . b_j): the read of key pair i from rank-1 term j.
        gram = ops.einsum("bie,bje->bij", a, a) * ops.einsum("bir,bjr->bij", b, b)
        step_of = ops.arange(n_terms) // k
        earlier = ops.cast(step_of[None, :] < step_of[:, None], gram.dtype)
        reads = gram * earlier[None]  # hats of term i = reads[i] @ c, from F_{t-1} only
        # c of each operation from the hats of the same step: write c = e2 - w, move c = w - m,
        # backlink c = e1 - b. `mix[k, k']` is the coefficient of hat k' in c_k.
        mix = [[0.0] * k for _ in range(k)]
        mix[0][0] = -1.0
        row = 1
        if self.use_move:
            mix[row][0], mix[row][row] = 1.0, -1.0
            row += 1
        if self.use_backlink:
            mix[row][row] = -1.0
        mix = ops.convert_to_tensor(mix, dtype=gram.dtype)
        reads = ops.reshape(reads, (batch, steps, k, n_terms))
        coupling = ops.reshape(ops.einsum("kl,bsln->bskn", mix, reads), (batch, n_terms, n_terms))
        zeros = ops.zeros_like(e1)
        free = [e2] + ([zeros] if self.use_move else []) + ([e1] if self.use_backlink else [])
        free = ops.reshape(ops.stack(free, axis=2), (batch, n_terms, -1))
        live = ops.ones((batch, steps), gram.dtype) if mask is None else ops.cast(mask, gram.dtype)
        live = ops.reshape(ops.repeat(live[:, :, None], k, axis=2), (batch, n_terms, 1))
        # (I - live * mix @ reads) c = live * free, unit lower triangular: forward substitution.
        system = ops.eye(n_terms, dtype=gram.dtype)[None] - live * coupling
        # Never 16-bit (call() casts to float32): TensorFlow's MatrixTriangularSolve has no
        # float16 or bfloat16 kernel.
        c = ops.solve_triangular(system, live * free, lower=True)
        return a, b, c

    def _read(self, memory, entity, relation):
        if self.implementation == "dense":
            return ops.einsum("be,br,berf->bf", entity, relation, memory)
        a, b, c = memory
        weights = ops.einsum("bje,be->bj", a, entity) * ops.einsum("bjr,br->bj", b, relation)
        return ops.einsum("bj,bjf->bf", weights, c)

    def _check_call_arguments(self, sentences_shape, question_shape, mask=None):
        """The widths it was built for, and the mask's dtype and shape (also symbolic)."""
        dims = getattr(self, "_input_dims", None)
        if dims is not None:
            validation.check_built_shape(self, "sentences", tuple(sentences_shape),
                                         (None, None, dims[0]), "[batch, sentences, dim]")
            validation.check_built_shape(self, "question", tuple(question_shape),
                                         (None, dims[1]), "[batch, dim]")
        _utils.check_masks(self, tuple(sentences_shape), mask, argument="sentences")

    def call(self, inputs, mask=None, return_internals=False):
        sentences, question = inputs
        if isinstance(mask, (list, tuple)):
            mask = mask[0]
        self._check_call_arguments(sentences.shape, question.shape, mask)
        if mask is not None:
            mask = ops.cast(mask, "bool")
        # The memory is bound, solved and read in float32 under a 16-bit policy: it is a sum of
        # outer products whose targets cancel (e2 - w_hat), read through chained layer norms
        # that amplify relative rounding error; the MLPs (most of the FLOPs) stay 16-bit.
        parts = {n: _utils.at_least_float32(self._mlp(n, sentences)) for n in self.update_names}
        e, r = self.entity_dim, self.relation_dim
        if self.implementation == "dense":
            steps = ops.concatenate([parts[n] for n in self.update_names], axis=-1)
            flat = self.rnn(steps, mask=mask)
            memory = ops.reshape(flat, (-1, e, r, e))
        else:
            memory = self._factored_targets(parts, mask)
        cues = {n: _utils.at_least_float32(self._mlp(n, question)) for n in self.inference_names}
        entity = cues["n"]
        reads = []
        for step in range(self.inference_steps):
            entity = self._scalar_layer_norm(self._read(memory, entity, cues[f"l{step + 1}"]),
                                             step)
            reads.append(entity)
        output = reads[0]
        for read in reads[1:]:
            output = output + read
        output = ops.cast(output, self.compute_dtype)
        if not return_internals:
            return output
        internals = dict(parts)
        internals.update(cues)
        for step, read in enumerate(reads):
            internals[f"i{step + 1}"] = read
        if self.implementation == "dense":
            internals["memory"] = memory
        else:
            internals["memory"] = ops.einsum("bje,bjr,bjf->berf", *memory)
        return output, internals

    def compute_mask(self, inputs, mask=None):
        return None

    def compute_output_shape(self, input_shape):
        self._check_call_arguments(*input_shape)
        return (input_shape[0][0], self.entity_dim)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "entity_dim": self.entity_dim,
                "relation_dim": self.relation_dim,
                "hidden_dim": self.hidden_dim,
                "use_move": self.use_move,
                "use_backlink": self.use_backlink,
                "inference_steps": self.inference_steps,
                "implementation": self.implementation,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return config
