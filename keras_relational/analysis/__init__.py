"""Reading and drawing what trained models attend to (figures of the papers).

* :mod:`keras_relational.analysis.boxworld_attention` - the attention of the Box-World agents
  over the frame (Zambaldi et al. 2019, Fig. 4).
* :mod:`keras_relational.analysis.simplicial_attention` - the 2-simplicial agent's attention
  over a bridge Box-World frame (Clift et al. 2020, Figs. 7 and 11-13).
* :mod:`keras_relational.analysis.predinet_attention` - PrediNet's attention masks and
  propositions over the Relations Game image (Shanahan et al. 2020, Fig. 6a).

Analysis sits after the models: it imports ``keras_relational.models``, never the reverse.
Matplotlib is imported only by the plotting functions.
"""
