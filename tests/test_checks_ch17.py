"""Self-check of chapter 17 (machine notes): ex-17-1, the product by column blocks."""

import numpy as np
import pytest

from speclib.book.checks import ExerciseError, check_blocks_product


def blocks_right(x, w, width):
    return np.concatenate([x @ w[:, j:j + width] for j in range(0, w.shape[1], width)], axis=1)


def blocks_whole(x, w, width):
    return x @ w


def blocks_short(x, w, width):  # drops the last, narrower block
    return np.concatenate([x @ w[:, j:j + width] for j in range(0, w.shape[1] - width + 1, width)], axis=1)


def blocks_rows_first(x, w, width):  # joins the blocks as rows
    return np.concatenate([x @ w[:, j:j + width] for j in range(0, w.shape[1], width)], axis=0)


def test_a_right_answer_passes(capsys):
    check_blocks_product(blocks_right)
    assert "one block of columns" in capsys.readouterr().out


def test_np_dot_and_matmul_count_as_products():
    def with_dot(x, w, width):
        return np.hstack([np.dot(x, w[:, j:j + width]) for j in range(0, w.shape[1], width)])

    check_blocks_product(with_dot)

    def whole_matmul(x, w, width):
        return np.matmul(x, w)

    with pytest.raises(ExerciseError, match="columns of w at once"):
        check_blocks_product(whole_matmul)


@pytest.mark.parametrize("wrong, hint", [
    (blocks_whole, "columns of w at once"),
    (blocks_short, "last block"),
    (blocks_rows_first, "expected a result of shape"),
    (lambda x, w, width: None, "return statement missing"),
])
def test_wrong_answers_get_their_hint(wrong, hint):
    def blocks_product(x, w, width):
        return wrong(x, w, width)

    with pytest.raises(ExerciseError, match=hint):
        check_blocks_product(blocks_product)


def test_the_stub_is_told_to_finish():
    def blocks_product(x, w, width):
        raise NotImplementedError

    with pytest.raises(ExerciseError, match="still raises NotImplementedError"):
        check_blocks_product(blocks_product)
