"""bAbI examples as tensors: `Vocabulary` (id 0 = PAD, the other tokens and answers sorted) and
`vectorize` (int32 ``story [N, S, W]``, ``story_len [N]``, ``query [N, W]``, ``answer [N]``)."""

import numpy as np


class Vocabulary:
    """Word and answer ids: 0 = PAD, then every token and answer string, sorted."""

    PAD = "<pad>"

    def __init__(self, words):
        self.words = (self.PAD,) + tuple(sorted(set(words) - {self.PAD}))
        self.ids = {w: i for i, w in enumerate(self.words)}

    @classmethod
    def from_examples(cls, *example_lists):
        words = set()
        for examples in example_lists:
            for ex in examples:
                for sentence in ex.story:
                    words.update(sentence)
                words.update(ex.query)
                words.add(ex.answer)
        return cls(words)

    def __len__(self):
        return len(self.words)

    def encode(self, token):
        if token not in self.ids:
            raise ValueError(f"Vocabulary has no id for {token!r}; build it from all splits.")
        return self.ids[token]


def dimensions(*example_lists):
    """``(S, W)``: the longest story and the longest sentence/question over the examples."""
    sentences, words = 1, 1
    for examples in example_lists:
        for ex in examples:
            sentences = max(sentences, len(ex.story))
            words = max([words, len(ex.query)] + [len(s) for s in ex.story])
    return sentences, words


def vectorize(examples, vocabulary, max_sentences, max_words):
    """Int32 arrays ``story [N,S,W]``, ``story_len [N]``, ``query [N,W]``, ``answer [N]``, ``task``.

    Stories longer than ``max_sentences`` keep their last sentences; longer sentences raise.
    An example whose answer is None (an unanswered question) gets the answer id -1.
    """
    n = len(examples)
    story = np.zeros((n, max_sentences, max_words), np.int32)
    query = np.zeros((n, max_words), np.int32)
    story_len = np.zeros((n,), np.int32)
    answer = np.zeros((n,), np.int32)
    task = np.zeros((n,), np.int32)
    for i, ex in enumerate(examples):
        sentences = ex.story[-max_sentences:]
        story_len[i] = len(sentences)
        for j, sentence in enumerate(sentences):
            if len(sentence) > max_words:
                raise ValueError(f"sentence {sentence} is longer than max_words={max_words}.")
            story[i, j, : len(sentence)] = [vocabulary.encode(t) for t in sentence]
        if len(ex.query) > max_words:
            raise ValueError(f"question {ex.query} is longer than max_words={max_words}.")
        query[i, : len(ex.query)] = [vocabulary.encode(t) for t in ex.query]
        answer[i] = -1 if ex.answer is None else vocabulary.encode(ex.answer)
        task[i] = ex.task
    return {"story": story, "story_len": story_len, "query": query, "answer": answer,
            "task": task}
