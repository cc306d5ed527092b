"""The names the models are built by, in pure Python (no Keras, no TensorFlow).

The training binaries define their enum flags from these when their modules load, so a bad
``--central`` or ``--operations`` is an absl error before Keras is imported; the builders and
the training libraries import them from here, so each list is written once.
"""

# keras_relational.models.relations_game's central modules (its `central` argument): PrediNet and
# the baselines of Shanahan et al. 2020, Sec. 4.
CENTRAL_MODULES = ("predinet", "mlp1", "mlp2", "relation_net", "mha")

# The TPR-RNN's memory operations (Schlag & Schmidhuber 2018, Table 3): besides the write W,
# M = move, B = backlink -> keras_relational.models.tpr_rnn.tpr_rnn's (use_move, use_backlink).
OPERATIONS = {"W": (False, False), "W+M": (True, False), "W+B": (False, True),
              "W+M+B": (True, True)}
