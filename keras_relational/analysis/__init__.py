"""Reading and drawing what trained models attend to (figures of the papers).

* :mod:`keras_relational.analysis.boxworld_attention` - the attention of the Box-World agents
  over the frame (Zambaldi et al. 2019, Fig. 4).
* :mod:`keras_relational.analysis.simplicial_attention` - the 2-simplicial agent's attention
  over a bridge Box-World frame (Clift et al. 2020, Figs. 7 and 11-13).
* :mod:`keras_relational.analysis.predinet_attention` - PrediNet's attention masks and
  propositions over the Relations Game image (Shanahan et al. 2020, Fig. 6a).
* :mod:`keras_relational.analysis.predinet_pca` - per-head PCA of the central output (Fig. 6b).
* :mod:`keras_relational.analysis.predinet_ablation` - accuracy with heads zeroed (Fig. 6c).
* :mod:`keras_relational.analysis.predinet_propositions` - masks clustered into object symbols
  and the output written as Prolog facts (Fig. 7).
* :mod:`keras_relational.analysis.plotting` - matplotlib, an optional dependency, on demand.

Analysis sits after the models: it imports ``keras_relational.models``, never the reverse.
Matplotlib is imported only by the plotting functions.
"""
