"""The scores of 2-simplicial attention (Clift et al. 2020, Sec. 2): triple-product logits and a
softmax over pairs of entities."""

from keras import ops

from keras_relational.layers import _utils

# Floor on a squared norm before its square root: the norm's gradient stays finite at the zero
# vector, and every vector longer than 1e-15 is untouched (float32 normals reach 1.2e-38).
_MIN_SQUARED_NORM = 1e-30


def _norm(x):
    """``[B, H, I, d]`` -> ``[B, H, I]`` (a contraction, not a reduce: faster on XLA's CPU)."""
    squared = ops.einsum("bhid,bhid->bhi", x, x)
    return ops.sqrt(ops.maximum(squared, ops.cast(_MIN_SQUARED_NORM, squared.dtype)))


def triple_product_logits(p, l1, l2, sqrt_epsilon=1e-12):
    """Unsigned scalar triple products ``<p_i, l1_j, l2_k>`` of all triples (eqs. 7, 8, 26).

    ``<a, b, c> = ||(a.b) c - (a.c) b + (b.c) a||`` is evaluated in the normalised form of
    eq. (26), ``||a|| ||b|| ||c|| sqrt(s)`` with
    ``s = cos_ab^2 + cos_bc^2 + cos_ac^2 - 2 cos_ab cos_ac cos_bc`` (``0 <= s <= 1``). It only
    needs the pairwise dot products, so no ``[I, J, K, d]`` tensor is formed, and the cosines
    are in ``[-1, 1]`` whatever the scale of the vectors: it only overflows when the product of
    the three norms (or a squared norm) does, about 1e38 in float32, where the degree-6
    polynomial of eq. (8) overflows at the square root of that.

    Stability: ``sqrt(max(s, 0) + sqrt_epsilon)``. ``max`` removes a rounding-negative ``s`` and
    ``sqrt_epsilon`` keeps the derivative of the square root finite at ``s = 0`` (pairwise
    orthogonal vectors, or a zero vector). Near ``s = 0`` the gradient of ``sqrt(s)`` with respect
    to the cosines is bounded (``s`` is a sum of squares there), so any positive epsilon suffices;
    ``1e-12`` changes a logit by at most ``1e-6 * ||p|| ||l1|| ||l2||`` (relative, so the product
    stays exactly homogeneous, Lemma C.10(v)). ``sqrt_epsilon=0`` is the plain square root of the
    authors' code, whose gradient is NaN at ``s = 0``.

    Args:
        p: ``[B, H, I, d]`` queries.
        l1: ``[B, H, J, d]`` first keys.
        l2: ``[B, H, K, d]`` second keys.
        sqrt_epsilon: see above.

    Returns:
        ``[B, H, I, J, K]`` logits, never negative.
    """
    norm_p, norm_1, norm_2 = _norm(p), _norm(l1), _norm(l2)
    # Cosines are scale-invariant, so they are taken of the vectors divided by their norms held
    # constant (stop_gradient): the same function, but every intermediate of its gradient is
    # O(1) whatever the scale. Then times reciprocal norms, not divided by a product of two: the
    # gradients of a / b on JAX, (-g a) b^-2, overflow to inf or 0 * inf = NaN for zero vectors
    # (b = 1e-30) and for long ones (g ~ ||p|| ||l1|| ||l2||), where TensorFlow stays finite.
    p, l1, l2 = (x * ops.stop_gradient(1.0 / norm)[..., None]
                 for x, norm in ((p, norm_p), (l1, norm_1), (l2, norm_2)))
    inv_p, inv_1, inv_2 = (1.0 / _norm(x) for x in (p, l1, l2))
    cos_pj = ops.einsum("bhid,bhjd->bhij", p, l1) * (inv_p[..., :, None] * inv_1[..., None, :])
    cos_pk = ops.einsum("bhid,bhkd->bhik", p, l2) * (inv_p[..., :, None] * inv_2[..., None, :])
    cos_jk = ops.einsum("bhjd,bhkd->bhjk", l1, l2) * (inv_1[..., :, None] * inv_2[..., None, :])
    cos_pj = cos_pj[..., :, :, None]
    cos_pk = cos_pk[..., :, None, :]
    cos_jk = cos_jk[..., None, :, :]
    s = (ops.square(cos_pj) + ops.square(cos_pk) + ops.square(cos_jk)
         - 2.0 * cos_pj * cos_pk * cos_jk)
    root = ops.sqrt(ops.maximum(s, 0.0) + ops.cast(sqrt_epsilon, s.dtype))
    norms = (norm_p[..., :, None, None] * norm_1[..., None, :, None]
             * norm_2[..., None, None, :])
    return norms * root


def joint_pair_softmax(logits, pair_mask):
    """Softmax over all pairs ``(j, k)`` jointly: ``[B, H, I, J, K]`` -> same shape."""
    shape = ops.shape(logits)
    flat = ops.reshape(logits, (shape[0], shape[1], shape[2], shape[3] * shape[4]))
    if pair_mask is not None:
        mask_shape = ops.shape(pair_mask)
        pair_mask = ops.reshape(
            pair_mask, (mask_shape[0], 1, 1, mask_shape[-2] * mask_shape[-1])
        )
        # The lowest finite value, not -inf: a fully masked row stays finite (its output is
        # zeroed by the caller), and pairs with huge logits still beat every masked pair.
        flat = ops.where(pair_mask, flat, _utils.lowest_value(flat.dtype))
    if flat.shape[-1] == 1:  # a single pair (M = 1) gets all the weight
        return ops.ones_like(logits)
    return ops.reshape(ops.softmax(flat, axis=-1), shape)
