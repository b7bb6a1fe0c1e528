"""Cost matrices against the formula 1 - cos blended with bigram Dice overlap."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from claw_lib.alignment.costs import cosine_cost, cost_matrix, lexical_cost, text_cost


def test_lexical_blend_fixes_unk_matches(minilm):
    """MiniLM: 伦敦 and 巴黎 are both [UNK]; their semantic cost is tiny. Character overlap is 1."""
    tc = text_cost("法国的首都是伦敦。", "不对，法国的首都是巴黎。", minilm)
    i, j = 4, 6
    assert tc.output_tokens[i].text == "伦敦" and tc.correction_tokens[j].text == "巴黎"
    assert tc.cost[i, j] < 0.2
    blended = text_cost("法国的首都是伦敦。", "不对，法国的首都是巴黎。", minilm, lexical_weight=0.5)
    assert blended.cost[i, j] > 0.5


def test_cost_matrix_formula():
    rng = np.random.default_rng(0)
    E, F = rng.normal(size=(4, 8)), rng.normal(size=(3, 8))
    C = cosine_cost(E, F)
    for i in range(4):
        for j in range(3):
            cos = E[i] @ F[j] / np.linalg.norm(E[i]) / np.linalg.norm(F[j])
            assert np.isclose(C[i, j], 1 - cos)
    L = lexical_cost(["巴黎", "Paris", "abc", "west", "的"], ["巴黎", "paris", "bcd", "east", "", "的"])
    assert L[0, 0] == 0 and L[1, 1] == 0 and L[4, 5] == 0 and L[2, 4] == 1
    assert np.isclose(L[2, 2], 1 - 2 * 1 / 4)  # bigrams {ab, bc} vs {bc, cd}
    assert np.isclose(L[3, 3], 1 - 2 * 1 / 6)  # {we, es, st} vs {ea, as, st}
    assert lexical_cost(["蓝色"], ["红色"])[0, 0] == 1
    assert np.allclose(cost_matrix(E, F, "abcd", "abc", 0.25), 0.75 * C + 0.25 * lexical_cost("abcd", "abc"))
    assert cosine_cost(np.zeros((1, 3)), np.ones((2, 3))).tolist() == [[1.0, 1.0]]
    with pytest.raises(ValueError):
        cosine_cost(np.full((1, 3), np.nan), np.ones((1, 3)))


WORD = st.text(alphabet=st.sampled_from(list("abcABßİ法国的首都巴黎伦敦 ")), max_size=6)


@settings(max_examples=200, deadline=None)
@given(st.lists(WORD, max_size=12), st.lists(WORD, max_size=12))
def test_vectorised_lexical_cost_equals_the_cell_by_cell_one(a, b):
    """The vectorised lexical cost (issue 24) gives the reference's numbers to the last bit, on any words: repeats,
    empty words, case folding that changes lengths (ß -> ss, İ -> i̇), single characters."""
    from claw_lib.alignment.costs import lexical_cost_reference

    got, want = lexical_cost(a, b), lexical_cost_reference(a, b)
    assert got.shape == want.shape == (len(a), len(b)) and np.array_equal(got, want)
