"""The settings of a Relations Game run (Shanahan et al. 2020): one dataclass, the paper's defaults.

:class:`RelationsGameConfig` is the single source of the defaults of
:func:`keras_relational.experiments.relations_game_lib.train_eval` and checks them together, when
it is built, before any data is generated or file written. Pure Python (no TensorFlow, no Keras).

Example::

    from keras_relational.experiments.relations_game_config import RelationsGameConfig

    config = RelationsGameConfig(central="mlp1", task="same", num_batches=500)
    config.num_classes     # 2: the classes of the target task
"""

import dataclasses
from collections.abc import Mapping, Sequence

from keras_relational import validation
from keras_relational.environments import relations_game

INPUT_PIPELINES = ("tf.data", "numpy")
STAGES = ("stage_1_scratch", "stage_2_curriculum", "stage_3_reuse", "stage_4_input_net")


@dataclasses.dataclass(frozen=True)
class RelationsGameConfig:
    """The settings of ``relations_game_lib.train_eval``: the model, the task (or the transfer
    protocol), the data, the optimiser, evaluation and output.

    Attributes:
        central: ``"predinet"``, ``"mlp1"``, ``"mlp2"``, ``"relation_net"`` or ``"mha"``.
        task: the target task, a name in ``relations_game.TASKS``.
        curriculum_task: ``None`` for a single-task run, else the pre-training task of the
            4-stage transfer protocol (e.g. ``task="column_patterns_3",
            curriculum_task="between"``, the combination of Shanahan et al. 2020, Fig. 4).
        num_batches: batches per training run (per stage in the protocol).
        batch_size, optimizer, learning_rate: SGD 0.01 with batches of 10 in the paper;
            ``optimizer="adam"`` (lr 1e-4) is the Supplement's variant. ``batch_size`` is the
            global batch size, split over the replicas of ``distribution_strategy``.
        num_train_examples: pentomino images generated per training task (the stream cycles
            through them, reshuffled each pass).
        num_eval_examples: held-out images per object set for the final accuracy.
        eval_interval: batches between held-out evaluations (also the checkpoint interval; at
            most ``num_batches``).
        num_monitor_examples: held-out images used for the evaluation every ``eval_interval``.
        early_stopping_accuracy: stop a stage once the first held-out set's monitor accuracy
            reaches this (the notebook used 0.99 but kept logging; here training ends).
        central_kwargs: extra central-module arguments (e.g. ``{"num_heads": 8}``).
        seed: seeds data generation, shuffling and weights.
        steps_per_execution: batches run per compiled call (speed only; the maths is the same).
        export: write SavedModels.
        verbose: ``model.fit`` verbosity.
        distribution_strategy: ``"default"``, ``"mirrored"`` or ``"multi_worker"``
            (``distribution_lib.STRATEGIES``): models, optimizers and ``compile`` run under its
            ``scope()``.
        data_file: a Relations Game ``.npz`` file in DeepMind's released layout
            (``relations_game.load_npz``) to train on instead of generated pentominoes (the
            target task's data; a curriculum task is still generated).
        eval_files: ``.npz`` files (same layout) to evaluate on instead of the generated held-out
            sets; each is reported under its file name without ``.npz`` (e.g.
            ``"between_hexos"``).
        time_limit_s: stop each training run (each stage) at its first held-out evaluation
            after this many seconds; the run counts as finished (``"stopped_by_time_limit"``
            and the batches actually trained are in its results).
        xoccurs_negatives: the generator's ``xoccurs`` negatives (``RelationsGame``):
            ``"exclusive"`` (half none, half two copies of the top object; the default) or
            ``"both_readings"`` (half none, half three copies); recorded in the results of an
            ``xoccurs`` run.
        colour_shape_layout: where ``colour_and_or_shape`` puts its two objects
            (``RelationsGame``): ``"random"`` (two random cells; the default, the paper's
            "randomly placed") or ``"column_pair"`` (rows 0 and 2 of one column, as in DeepMind's
            released samples); recorded in the results of a ``colour_and_or_shape`` run.
        occurs_distractors: what ``occurs``'s other bottom objects are (``RelationsGame``):
            ``"variants"`` (each a variant of the top object; the default) or ``"one_variant"``
            (one variant in a negative, random objects otherwise); recorded in the results of
            an ``occurs`` run.
        dtype_policy: ``"float32"``, ``"mixed_bfloat16"`` or ``"mixed_float16"`` (loss scaling
            by ``compile``); recorded in every ``results.json``.
        pause_above_accuracy: the authors' notebook's convergence rule (it used 0.99; the paper
            does not mention it): every ``pause_interval`` batches, the accuracy on a fresh batch
            of ``num_monitor_examples`` validation images; while it is above this, the next
            ``pause_interval`` batches apply no update. SGD only. The validation images are
            ``num_validation_examples`` generated images of the task's first held-out set
            (hexominoes, the notebook's validation set), none of them in the evaluation sets.
            Each stage logs its checks to ``pause_checks.json`` and its results hold
            ``"paused_batches"``.
        pause_interval: batches between the checks of ``pause_above_accuracy`` (a multiple of
            the batches one compiled call runs).
        num_validation_examples: the validation pool of ``pause_above_accuracy``.
        input_pipeline: ``"tf.data"`` (TensorFlow installed), ``"numpy"`` (``NumpyBatches``, any
            backend) or None: ``relations_game_lib.default_input_pipeline()``, tf.data under the
            TensorFlow backend. The two shuffle the training images in different orders; every
            ``results.json`` records the pipeline and the Keras backend.
    """

    central: str = "predinet"
    task: str = "between"
    curriculum_task: str | None = None
    num_batches: int = 100_000  # Shanahan et al. 2020, Table 1 (and per stage, reference notebook)
    batch_size: int = 10  # Table S2
    optimizer: str = "sgd"  # Table S2: plain gradient descent
    learning_rate: float = 0.01  # Table S2
    num_train_examples: int = 50_000  # reference notebook's "mini" pentomino sets
    num_eval_examples: int = 5_000  # not the paper's; the reference notebook tests 250 images
    eval_interval: int = 500  # reference notebook: held-out accuracy every 500 batches
    num_monitor_examples: int = 250  # reference notebook: one batch of 250 held-out images
    early_stopping_accuracy: float | None = None  # reference notebook: 0.99; off, as the paper
    central_kwargs: Mapping | None = None
    seed: int = 0
    steps_per_execution: int = 50
    export: bool = True
    verbose: int = 0
    distribution_strategy: str = "default"
    data_file: str | None = None
    eval_files: Sequence | str | None = None
    time_limit_s: float | None = None
    xoccurs_negatives: str = "exclusive"
    colour_shape_layout: str = "random"
    occurs_distractors: str = "variants"
    dtype_policy: str = validation.DEFAULT_DTYPE_POLICY
    pause_above_accuracy: float | None = None  # reference notebook: 0.99; off, as in the paper
    pause_interval: int = 500  # reference notebook: a check every 500 batches
    num_validation_examples: int = 5_000  # reference notebook: its "mini" held-out files
    input_pipeline: str | None = None

    def __post_init__(self):
        validation.check_dtype_policy("train_eval", self.dtype_policy)
        if self.input_pipeline is not None:
            validation.check_one_of("input_pipeline", self.input_pipeline, INPUT_PIPELINES)
        for option, value in self.generator_options.items():
            validation.check_one_of(option, value, relations_game.TASK_OPTIONS[option][1])
        if self.pause_above_accuracy is not None:
            self._check_pause()
        for name in (self.task, self.curriculum_task) if self.curriculum_task else (self.task,):
            relations_game.num_classes(name)  # validates the task name
        num_classes = relations_game.num_classes(self.task)
        if self.curriculum_task and relations_game.num_classes(self.curriculum_task) \
                != num_classes:
            raise ValueError(f"`curriculum_task`: expected a task with {num_classes} classes "
                             f"like task={self.task!r}, received {self.curriculum_task!r}.")

    def _check_pause(self):
        if not 0.0 < self.pause_above_accuracy < 1.0:
            raise ValueError(f"`pause_above_accuracy`: expected an accuracy in (0, 1), received "
                             f"{self.pause_above_accuracy!r}.")
        if self.optimizer != "sgd":
            raise ValueError(f"`pause_above_accuracy` pauses SGD (learning rate 0 is exactly no "
                             f"update; Adam's moments would still move): expected "
                             f"optimizer='sgd', received optimizer={self.optimizer!r}.")
        if self.pause_interval < 1 or self.pause_interval % self.batches_per_call:
            raise ValueError(f"`pause_interval`: expected a positive multiple of the batches "
                             f"run per compiled call ({self.batches_per_call}: "
                             f"steps_per_execution, at most eval_interval and num_batches), "
                             f"received {self.pause_interval!r}.")
        if self.num_validation_examples < self.num_monitor_examples:
            raise ValueError(f"`num_validation_examples`: expected at least "
                             f"num_monitor_examples={self.num_monitor_examples} (one validation "
                             f"batch), received {self.num_validation_examples!r}.")

    @property
    def generator_options(self):
        """The generator's task options (``relations_game.TASK_OPTIONS``) and their values."""
        return {"xoccurs_negatives": self.xoccurs_negatives,
                "colour_shape_layout": self.colour_shape_layout,
                "occurs_distractors": self.occurs_distractors}

    @property
    def data_settings(self):
        """The generator options that apply to this run's tasks (recorded in the results)."""
        tasks = (self.task, self.curriculum_task)
        return {option: value for option, value in self.generator_options.items()
                if relations_game.TASK_OPTIONS[option][0] in tasks}

    @property
    def num_classes(self):
        """The classes of the target task."""
        return relations_game.num_classes(self.task)

    @property
    def effective_eval_interval(self):
        """``eval_interval``, at most ``num_batches``."""
        return min(self.eval_interval, self.num_batches)

    @property
    def batches_per_call(self):
        """The batches one compiled training call runs: pause checks fall on their boundaries."""
        return min(self.steps_per_execution, self.eval_interval, self.num_batches)


__all__ = ["INPUT_PIPELINES", "STAGES", "RelationsGameConfig"]
