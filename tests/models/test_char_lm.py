import numpy as np
import pytest

from keras_relational.models import char_lm


@pytest.mark.parametrize("attention", char_lm.ATTENTIONS)
def test_causal_logits_and_equal_parameter_counts(attention):
    model = char_lm.char_lm(11, 16, attention=attention, width=16, num_layers=1, num_heads=2,
                            key_dim=4, num_key_value_heads=1, window=(4, 2), query_chunk_size=5)
    other = "dot_product" if attention == "simplicial" else "simplicial"
    twin = char_lm.char_lm(11, 16, attention=other, width=16, num_layers=1, num_heads=2,
                           key_dim=4, num_key_value_heads=1)
    assert model.count_params() == twin.count_params()
    x = np.random.RandomState(0).randint(0, 11, size=(2, 16)).astype("int32")
    y = x.copy()
    y[:, 9] = (y[:, 9] + 1) % 11
    before, after = (np.asarray(model.predict(t, verbose=0)) for t in (x, y))
    assert before.shape == (2, 16, 11)
    np.testing.assert_array_equal(before[:, :9], after[:, :9])  # no logit sees the future
    assert np.any(before[:, 9:] != after[:, 9:])


def test_invalid_attention():
    with pytest.raises(ValueError, match="attention"):
        char_lm.char_lm(11, 16, attention="linear")
