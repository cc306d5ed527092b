"""A curriculum: compiled-trainer runs in stages, each starting from the previous stage's agent.

``train_curriculum(root_dir, stages)`` trains the :class:`CompiledConfig` s of ``stages`` in turn,
stage ``i`` (from 1) under ``root_dir/stage_<i>`` with
:func:`keras_relational.agents.compiled.train_eval.train_eval`; every stage after the first starts
its network from the agent the stage before it exported (``initial_weights``: its
``keras_model.keras``; the Box-World agents' weights do not depend on the room's size). A stage
ends at its ``stop_solve_rate`` (the training solve rate of a progress line over at least
``keras_relational.agents.curves.MIN_EPISODES`` episodes) or its ``num_iterations``, whichever
comes first; the last stage is the run the curriculum is for (Bengio et al. 2009: easier levels
first).

Re-running the same call resumes: finished stages are not trained again, an unfinished one
continues from its checkpoint. ``max_seconds`` bounds one call's training over all its stages;
the call then returns with ``finished`` False.

Example::

    from keras_relational.agents import presets
    from keras_relational.agents.compiled.curriculum import train_curriculum

    result = train_curriculum("/tmp/curriculum", presets.curriculum_configs(
        "cpu_room12_relational_curriculum", num_iterations=2, num_envs=4))
    result["frames"], [stage["frames"] for stage in result["stages"]]
"""

import dataclasses
import os
import time

from keras_relational import json_files, validation
from keras_relational.agents.compiled import train_eval as train_eval_lib
from keras_relational.agents.compiled.config import CompiledConfig

RESULT_FILE = "curriculum.json"


def stage_dir(root_dir, index):
    """The run directory of stage ``index`` (1 for the first)."""
    return os.path.join(root_dir, f"stage_{index}")


def stage_finished(result, config):
    """Whether a stage's ``result.json`` (``train_eval.read_result`` 's dict, {} when there is
    none) says it reached its ``stop_solve_rate`` or its ``num_iterations``."""
    return (result.get("stopped_at_solve_rate") is not None
            or result.get("train_step", 0) >= config.num_iterations)


def train_curriculum(root_dir, stages, max_seconds=None, print_fn=print,
                     allow_changed_hyperparameters=False):
    """Trains ``stages`` (CompiledConfigs) in turn under ``root_dir``; see the module docstring.

    ``allow_changed_hyperparameters`` is each stage's ``train_eval`` 's (a resumed stage may
    change its optimizer's hyperparameters).

    Returns (and writes to ``root_dir/curriculum.json``) a dict: ``stages`` (each stage's
    ``root_dir``, ``frames``, ``train_step``, ``stopped_at_solve_rate`` and ``finished``),
    ``frames`` (every stage's frames added up: what the curriculum cost), ``finished`` (the last
    stage finished) and ``result``, the ``train_eval`` result of the last stage it reached.
    """
    stages = tuple(stages)
    if not stages:
        raise ValueError("train_curriculum expects `stages` to hold at least one "
                         "CompiledConfig, received none.")
    for index, config in enumerate(stages, 1):
        if not isinstance(config, CompiledConfig):
            raise ValueError(f"train_curriculum expects `stages` of CompiledConfig, received "
                             f"{type(config).__name__} at stage {index}.")
        if index > 1 and config.initial_weights is not None:
            raise ValueError(f"train_curriculum: stage {index} starts from stage {index - 1}'s "
                             f"agent, so its `initial_weights` must be None, received "
                             f"{config.initial_weights!r}.")
    validation.check_number_in_range("max_seconds", max_seconds, low=0.0, allow_none=True,
                                     owner="train_curriculum", low_exclusive=True)
    deadline = None if max_seconds is None else time.monotonic() + max_seconds
    os.makedirs(root_dir, exist_ok=True)
    summaries, result, weights = [], None, None
    for index, config in enumerate(stages, 1):
        directory = stage_dir(root_dir, index)
        if weights is not None:
            config = dataclasses.replace(config, initial_weights=weights)
        done = train_eval_lib.read_result(directory)
        if not stage_finished(done, config):
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                config = dataclasses.replace(config, max_seconds=min(
                    left, config.max_seconds if config.max_seconds is not None else left))
            print_fn(f"curriculum stage {index} of {len(stages)} in {directory}")
            done = train_eval_lib.train_eval(
                directory, config, print_fn=lambda line, i=index: print_fn(f"[stage {i}] {line}"),
                allow_changed_hyperparameters=allow_changed_hyperparameters)
        result = done
        summaries.append(dict(root_dir=directory, frames=done.get("frames", 0),
                              train_step=done.get("train_step", 0),
                              stopped_at_solve_rate=done.get("stopped_at_solve_rate"),
                              finished=stage_finished(done, config)))
        if not summaries[-1]["finished"]:
            break
        weights = done["keras_file"]
    summary = dict(stages=summaries, frames=sum(stage["frames"] for stage in summaries),
                   finished=len(summaries) == len(stages) and summaries[-1]["finished"],
                   result=result)
    json_files.write_json(os.path.join(root_dir, RESULT_FILE), summary)
    return summary


__all__ = ["RESULT_FILE", "stage_dir", "stage_finished", "train_curriculum"]
