"""Reading back the scalars a run wrote to TensorBoard (tests of the summaries)."""

import glob
import os


def scalar_tags(directory):
    """``{tag: [(step, value), ...]}`` of every scalar in the event files of ``directory``."""
    import tensorflow as tf

    tags = {}
    for path in sorted(glob.glob(os.path.join(directory, "events.out.tfevents.*"))):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                number = float(tf.make_ndarray(value.tensor)) if value.HasField("tensor") \
                    else value.simple_value
                tags.setdefault(value.tag, []).append((event.step, number))
    return tags


# What TF-Agents users look for in root_dir/collect (tf_agents.train.actor.collect_metrics
# names) and what train_eval adds.
COLLECT_TAGS = ("Metrics/NumberOfEpisodes", "Metrics/EnvironmentSteps",
                "Metrics/EnvironmentStepsPerSecond")
EPISODE_TAGS = ("Metrics/AverageReturn", "Metrics/AverageEpisodeLength", "Metrics/SolveRate")
