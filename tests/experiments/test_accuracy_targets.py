"""accuracy_targets.reaches: an accuracy Keras measured in float32 that equals the target counts."""

import doctest

import numpy as np

from keras_relational.experiments import accuracy_targets


def test_an_exact_float32_hit_reaches_the_target():
    # 450 of 500 correct, as Keras' float32 accuracy stores it (0.8999999762 < the float 0.9).
    measured = float(np.float32(450) / np.float32(500))
    assert measured < 0.9
    assert accuracy_targets.reaches(measured, 0.9)
    assert accuracy_targets.reaches(np.float32(0.9), 0.9)
    assert accuracy_targets.reaches(0.95, 0.9)
    assert accuracy_targets.reaches(1.0, 1.0)


def test_an_accuracy_below_the_target_does_not_reach_it():
    assert not accuracy_targets.reaches(float(np.float32(449) / np.float32(500)), 0.9)
    assert not accuracy_targets.reaches(0.0, 0.9)


def test_the_docstring_examples_run():
    failures, tried = doctest.testmod(accuracy_targets, extraglobs={"np": np})
    assert tried == 2 and failures == 0
