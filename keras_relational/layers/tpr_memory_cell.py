"""One step of the third-order TPR memory update (write, move, backlink) as a Keras RNN cell."""

import keras
from keras import ops

from keras_relational import validation


def unbind(memory, entity, relation):
    """``U(F, x, y)[f] = sum_{e,r} x[e] y[r] F[e, r, f]``: ``[B,E,R,E], [B,E], [B,R] -> [B,E]``."""
    return ops.einsum("be,br,berf->bf", entity, relation, memory)


def outer3(entity, relation, target):
    """``entity ⊗ relation ⊗ target``: ``[B,E], [B,R], [B,E] -> [B,E,R,E]``."""
    return ops.einsum("be,br,bf->berf", entity, relation, target)


def split_update_inputs(inputs, entity_dim, relation_dim, use_move, use_backlink):
    """Splits ``[..., 2E + K R]`` into ``e1, e2, r1, r2, r3`` (``None`` for a disabled op)."""
    e, r = entity_dim, relation_dim
    e1 = inputs[..., :e]
    e2 = inputs[..., e : 2 * e]
    offset = 2 * e
    r1 = inputs[..., offset : offset + r]
    offset += r
    r2 = r3 = None
    if use_move:
        r2 = inputs[..., offset : offset + r]
        offset += r
    if use_backlink:
        r3 = inputs[..., offset : offset + r]
    return e1, e2, r1, r2, r3


@keras.saving.register_keras_serializable(package="keras_relational")
class TPRMemoryCell(keras.layers.Layer):
    """Keras RNN cell: one sentence's write / move / backlink update of an order-3 TPR memory.

    The state is the memory ``F`` of shape ``[B, E, R, E]`` (source entity, relation, target
    entity), flattened to ``E*R*E`` floats. With ``U(F, x, y) = sum_{e,r} x[e] y[r] F[e, r, :]``
    (contract source and relation, return the target), every retrieval reads the pre-update
    state ``F_{t-1}`` (Schlag & Schmidhuber 2018, Sec. 4, eqs. (4) and (6)-(14)):

        w = U(F_{t-1}, e1, r1)    m = U(F_{t-1}, e1, r2)    b = U(F_{t-1}, e2, r3)
        F_t = F_{t-1} + e1 ⊗ r1 ⊗ (e2 - w)      # write: replace the target of (e1, r1) by e2
                      + e1 ⊗ r2 ⊗ (w - m)       # move: the old target goes to (e1, r2)
                      + e2 ⊗ r3 ⊗ (e1 - b)      # backlink: e2 --r3--> e1

    Move and backlink can be switched off (Table 3 ablations). The cell has no weights: the
    per-step input is the concatenation ``[e1, e2, r1, (r2), (r3)]`` produced by the update MLPs
    of :class:`keras_relational.TPRMemory`. Wrapped in ``keras.layers.RNN``, a Keras mask keeps
    the state of padded sentences unchanged, so they never write.

    Args:
        entity_dim: ``E``, size of the entity vectors.
        relation_dim: ``R``, size of the relation vectors.
        use_move: include the move operation.
        use_backlink: include the backlink operation.
        **kwargs: standard ``keras.layers.Layer`` arguments.

    Call arguments:
        inputs: ``[B, 2E + K R]`` with ``K = 1 + use_move + use_backlink``.
        states: a one-element list holding the flattened memory ``[B, E*R*E]``.

    Returns:
        ``(F_t, [F_t])``, both flattened ``[B, E*R*E]``.

    Example:

    >>> cell = keras_relational.TPRMemoryCell(entity_dim=4, relation_dim=3)
    >>> rnn = keras.layers.RNN(cell)
    >>> memory = rnn(np.zeros((2, 5, 2 * 4 + 3 * 3), "float32"))
    >>> tuple(memory.shape)
    (2, 48)

    Reference: Schlag & Schmidhuber, "Learning to Reason with Third-Order Tensor Products",
    NeurIPS 2018, eqs. (4), (6)-(14).
    """

    def __init__(self, entity_dim, relation_dim, use_move=True, use_backlink=True, **kwargs):
        super().__init__(**kwargs)
        validation.check_positive_int("TPRMemoryCell", "entity_dim", entity_dim)
        validation.check_positive_int("TPRMemoryCell", "relation_dim", relation_dim)
        validation.check_choice("TPRMemoryCell", "use_move", use_move, (True, False))
        validation.check_choice("TPRMemoryCell", "use_backlink", use_backlink, (True, False))
        self.entity_dim = entity_dim
        self.relation_dim = relation_dim
        self.use_move = use_move
        self.use_backlink = use_backlink
        self.state_size = entity_dim * relation_dim * entity_dim
        self.output_size = self.state_size

    @property
    def input_dim(self):
        return 2 * self.entity_dim + (1 + self.use_move + self.use_backlink) * self.relation_dim

    def build(self, input_shape):
        if input_shape[-1] is not None and input_shape[-1] != self.input_dim:
            raise ValueError(
                f"TPRMemoryCell expects inputs with last dimension 2*entity_dim + "
                f"K*relation_dim = {self.input_dim}, received shape {tuple(input_shape)}."
            )
        super().build(input_shape)

    def update(self, memory, e1, e2, r1, r2=None, r3=None):
        """``F_t`` from ``F_{t-1}`` (``[B,E,R,E]``) and one step's vectors; see the class doc."""
        w_hat = unbind(memory, e1, r1)
        target = e2 - w_hat
        delta = outer3(e1, r1, target)
        if r2 is not None:
            m_hat = unbind(memory, e1, r2)
            delta = delta + outer3(e1, r2, w_hat - m_hat)
        if r3 is not None:
            b_hat = unbind(memory, e2, r3)
            delta = delta + outer3(e2, r3, e1 - b_hat)
        return memory + delta

    def call(self, inputs, states):
        e, r = self.entity_dim, self.relation_dim
        flat = states[0] if isinstance(states, (list, tuple)) else states
        memory = ops.reshape(flat, (-1, e, r, e))
        parts = split_update_inputs(inputs, e, r, self.use_move, self.use_backlink)
        new_memory = ops.reshape(self.update(memory, *parts), (-1, self.state_size))
        return new_memory, [new_memory]

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "entity_dim": self.entity_dim,
                "relation_dim": self.relation_dim,
                "use_move": self.use_move,
                "use_backlink": self.use_backlink,
            }
        )
        return config
