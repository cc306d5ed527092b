"""Each paper's whole model at the paper's sizes, with a random batch of its inputs.

Shared by the accelerator lane (``tests/test_accelerator.py``: one ``fit(jit_compile=True)`` step
of each) and ``benchmarks/accelerator.py`` (train-step times). Builds models only: no
TensorFlow, so both run under ``KERAS_BACKEND=jax`` where TensorFlow is not installed.
"""

import numpy as np


def _pixels(rng, batch, shape):
    return rng.uniform(0, 255, size=(batch, *shape)).astype("float32")


def _relations_game(central):
    from keras_relational.models import relations_game

    def build():
        return relations_game.build_model(central)

    def inputs(rng, batch):
        task = np.eye(relations_game.NUM_TASKS, dtype="float32")[
            rng.randint(relations_game.NUM_TASKS, size=batch)]
        return {"image": _pixels(rng, batch, relations_game.IMAGE_SHAPE), "task": task}

    return build, inputs


def _boxworld(builder, shape, **kwargs):
    def build():
        from keras_relational.models import boxworld_agents

        return getattr(boxworld_agents, builder)(observation_shape=shape, **kwargs)

    return build, lambda rng, batch: _pixels(rng, batch, shape)


def _tpr_rnn(vocab_size=40, max_sentences=20, max_words=8):
    # bAbI-sized (Schlag & Schmidhuber 2018, Sec. 7): a few dozen words, stories truncated to
    # their last sentences; the vocabulary here is a stand-in of bAbI's order of magnitude.
    def build():
        from keras_relational.models import tpr_rnn

        return tpr_rnn.tpr_rnn(vocab_size, max_sentences, max_words)

    def inputs(rng, batch):
        story = rng.randint(1, vocab_size, size=(batch, max_sentences, max_words)).astype("int32")
        story[:, :, max_words // 2:] = 0  # padded words, as in bAbI's short sentences
        query = rng.randint(1, vocab_size, size=(batch, max_words)).astype("int32")
        return {"story": story, "query": query}

    return build, inputs


def _symmetry(builder, grid=True):
    def build():
        from keras_relational.models import symmetry

        return getattr(symmetry, builder)()

    def inputs(rng, batch):
        if grid:  # one-hot symbol grid [B, V = 12, T = 3] (Mitchell & Bowers 2020, Table I)
            x = np.zeros((batch, 12, 3), "float32")
            x[np.arange(batch)[:, None], rng.randint(12, size=(batch, 3)), np.arange(3)] = 1.0
            return x
        return rng.randint(1, 7, size=(batch, 20)).astype("int32")  # Table II's tokens

    return build, inputs


def _atari(builder, steps=2):
    def build():
        from keras_relational.models import atari_agents

        return getattr(atari_agents, builder)()

    def inputs(rng, batch):
        from keras_relational.models import atari_agents

        frames = rng.uniform(0, 255, size=(batch, steps, *atari_agents.FRAME_SHAPE))
        return {"frames": frames.astype("float32"),
                "reward": rng.normal(size=(batch, steps)).astype("float32")}

    return build, inputs


def models():
    """``[(name, build(), inputs(rng, batch))]``: every paper's whole model with its defaults
    (the papers' sizes)."""
    entries = [
        # Zambaldi et al. 2019: Box-World 12x12 room + wall -> 14x14 = 196 entities.
        ("relational_agent", *_boxworld("relational_agent", (14, 14, 3))),
        ("baseline_agent", *_boxworld("baseline_agent", (14, 14, 3))),
        # Clift et al. 2020, Sec. 3: 7 x 9 room + inventory column.
        ("simplicial_agent", *_boxworld("simplicial_agent", (7, 10, 3))),
        ("simplicial_agent[relational]",
         *_boxworld("simplicial_agent", (7, 10, 3), use_simplicial=False)),
    ]
    for central in ("predinet", "mlp1", "mlp2", "relation_net", "mha"):
        entries.append((f"relations_game[{central}]", *_relations_game(central)))
    entries += [
        ("tpr_rnn", *_tpr_rnn()),
        ("symbol_conv_classifier", *_symmetry("symbol_conv_classifier")),
        ("rule_mlp_classifier", *_symmetry("rule_mlp_classifier")),
        ("rule_rnn_classifier", *_symmetry("rule_rnn_classifier")),
        ("conv_stack_lstm", *_symmetry("conv_stack_lstm", grid=False)),
        ("standard_lstm", *_symmetry("standard_lstm", grid=False)),
        ("atari_baseline_agent", *_atari("atari_baseline_agent")),
        ("atari_predinet_agent", *_atari("atari_predinet_agent")),
    ]
    return entries


def model_names():
    return [name for name, *_ in models()]
