"""Tasks 11-13 keep the story structure of Facebook's bAbI generator (Weston et al. 2015): five
units a story, each of two statements and a question about a person named in that unit."""

import numpy as np
import pytest

from keras_relational.environments import babi

STORIES = 200


def units(task, stories=STORIES, seed=0):
    """``[(first statement, second statement, question, answer, support)]`` of each unit."""
    rng = np.random.RandomState(seed)
    found, shapes = [], set()
    for _ in range(stories):
        lines = [line.split(" ", 1) for line in babi.generate_story_lines(task, rng)]
        shapes.add("".join("q" if "\t" in text else "s" for _, text in lines))
        for i in range(0, len(lines), 3):
            (_, first), (second_id, second), (_, question) = lines[i:i + 3]
            text, answer, support = question.split("\t")
            found.append((first, second, text, answer, support, second_id))
    assert shapes == {"ssq" * 5}
    return found


def test_basic_coreference_asks_about_the_person_the_pronoun_moved():
    for first, second, question, answer, support, second_id in units(11):
        person = first.split()[0]
        assert {"he", "she"} & set(second.split()) and question == f"Where is {person}? "
        place = second.rstrip(".").split()[-1]
        assert answer == place != first.rstrip(".").split()[-1] and support == second_id


def test_conjunction_asks_about_one_of_the_four_people_just_named():
    for first, second, question, answer, support, second_id in units(12):
        pairs = [first.split()[0::2][:2], second.split()[0::2][:2]]  # "X and Y went ..."
        places = [first.rstrip(".").split()[-1], second.rstrip(".").split()[-1]]
        assert places[0] != places[1]
        person = question.split()[2].rstrip("?")
        assert person in pairs[0] + pairs[1]
        assert answer == (places[1] if person in pairs[1] else places[0])
        assert support == (second_id if person in pairs[1] else str(int(second_id) - 1))


def test_compound_coreference_asks_about_the_pair_that_they_moved():
    for first, second, question, answer, support, second_id in units(13):
        pair = first.split()[0::2][:2]
        assert " they " in f" {second} " and " and " in first
        place = second.rstrip(".").split()[-1]
        assert place != first.rstrip(".").split()[-1]
        assert question.split()[2].rstrip("?") in pair
        assert answer == place and support == second_id


@pytest.mark.parametrize("task", (11, 12, 13))
def test_people_and_places_vary(task):
    answers = {answer for _, _, _, answer, _, _ in units(task, 50)}
    assert len(answers) == 6  # every place of the house is an answer
