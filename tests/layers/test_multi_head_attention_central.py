import numpy as np
import pytest
from layer_contract import run_layer_contract
from reference_relational import relations_game_entities as make_entities
from reference_relational import softmax

from keras_relational.layers.multi_head_attention_central import MultiHeadAttentionCentral


def mha_reference(entities, wk, wq, wv, w, heads, g, dv):
    b, n, _ = entities.shape
    k = (entities @ wk).reshape(b, n, heads, g).transpose(0, 2, 1, 3)
    q = (entities @ wq).reshape(b, n, heads, g).transpose(0, 2, 1, 3)
    v = (entities @ wv).reshape(b, n, heads, dv).transpose(0, 2, 1, 3)
    a = softmax(np.einsum("bhqg,bhkg->bhqk", q, k))
    o = np.einsum("bhqk,bhkv->bhqv", a, v)
    return np.einsum("bhnv,hn->bhv", o, w).reshape(b, heads * dv), a, o


def test_mha_matches_reference_and_is_equivariant_before_combine():
    entities = make_entities(5, n=9, m=6)
    layer = MultiHeadAttentionCentral(num_heads=3, key_dim=4, value_dim=5)
    out, attention = layer(entities, return_attention_scores=True)
    weights = [np.asarray(w, np.float64) for w in (layer.key_kernel, layer.query_kernel,
                                                    layer.value_kernel, layer.combine_kernel)]
    expected, expected_attention, attended = mha_reference(entities.astype(np.float64), *weights,
                                                           3, 4, 5)
    np.testing.assert_allclose(np.asarray(out), expected, atol=1e-5)
    np.testing.assert_allclose(np.asarray(attention), expected_attention, atol=1e-6)
    assert tuple(layer.combine_kernel.shape) == (3, 9)
    # Before CombineValues the module is permutation-equivariant.
    perm = np.random.RandomState(1).permutation(9)
    _, _, attended_p = mha_reference(entities[:, perm].astype(np.float64), *weights, 3, 4, 5)
    np.testing.assert_allclose(attended_p, attended[:, :, perm], atol=1e-6)
    # CombineValues is position-specific, so the output is not invariant.
    assert not np.allclose(np.asarray(layer(entities[:, perm])), np.asarray(out), atol=1e-5)



def test_symbolic_call_with_attention_scores():
    import keras

    inputs = keras.Input((9, 6))
    outputs, attention = MultiHeadAttentionCentral(num_heads=2, key_dim=3, value_dim=4)(
        inputs, return_attention_scores=True)
    assert tuple(outputs.shape) == (None, 8)
    assert tuple(attention.shape) == (None, 2, 9, 9)


def test_errors_name_the_argument():
    with pytest.raises(ValueError, match=r"value_dim.*received value_dim=-1"):
        MultiHeadAttentionCentral(value_dim=-1)
    with pytest.raises(ValueError, match=r"rank 3.*received shape \(2, 5\)"):
        MultiHeadAttentionCentral()(np.zeros((2, 5), "float32"))


@pytest.mark.subprocess
@pytest.mark.parametrize("return_attention_scores", [False, True])
def test_layer_contract(tmp_path, return_attention_scores):
    run_layer_contract(
        lambda: MultiHeadAttentionCentral(num_heads=2, key_dim=3, value_dim=4),
        make_entities(7, n=9, m=6), tmp_path,
        call_kwargs={"return_attention_scores": return_attention_scores})
