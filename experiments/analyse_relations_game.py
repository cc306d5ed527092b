r"""Draws the per-head PCA (Fig. 6b) and head ablation (Fig. 6c) of Shanahan et al. (2020) for a
trained Relations Game model.

Takes the ``model.keras`` that ``train_relations_game`` writes next to its weights (a PrediNet or
MHA central module), passes ``--num_examples`` generated pentomino images of ``--task`` through it
(or the images of ``--data_file``, an ``.npz`` in DeepMind's layout), fits a PCA per head, projects
the ``--project_set`` images with the same components, and measures the accuracy with each head
zeroed and against the number of heads kept (random subsets). The paper uses a network trained on
``colour_and_or_shape`` and 10,000 images:

    python -m keras_relational.experiments.analyse_relations_game \
        --model=/tmp/rg_colour/model.keras --task=colour_and_or_shape --output_dir=/tmp/analysis

Writes ``head_pca.png`` (and ``head_pca_<project_set>.png``), ``pruning.png`` and
``analysis.npz`` (the arrays) under ``--output_dir`` and prints a summary. The plots need
matplotlib.
"""

# First, before TensorFlow loads: hides known-harmless dependency messages when run as a
# binary (not when imported); --verbose_dependencies shows them.
from keras_relational.experiments import console

console.quiet_dependencies(__name__)

import os

from absl import app, flags

# Pure modules only: --help and the flags answer before Keras or TensorFlow loads (main()
# imports the analyses).
from keras_relational import validation
from keras_relational.environments import relations_game
from keras_relational.experiments import console

FLAGS = flags.FLAGS
flags.DEFINE_string("model", None, "A trained model's .keras file (train_relations_game writes "
                    "<root_dir>/model.keras).")
flags.DEFINE_enum("task", "colour_and_or_shape", list(relations_game.TASKS),
                  "Task of the generated images (the paper: colour_and_or_shape).")
flags.DEFINE_integer("num_examples", 10_000, "Generated images (the paper: 10,000).")
flags.DEFINE_string("data_file", None, "Use this .npz file (DeepMind's layout) instead of "
                    "generated pentominoes.")
flags.DEFINE_string("project_set", "hexominoes", "Held-out object set also projected on the "
                    "pentomino-fitted components ('' for none).")
flags.DEFINE_list("heads", None, "Heads drawn in the PCA plots (default: all).")
flags.DEFINE_integer("num_samples", 10, "Random head subsets per size for the pruning curve.")
flags.DEFINE_integer("seed", 0, "Seed of the generated images and of the head subsets.")
flags.DEFINE_string("output_dir", None, "Where the plots and analysis.npz are written.")
flags.mark_flags_as_required(["model", "output_dir"])


def main(argv):
    del argv
    import keras
    import numpy as np

    from keras_relational.analysis import predinet_ablation, predinet_pca

    model = keras.saving.load_model(FLAGS.model)
    num_classes = int(model.output.shape[-1])
    if FLAGS.data_file:
        data = relations_game.load_npz(FLAGS.data_file, num_classes=num_classes)
    else:
        data = relations_game.generate(FLAGS.task, "pentominoes", FLAGS.num_examples,
                                       seed=FLAGS.seed)
    os.makedirs(FLAGS.output_dir, exist_ok=True)
    heads = predinet_pca.head_outputs(model, data["images"])
    pca = predinet_pca.fit_head_pca(heads, num_components=2)
    points = predinet_pca.project_heads(pca, heads)
    shown = None if FLAGS.heads is None else [int(h) for h in FLAGS.heads]
    predinet_pca.plot_head_pca(points, data["labels"], heads=shown,
                               path=os.path.join(FLAGS.output_dir, "head_pca.png"))
    arrays = {"pca_points": points, "pca_components": pca.components, "pca_mean": pca.mean,
              "explained_variance_ratio": pca.explained_variance_ratio,
              "labels": data["labels"]}
    if FLAGS.project_set and not FLAGS.data_file:
        held_out = relations_game.generate(FLAGS.task, FLAGS.project_set, FLAGS.num_examples,
                                           seed=validation.offset_seed("seed", FLAGS.seed, 1))
        projected = predinet_pca.project_heads(
            pca, predinet_pca.head_outputs(model, held_out["images"]))
        predinet_pca.plot_head_pca(projected, held_out["labels"], heads=shown, path=os.path.join(
            FLAGS.output_dir, f"head_pca_{FLAGS.project_set}.png"))
        arrays.update(projected_points=projected, projected_labels=held_out["labels"])
    args = (model, data["images"], data["tasks"], data["labels"])
    per_head = predinet_ablation.head_ablation(*args)
    curve = predinet_ablation.pruning_curve(*args, num_samples=FLAGS.num_samples, seed=FLAGS.seed)
    predinet_ablation.plot_pruning_curves({model.name: curve}, chance=1.0 / num_classes,
                                          path=os.path.join(FLAGS.output_dir, "pruning.png"))
    arrays.update(head_ablation=per_head, num_kept=curve["num_kept"],
                  pruning_accuracies=curve["accuracies"])
    np.savez(os.path.join(FLAGS.output_dir, "analysis.npz"), **arrays)
    ratio = pca.explained_variance_ratio.sum(-1)
    print(f"{len(data['labels'])} images, {heads.shape[1]} heads of {heads.shape[2]} values")
    print(f"variance explained by 2 components per head: min {ratio.min():.3f} "
          f"mean {ratio.mean():.3f} max {ratio.max():.3f}")
    print(f"accuracy with all heads {curve['accuracies'][-1].mean():.4f}, none "
          f"{curve['accuracies'][0].mean():.4f}")
    print("accuracy with head h zeroed: " + " ".join(f"{h}:{a:.3f}"
                                                     for h, a in enumerate(per_head)))
    print(f"wrote {sorted(os.listdir(FLAGS.output_dir))} to {FLAGS.output_dir}")


def run():
    """The ``analyse_relations_game`` console script (the same help and flags as ``python -m``)."""
    console.adopt_main_help(__name__)
    app.run(main)


if __name__ == "__main__":
    run()
