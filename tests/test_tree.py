"""Token trees: one target pass for a whole tree, the cache that keeps one branch, and the window.

Every claim is checked against the plain path: a node's row from a tree pass must equal the
row an ordinary cached pass over that node's own path gives (float32 tolerance), and the
cache after keeping one branch must be the cache of an ordinary pass over that branch.
"""

from __future__ import annotations

import numpy as np
import pytest

from speclib.core.tree import ancestor_mask, path_to, token_tree, tree_from_paths
from speclib.lm.transformer import TransformerConfig, random_transformer

ATOL = 2e-5  # float32 rows computed in differently shaped products

CFG = TransformerConfig(vocab_size=11, block_size=16, d_model=16, n_layers=2, n_heads=2, tied=False)


@pytest.fixture(scope="module")
def model():
    return random_transformer(CFG, seed=3)


def random_tree(rng: np.random.Generator, n: int, vocab: int) -> tuple[np.ndarray, np.ndarray]:
    """A random tree of ``n`` nodes (siblings distinct), parents before children."""
    tokens, parents = [], []
    for i in range(n):
        for _ in range(100):
            p = int(rng.integers(-1, i))
            x = int(rng.integers(vocab))
            if not any(pp == p and xx == x for pp, xx in zip(parents, tokens)):
                break
        tokens.append(x)
        parents.append(p)
    return np.array(tokens), np.array(parents)


def plain_rows(model, prefix, path_tokens):
    cache = model.cache()
    return cache.extend_logits(np.concatenate([prefix, path_tokens]))[len(prefix):]


@pytest.mark.parametrize("prefix_length", [1, 5, 11])
def test_every_node_row_equals_a_plain_pass_over_its_path(model, prefix_length):
    rng = np.random.default_rng(prefix_length)
    for _ in range(6):
        prefix = rng.integers(0, CFG.vocab_size, prefix_length)
        tokens, parents = random_tree(rng, int(rng.integers(1, 9)), CFG.vocab_size)
        cache = model.cache()
        cache.extend(prefix)
        rows = cache.extend_tree_logits(tokens, parents)
        assert len(cache) == prefix_length  # the tree is pending, not fed
        for node in range(tokens.size):
            path = path_to(parents, node)
            want = plain_rows(model, prefix, tokens[path])[-1]
            np.testing.assert_allclose(rows[node], want, atol=ATOL)


def test_a_wrong_mask_is_caught(model):
    """Negative control: letting every node see every earlier node (a causal mask) breaks the rows."""
    rng = np.random.default_rng(0)
    prefix = rng.integers(0, CFG.vocab_size, 4)
    tokens, parents = np.array([1, 2, 3]), np.array([-1, -1, -1])  # three siblings
    cache = model.cache()
    cache.extend(prefix)
    f = cache._filled
    causal = np.triu(np.full((3, f + 3), -np.inf, dtype=np.float32), k=f + 1)
    wrong = model._run(tokens, f, cache._keys, cache._values, None, f + np.zeros(3, dtype=int), causal)
    want = plain_rows(model, prefix, tokens[2:3])[-1]
    assert np.abs(wrong[2] - want).max() > 100 * ATOL
    right = cache.extend_tree_logits(tokens, parents)
    np.testing.assert_allclose(right[2], want, atol=ATOL)


def test_a_chain_tree_gives_exactly_todays_rows(model):
    rng = np.random.default_rng(1)
    prefix, chain = rng.integers(0, CFG.vocab_size, 6), rng.integers(0, CFG.vocab_size, 5)
    a, b = model.cache(), model.cache()
    a.extend(prefix)
    b.extend(prefix)
    tree_rows = a.extend_tree_logits(chain, np.arange(-1, 4))
    np.testing.assert_array_equal(tree_rows, b.extend_logits(chain))
    a.accept_tree(4)
    np.testing.assert_array_equal(a._keys[:, :, :a._filled], b._keys[:, :, :b._filled])


def test_the_kept_branch_is_the_cache_of_a_plain_pass(model):
    rng = np.random.default_rng(2)
    for trial in range(8):
        prefix = rng.integers(0, CFG.vocab_size, int(rng.integers(1, 9)))
        tokens, parents = random_tree(rng, 7, CFG.vocab_size)
        node = int(rng.integers(-1, tokens.size))
        path = path_to(parents, node)
        tree_cache = model.cache(features=True)
        tree_cache.extend(prefix)
        tree_cache.extend_tree(tokens, parents)
        tree_cache.accept_tree(node)
        plain = model.cache(features=True)
        plain.extend(np.concatenate([prefix, tokens[path]]))
        assert tree_cache.tokens.tolist() == plain.tokens.tolist()
        assert (tree_cache._start, tree_cache._filled) == (plain._start, plain._filled)
        f = plain._filled
        np.testing.assert_allclose(tree_cache._keys[:, :, :f], plain._keys[:, :, :f], atol=ATOL)
        np.testing.assert_allclose(tree_cache._values[:, :, :f], plain._values[:, :, :f], atol=ATOL)
        np.testing.assert_allclose(tree_cache.features, plain.features, atol=ATOL)
        # ... and extending both afterwards gives the same rows, across a window move
        more = rng.integers(0, CFG.vocab_size, 12)
        np.testing.assert_allclose(tree_cache.extend_logits(more), plain.extend_logits(more), atol=ATOL)


def test_a_tree_across_a_window_move_is_scored_path_by_path(model):
    """Block 16: after 14 tokens, nodes at depth 3 are read through the next window."""
    rng = np.random.default_rng(4)
    prefix = rng.integers(0, CFG.vocab_size, 14)
    tokens, parents = np.array([1, 2, 3, 4, 5]), np.array([-1, 0, 1, -1, 3])
    cache = model.cache()
    cache.extend(prefix)
    before = cache.tokens_computed
    rows = cache.extend_tree_logits(tokens, parents)
    assert cache.tokens_computed - before > tokens.size  # two paths, each fed on its own
    for node in range(tokens.size):
        want = plain_rows(model, prefix, tokens[path_to(parents, node)])[-1]
        np.testing.assert_allclose(rows[node], want, atol=ATOL)
    cache.accept_tree(2)
    plain = model.cache()
    plain.extend(np.concatenate([prefix, [1, 2, 3]]))
    more = np.array([7, 8, 9])
    np.testing.assert_allclose(cache.extend_logits(more), plain.extend_logits(more), atol=ATOL)


def test_a_pending_tree_is_forgotten_by_extend_and_rollback(model):
    cache = model.cache()
    cache.extend([1, 2])
    cache.extend_tree([3, 4], [-1, -1])
    cache.extend([5])
    with pytest.raises(ValueError, match="no tree is pending"):
        cache.accept_tree(0)
    cache.extend_tree([3, 4], [-1, -1])
    cache.rollback(2)
    with pytest.raises(ValueError, match="no tree is pending"):
        cache.accept_tree(0)
    cache.extend_tree([3, 4], [-1, -1])
    with pytest.raises(ValueError, match="node: must be <= 1"):
        cache.accept_tree(2)


def test_bad_trees_are_refused(model):
    cache = model.cache()
    with pytest.raises(ValueError, match="parents: node 1 has parent 1"):
        cache.extend_tree([1, 2], [-1, 1])
    with pytest.raises(ValueError, match="parents: expected one parent per node"):
        cache.extend_tree([1, 2], [-1])
    with pytest.raises(TypeError, match="parents: expected integer"):
        cache.extend_tree([1, 2], [-1.0, 0.5])
    with pytest.raises(ValueError, match="siblings must differ"):
        token_tree([1, 1], [-1, -1])


def test_tree_structures():
    tree = tree_from_paths([[3, 1], [3, 1], [4, 2]])
    assert tree.tokens.tolist() == [3, 1, 4, 2] and tree.parents.tolist() == [-1, 0, -1, 2]
    # the candidates of a node, once per draw, in the order the sequences drew them
    assert tree.children(-1) == [0, 0, 2] and tree.children(0) == [1, 1]
    assert tree.paths() == [[0, 1], [2, 3]] and tree.depth == 2
    assert ancestor_mask(tree.parents).sum() == 6


# --- the window: a rollback behind a move does not re-read -------------------------------------


def test_rollback_behind_a_window_move_reuses_the_earlier_window(model):
    rng = np.random.default_rng(5)
    text = rng.integers(0, CFG.vocab_size, 30)
    cache = model.cache()
    cache.extend(text[:15])  # window 0, 15 slots
    cache.extend(text[15:18])  # positions 16, 17 move the window: 8 tokens re-read
    assert cache.tokens_computed == 18 + 8
    cache.rollback(14)  # behind the move: position 14 is read through window 0 again
    before = cache.tokens_computed
    rows = cache.extend_logits(text[14:17])
    # two tokens through window 0; window 8 kept its slots for positions 8 .. 13: 2 re-read, 1 new
    # (re-reading both windows from scratch, as a cache without the earlier one must, is 14 + 8)
    assert cache.tokens_computed - before == 3 + 2
    fresh = model.cache()
    np.testing.assert_allclose(rows, fresh.extend_logits(text[:17])[14:], atol=ATOL)
    # a rollback that stays inside the earlier window costs nothing but the new tokens
    cache.rollback(15)
    before = cache.tokens_computed
    rows = cache.extend_logits(text[15:16])
    assert cache.tokens_computed - before == 1
    np.testing.assert_allclose(rows[0], model.logits(text[:16])[15], atol=ATOL)


def test_window_reuse_follows_the_text_through_random_rollbacks(model):
    """Random feeds and rollbacks across many window moves: rows always equal a fresh computation."""
    rng = np.random.default_rng(6)
    cache, text = model.cache(), np.zeros(0, dtype=np.int64)
    for _ in range(60):
        if text.size and rng.random() < 0.4:
            keep = int(rng.integers(max(0, text.size - 12), text.size + 1))
            cache.rollback(keep)
            text = text[:keep]
        new = rng.integers(0, CFG.vocab_size, int(rng.integers(1, 6)))
        rows = cache.extend_logits(new)
        text = np.concatenate([text, new])
        np.testing.assert_allclose(rows, model.logits(text)[-new.size:], atol=ATOL)


# --- the loop: one target pass per step, whatever the proposal's shape -------------------------

import functools  # noqa: E402

from speclib.core.cache import Uncached  # noqa: E402
from speclib.core.decoding import _target_rows, prepare_run, speculative_generate  # noqa: E402
from speclib.core.exact import output_distribution, target_sequence_distribution  # noqa: E402
from speclib.core.proposers import MultiDraft, TreeDraft  # noqa: E402
from speclib.core.sampling import Verification, _residual, as_chooser  # noqa: E402
from speclib.core.variants import multi_draft_verify, total_variation  # noqa: E402
from speclib.lm.models import markov_pair  # noqa: E402
from speclib.lm.transformer import load_pair  # noqa: E402

EXACT = 1e-12  # enumerated laws agree to rounding
DETECTABLE = 1e-3  # total variation a faulty rule must reach
FLOAT32 = 1e-6  # laws built from float32 rows of differently shaped passes


@pytest.fixture(scope="module")
def pair():
    return load_pair()


def count_runs(model):
    """Wrap ``model._run`` (the one place the network is evaluated) to count its calls."""
    calls = []
    inner = model._run

    def counted(tokens, *args, **kwargs):
        calls.append(tokens.size)
        return inner(tokens, *args, **kwargs)

    model._run = counted
    return calls


@pytest.mark.parametrize("make", [lambda d: MultiDraft(d, 3), lambda d: TreeDraft(d, (3, 1)),
                                  lambda d: TreeDraft(d, (3,), sample=True)])
def test_a_tree_step_makes_one_target_pass_with_the_numpy_pair(make, pair):
    target, draft = pair[0].with_temperature(1.0), pair[1]  # a copy: count_runs patches it
    calls = count_runs(target)
    prompt = np.arange(10, 30)
    run = prepare_run(target, make(draft), prompt, 40, 3)
    choose = as_chooser(0)
    for step in range(3):
        before, n = len(calls), run.n
        out = run.step(choose)
        assert len(calls) - before == 1, f"step {step}: {len(calls) - before} target passes"
        # the cache kept the accepted branch of the tree: the next pass feeds only the last token
        assert len(run.target_cache) == min(n + out.n_accepted, run.n - 1)
    assert run.stats.target_passes == 3 and run.stats.scored_nodes >= 3 * 3
    # a target without tree attention is read one root-to-leaf path at a time (the fallback)
    run = prepare_run(Uncached(target), make(draft), prompt, 40, 3)
    proposal = run.draft(choose)
    before = len(calls)
    run.finish(proposal, _target_rows(run.target_cache, run.text[:run.n], proposal.tree, None), choose)
    assert len(calls) - before == len(proposal.tree.paths()) >= 2


def test_stats_count_passes_and_scored_nodes():
    target, draft = markov_pair(vocab_size=6, draft_noise=0.4, seed=0)
    _, st = speculative_generate(target, TreeDraft(draft, (2, 2)), [0], 30, k=3, rng=1)
    assert st.target_passes == len(st.tokens_per_step)
    assert st.nodes_per_target_pass == st.scored_nodes / st.target_passes
    assert 3 <= st.nodes_per_target_pass <= 2 + 4 + 4  # a full (2, 2, 1) tree has 10 nodes
    # a chain: one scored node per draft, as before
    _, st = speculative_generate(target, draft, [0], 30, k=3, rng=1)
    assert st.scored_nodes == st.draft_proposed
    # several sequences: nodes shared by sequences are scored once, every sequence's draws are counted
    _, st = speculative_generate(target, MultiDraft(draft, 4), [0], 30, k=2, rng=1)
    assert st.scored_nodes < st.draft_proposed == 4 * sum(st.k_per_step)


# --- exactness of tree verification, by enumeration of the loop --------------------------------


def tv(target, proposer, prefix, k, length, **options):
    return total_variation(output_distribution(target, proposer, prefix, length, k, **options),
                           target_sequence_distribution(target, prefix, length))


@pytest.mark.parametrize("sample", [False, True])
def test_top_b_trees_are_exact_and_independent_siblings_are_caught(sample):
    target, _ = markov_pair(vocab_size=3, draft_noise=0.7, seed=4)
    draft, _ = markov_pair(vocab_size=3, draft_noise=0.0, seed=104)  # confidently wrong
    wrong = functools.partial(multi_draft_verify, recursive=False)
    for prefix in ([0], [2]):
        assert tv(target, TreeDraft(draft, (2, 1), sample=sample), prefix, 2, 3) < EXACT
    if not sample:  # every token of the vocabulary a candidate: a rejection of all three is possible
        assert tv(target, TreeDraft(draft, (3, 2)), [1], 2, 3) < EXACT
    bad = max(tv(target, TreeDraft(draft, (2,), sample=sample), pr, 1, 2, verifier=wrong)
              for pr in ([0], [1], [2]))
    assert bad > DETECTABLE
    # Where the target outweighs the draft on two tokens ({x : q(x) > p(x)} = {2, 3}), a sibling's
    # row matters after a rejection: its own row (a point mass, or p without the earlier
    # siblings) is exact, the draft's row p is not (the same test catches that fault by hand).
    from speclib.lm.models import FixedContextModel

    q, p = np.array([0.1, 0.2, 0.3, 0.4]), np.array([0.5, 0.3, 0.1, 0.1])
    for branching in ((3,),) if sample else ((3,), (2, 2)):  # a sampled (2, 2) tree has too many paths
        law = output_distribution(FixedContextModel(q), TreeDraft(FixedContextModel(p), branching, sample=sample),
                                  [0], len(branching) + 1, len(branching))
        want = np.outer(q, q) if len(branching) == 1 else np.einsum("i,j,k->ijk", q, q, q)
        assert np.abs(law - want).max() < EXACT


def test_merged_multi_draft_tree_is_exact_and_independent_siblings_over_accept():
    from speclib.core.exact import step_distribution

    target, _ = markov_pair(vocab_size=3, draft_noise=0.7, seed=4)
    draft, _ = markov_pair(vocab_size=3, draft_noise=0.0, seed=104)
    assert tv(target, MultiDraft(draft, 2), [0], 2, 3) < EXACT
    assert tv(target, MultiDraft(draft, 3), [2], 1, 2) < EXACT
    wrong = functools.partial(multi_draft_verify, recursive=False)
    assert max(tv(target, MultiDraft(draft, 3), pr, 1, 2, verifier=wrong) for pr in ([0], [1], [2])) > DETECTABLE

    def kept(**options):
        law = step_distribution(target, MultiDraft(draft, 3), [0], 1, **options)
        return sum(prob for (_, n), prob in law.items() if n == 1)

    assert kept(verifier=wrong) > kept() + DETECTABLE  # the faulty rule keeps a draft more often


def test_a_transformer_target_scoring_trees_is_exact():
    """The enumerator replays the loop with the tree pass and the kept branch of the real cache."""
    cfg = TransformerConfig(vocab_size=3, block_size=8, d_model=8, n_layers=1, n_heads=2)
    target = random_transformer(cfg, seed=1)
    draft = random_transformer(cfg, seed=2).with_temperature(0.5)
    prompt = [0, 1, 2, 0, 1]  # 5 + 3 tokens: the last step's tree crosses the window move at 8
    for proposer in (TreeDraft(draft, (2, 2)), MultiDraft(draft, 2)):
        assert tv(target, proposer, prompt, 2, 3) < FLOAT32  # float32 rows: tree and full passes round apart
    wrong = functools.partial(multi_draft_verify, recursive=False)
    assert tv(target, TreeDraft(draft, (2, 2)), prompt, 2, 3, verifier=wrong) > DETECTABLE


def old_multi_draft_step(drafts, p_draft, q_target, choose, *, recursive=True, bonus=True):
    """The rule on m sequences before it took trees (commit c2a3229), as the reference."""
    m, k = drafts.shape
    alive, kept = list(range(m)), []
    for depth in range(k):
        r = q_target[alive[0], depth]
        p = p_draft[alive[0], depth]
        winner = None
        for j in alive:
            x = drafts[j, depth]
            if choose.coin(min(1.0, r[x] / p[x])):
                winner = j
                break
            if recursive:
                r = _residual(p, r)
        if winner is None:
            fix = r if recursive else _residual(p, q_target[alive[0], depth])
            return Verification(np.array(kept + [choose.token(fix)]), depth)
        x = drafts[winner, depth]
        kept.append(int(x))
        alive = [j for j in alive if drafts[j, depth] == x]
    if not bonus:
        return Verification(np.array(kept), k)
    return Verification(np.array(kept + [choose.token(q_target[alive[0], k])]), k)


def test_sequences_verify_exactly_as_before_trees():
    rng = np.random.default_rng(7)
    vocab = 3
    for trial in range(300):
        m, k = int(rng.integers(1, 5)), int(rng.integers(1, 4))
        # rows that depend only on the prefix, as a draft and a target give them
        table_p, table_q = {}, {}

        def row(table, prefix):
            if prefix not in table:
                table[prefix] = rng.dirichlet(np.ones(vocab) * 0.5)
            return table[prefix]

        drafts = np.empty((m, k), dtype=np.int64)
        p = np.empty((m, k, vocab))
        q = np.empty((m, k + 1, vocab))
        for j in range(m):
            for i in range(k):
                p[j, i] = row(table_p, tuple(drafts[j, :i]))
                drafts[j, i] = rng.choice(vocab, p=p[j, i])
                q[j, i] = row(table_q, tuple(drafts[j, :i]))
            q[j, k] = row(table_q, tuple(drafts[j]))
        for recursive in (True, False):
            seed = int(rng.integers(1 << 30))
            a = multi_draft_verify(drafts, p, q, seed, recursive=recursive)
            b = old_multi_draft_step(drafts, p, q, as_chooser(seed), recursive=recursive)
            assert a.tokens.tolist() == b.tokens.tolist() and a.n_accepted == b.n_accepted


def test_tree_and_per_path_targets_write_the_same_text_across_window_moves():
    """Block 16: a 40-token generation crosses several window moves, some inside a tree."""
    target = random_transformer(CFG, seed=5)
    draft = random_transformer(CFG, seed=6)
    for proposer in (lambda: TreeDraft(draft, (2, 2)), lambda: MultiDraft(draft, 2)):
        a, sa = speculative_generate(target, proposer(), [1, 2, 3], 40, k=4, rng=11)
        b, sb = speculative_generate(Uncached(target), proposer(), [1, 2, 3], 40, k=4, rng=11)
        assert a.tolist() == b.tolist() and sa.tokens_per_step == sb.tokens_per_step


def test_a_chain_verifier_refuses_a_tree():
    target, draft = markov_pair(vocab_size=4, seed=0)
    from speclib.core.sampling import verify

    with pytest.raises(TypeError, match="proposes a token tree"):
        speculative_generate(target, TreeDraft(draft, (2,)), [0], 5, k=2, rng=0, verifier=verify)


def test_tree_draft_arguments_are_checked():
    _, draft = markov_pair(vocab_size=4, seed=0)
    with pytest.raises(ValueError, match=r"branching\[1\]: must be >= 1"):
        TreeDraft(draft, (2, 0))
    with pytest.raises(TypeError, match="branching: expected a non-empty tuple"):
        TreeDraft(draft, ())
    with pytest.raises(TypeError, match="sample: expected True or False"):
        TreeDraft(draft, (2,), sample="yes")
    assert TreeDraft(draft, (2, 2)).levels(4) == (2, 2, 1, 1) and TreeDraft(draft, (2, 2)).levels(1) == (2,)


# --- the Hugging Face adapter: a 4-D mask and explicit position ids -----------------------------

try:
    import torch
    import transformers
    from speclib.lm import hf
except ImportError:  # pragma: no cover - the adapter is optional
    hf = None

needs_hf = pytest.mark.skipif(hf is None, reason="needs PyTorch and transformers: pip install -r requirements-hf.txt")


def tiny_gpt2(seed, attention="eager", vocab_size=9):
    torch.manual_seed(seed)
    config = transformers.GPT2Config(vocab_size=vocab_size, n_positions=32, n_embd=16, n_layer=2, n_head=2,
                                     initializer_range=0.2, bos_token_id=None, eos_token_id=None)
    config._attn_implementation = attention
    return transformers.GPT2LMHeadModel(config).eval()


@needs_hf
@pytest.mark.parametrize("attention", ["eager", "sdpa"])
def test_hf_tree_rows_equal_plain_passes_and_the_kept_branch_is_a_plain_cache(attention):
    torch.set_num_threads(1)
    model = hf.HFModel(tiny_gpt2(0, attention))
    rng = np.random.default_rng(8)
    for _ in range(4):
        prefix = rng.integers(0, 9, int(rng.integers(1, 6)))
        tokens, parents = random_tree(rng, int(rng.integers(2, 8)), 9)
        cache = model.cache()
        cache.extend(prefix)
        rows = cache.extend_tree_logits(tokens, parents)
        for node in range(tokens.size):
            want = model.logits(np.concatenate([prefix, tokens[path_to(parents, node)]]))[-1]
            np.testing.assert_allclose(rows[node], want, atol=1e-5)
        node = int(rng.integers(-1, tokens.size))
        cache.accept_tree(node)
        kept = np.concatenate([prefix, tokens[path_to(parents, node)]])
        assert cache.tokens.tolist() == kept.tolist()
        assert cache.past_key_values.get_seq_length() == kept.size
        more = rng.integers(0, 9, 3)
        want = model.logits(np.concatenate([kept, more]))[-3:]
        np.testing.assert_allclose(cache.extend_logits(more), want, atol=1e-5)


@needs_hf
def test_hf_loop_makes_one_target_pass_per_tree_step_or_refuses_and_falls_back(monkeypatch):
    torch.set_num_threads(1)
    net, draft_net = tiny_gpt2(0), tiny_gpt2(1)
    target, draft = hf.HFModel(net), hf.HFModel(draft_net)
    calls = []
    net.register_forward_pre_hook(lambda module, args: calls.append(1))
    run = prepare_run(target, TreeDraft(draft, (3, 1)), [1, 2, 3], 12, 2)
    choose = as_chooser(3)
    while not run.done:
        before = len(calls)
        run.step(choose)
        assert len(calls) - before == 1
    # the same generation through per-path passes writes the same tokens
    a, _ = speculative_generate(target, TreeDraft(draft, (3, 1)), [1, 2, 3], 12, 2, rng=4)
    b, _ = speculative_generate(Uncached(target), TreeDraft(draft, (3, 1)), [1, 2, 3], 12, 2, rng=4)
    assert a.tolist() == b.tolist()
    # a model whose attention takes no custom mask: extend_tree refuses, the loop reads path by path
    monkeypatch.setattr(hf, "TREE_ATTENTION", ("flash_attention_2",))
    cache = target.cache()
    cache.extend([1, 2])
    with pytest.raises(ValueError, match="takes no custom 4-D attention mask"):
        cache.extend_tree([3, 4], [-1, -1])
    run = prepare_run(target, TreeDraft(draft, (3, 1)), [1, 2, 3], 12, 2)
    before = len(calls)
    run.step(choose)
    assert len(calls) - before == 3  # three root-to-leaf paths
    c, _ = speculative_generate(target, TreeDraft(draft, (3, 1)), [1, 2, 3], 12, 2, rng=4)
    assert c.tolist() == a.tolist()


# --- the book's tree step and shape measurements (speclib.book.trees) ----------------------------


def test_node_status_from_the_step_result():
    from speclib.book.trees import KEPT, REJECTED, UNJUDGED, node_status

    tree = token_tree([5, 6, 7, 8, 9], [-1, -1, -1, 1, 1])
    # second root candidate kept, then its first child rejected and its second kept (a leaf): bonus
    assert node_status(tree, Verification(np.array([6, 9, 2]), 2)) == [REJECTED, KEPT, UNJUDGED, REJECTED, KEPT]
    # every root candidate rejected: a correction
    assert node_status(tree, Verification(np.array([1]), 0)) == [REJECTED] * 3 + [UNJUDGED] * 2
    with pytest.raises(ValueError, match="not a child"):
        node_status(tree, Verification(np.array([8, 1]), 1))


def test_a_real_tree_step_is_drawn(model):
    import matplotlib

    matplotlib.use("Agg")
    from speclib.book.trees import KEPT, node_status, plot_tree_step, tree_step

    draft = random_transformer(CFG, seed=9)
    step = tree_step(model, TreeDraft(draft, (3, 2)), [1, 2, 3], 3, rng=0)
    assert step.target_passes == 1 and step.q_rows.shape == (step.tree.size + 1, CFG.vocab_size)
    status = node_status(step.tree, step.verification)
    assert status.count(KEPT) == step.verification.n_accepted
    ax = plot_tree_step(step, label=lambda t: "abcdefghijk"[t])
    shown = {t.get_text() for t in ax.texts}
    assert {repr("abcdefghijk"[int(t)]) for t in step.tree.tokens} <= shown
    assert ("bonus" in shown) != ("correction" in shown)
    with pytest.raises(ValueError, match="no token tree"):
        tree_step(model, draft, [1, 2, 3], 2, rng=0)


def test_measure_shapes_counts_what_the_loop_did(model):
    from speclib.book.trees import Shape, measure_shapes, predicted_speedup

    draft = random_transformer(CFG, seed=9)
    shapes = [Shape("chain", 2, lambda: draft, 2), Shape("tree", 4, lambda: TreeDraft(draft, (2, 1)), 2)]
    t1, out = measure_shapes(model, shapes, [np.array([1, 2, 3]), np.array([4, 5])], 12)
    assert t1 > 0 and [m.label for m in out] == ["chain", "tree"]
    chain, tree = out
    assert 1 <= chain.tokens_per_pass <= 3 and chain.nodes_per_pass <= 2
    assert 1 <= tree.tokens_per_pass <= 3 and 2 <= tree.nodes_per_pass <= 4
    assert all(m.speedup > 0 and m.draft_per_step > 0 for m in out)
    assert predicted_speedup(2.0, 1.0, 1.0) == 1.0


# --- growing a pending tree: a drafter that expands level by level pays for each node once --------


def test_grown_tree_rows_equal_plain_passes_and_keep_like_a_plain_cache(model):
    rng = np.random.default_rng(12)
    for _ in range(5):
        prefix = rng.integers(0, CFG.vocab_size, int(rng.integers(1, 8)))
        tokens, parents = random_tree(rng, 8, CFG.vocab_size)
        split = int(rng.integers(1, 8))
        cache = model.cache(features=True)
        cache.extend(prefix)
        first = cache.extend_tree_logits(tokens[:split], parents[:split])
        before = cache.tokens_computed
        grown = cache.grow_tree_logits(tokens[split:], parents[split:])
        assert cache.tokens_computed - before == tokens.size - split  # the old nodes are not run again
        rows = np.concatenate([first, grown])
        for node in range(tokens.size):
            want = plain_rows(model, prefix, tokens[path_to(parents, node)])[-1]
            np.testing.assert_allclose(rows[node], want, atol=ATOL)
        node = int(rng.integers(-1, tokens.size))
        cache.accept_tree(node)
        plain = model.cache(features=True)
        plain.extend(np.concatenate([prefix, tokens[path_to(parents, node)]]))
        np.testing.assert_allclose(cache.features, plain.features, atol=ATOL)
        more = rng.integers(0, CFG.vocab_size, 4)
        np.testing.assert_allclose(cache.extend_logits(more), plain.extend_logits(more), atol=ATOL)


def test_tree_draft_grows_its_tree_and_proposes_what_a_path_by_path_draft_proposes(model):
    draft = random_transformer(CFG, seed=13)
    text = np.array([3, 1, 4, 1, 5])
    for branching, k in (((2, 2), 3), ((3,), 2)):
        growing, by_paths = TreeDraft(draft, branching, sample=True), TreeDraft(Uncached(draft), branching,
                                                                                 sample=True)
        growing.start(text, CFG.vocab_size)
        by_paths.start(text, CFG.vocab_size)
        a = growing.propose(text, k, None, as_chooser(5), None)
        b = by_paths.propose(text, k, None, as_chooser(5), None)
        assert a.tree.tokens.tolist() == b.tree.tokens.tolist() and a.passes == b.passes == k
        np.testing.assert_allclose(a.rows, b.rows, atol=1e-6)
        # each node but the last level's went through the draft once, after the text
        last_level = int((depths_of(a.tree) == k).sum())
        assert growing.draft.cache.tokens_computed == text.size + a.tree.size - last_level


def depths_of(tree):
    from speclib.core.tree import depths

    return depths(tree.parents)


# --- what a tree pass costs, counted by hand --------------------------------------------------------


def test_a_tree_that_ends_on_the_windows_last_slot_takes_one_pass(model):
    # Block 16: after 12 fed tokens, nodes at depth 1 .. 4 sit at positions 12 .. 15, all in the
    # window [0, 16): one pass over the 6 nodes, nothing else run (path by path, the shared
    # node 0 would run twice).  One level deeper reaches position 16 (the window moves inside
    # the tree): then every root-to-leaf path is fed.
    text = np.arange(12) % CFG.vocab_size
    tokens, parents = np.array([1, 2, 3, 4, 5, 6]), np.array([-1, 0, 1, 2, 0, -1])
    cache = model.cache()
    cache.extend(text)
    before = cache.tokens_computed
    rows = cache.extend_tree_logits(tokens, parents)
    assert cache.tokens_computed - before == tokens.size
    for node in range(tokens.size):
        np.testing.assert_allclose(rows[node], plain_rows(model, text, tokens[path_to(parents, node)])[-1],
                                   atol=ATOL)
    cache.accept_tree(3)
    assert cache.tokens.tolist() == text.tolist() + [1, 2, 3, 4] and cache.tokens_computed - before == 6
    deeper = model.cache()
    deeper.extend(text)
    before = deeper.tokens_computed
    deeper.extend_tree_logits(np.append(tokens, 7), np.append(parents, 3))  # node 6 at position 16
    assert deeper.tokens_computed - before > tokens.size + 1  # path by path (and the window re-read)


@pytest.mark.parametrize("grow", [False, True])
def test_a_tree_larger_than_the_free_slots_is_scored_path_by_path(model, grow):
    # Block 16 gives 32 key slots; after 10 tokens a tree of 33 nodes (11 children of the root,
    # 2 below each) does not fit beside the window, nor does a tree of 20 grown by 13.
    text = np.arange(10) % CFG.vocab_size
    tokens = np.concatenate([np.arange(11), np.tile([0, 1], 11)])
    parents = np.concatenate([np.full(11, -1), np.repeat(np.arange(11), 2)])
    cache = model.cache()
    cache.extend(text)
    if grow:
        split = 20
        first = cache.extend_tree_logits(tokens[:split], parents[:split])
        rows = np.concatenate([first, cache.grow_tree_logits(tokens[split:], parents[split:])])
    else:
        rows = cache.extend_tree_logits(tokens, parents)
    for node in range(tokens.size):
        np.testing.assert_allclose(rows[node], plain_rows(model, text, tokens[path_to(parents, node)])[-1],
                                   atol=ATOL)
    cache.accept_tree(32)  # the last node: token 1 below the root's child 10
    assert cache.tokens.tolist() == text.tolist() + [10, 1]
    np.testing.assert_allclose(cache.extend_logits([3]), plain_rows(model, text, [10, 1, 3])[-1:], atol=ATOL)


def test_path_by_path_scoring_feeds_each_path_once_and_keeps_the_text():
    from speclib.core.tree import score_tree
    from speclib.core.variants import RecurrentModel

    model = RecurrentModel(5, hidden_size=6, seed=0)
    cache = model.cache()
    cache.extend([1, 2, 3])
    text = np.array([1, 2, 3, 4, 0])  # the cache lacks the last two tokens: f = 2
    tree = token_tree([1, 2, 3], [-1, 0, -1])  # two paths: 1 2 and 3
    before = model.positions_computed
    rows = score_tree(cache, text, tree, "target")
    assert model.positions_computed - before == (2 + 2) + (2 + 1)  # each path after the two fed tokens
    assert cache.tokens.tolist() == text.tolist()  # left holding the text, ready for the next step
    for node, path in enumerate(([], [1], [1, 2], [3])):
        np.testing.assert_allclose(rows[node], model(np.concatenate([text, path]).astype(np.int64))[-1])


def test_a_path_by_path_target_holds_the_accepted_text_after_every_step():
    from speclib.core.variants import RecurrentModel

    target = RecurrentModel(5, hidden_size=6, seed=0)
    draft = RecurrentModel(5, hidden_size=6, seed=0, temperature=1.5)
    run = prepare_run(target, TreeDraft(draft, (2, 2)), [1, 2, 3], 30, 3)
    choose = as_chooser(2)
    fed = 0
    while not run.done:
        n, before = run.n, target.positions_computed
        run.step(choose)
        assert len(run.target_cache) == n  # the text before the step; the next pass reads what followed
        fed += target.positions_computed - before
    # every step fed its text (what the cache lacked) below each leaf of a (2, 2, 1) tree: 4 paths of 3
    steps = np.array(run.stats.tokens_per_step)
    lacked = np.concatenate([[3], steps[:-1]])  # the prompt, then what the previous step emitted
    depth = np.array(run.stats.k_per_step)
    assert fed == int((4 * (lacked + depth)).sum())


# --- refusals: a user's cache that scores trees, a node its own row never proposes -------------------


class _UserTreeModel:
    """A user's model whose cache scores trees (the numpy transformer's, behind the user's own class)."""

    def __init__(self, model, fault=None):
        self.model, self.vocab_size, self.fault = model, model.vocab_size, fault

    def __call__(self, tokens):
        return self.model(tokens)

    def cache(self):
        return _UserTreeCache(self.model.cache(), self.fault)


class _UserTreeCache:
    def __init__(self, inner, fault):
        self.inner, self.fault = inner, fault

    def __len__(self):
        return len(self.inner)

    @property
    def tokens(self):
        return self.inner.tokens

    def extend(self, tokens):
        return self.inner.extend(tokens)

    def rollback(self, length):
        self.inner.rollback(length)

    def extend_tree(self, tokens, parents):
        rows = self.inner.extend_tree(tokens, parents)
        if self.fault == "extra row":
            return np.concatenate([rows, rows[-1:]])
        return 0.5 * rows if self.fault == "half rows" else rows

    def accept_tree(self, node):
        self.inner.accept_tree(node)


def test_a_user_caches_tree_rows_are_checked(model):
    draft = random_transformer(CFG, seed=9)
    good, _ = speculative_generate(_UserTreeModel(model), TreeDraft(draft, (2, 2)), [1, 2, 3], 10, 3, rng=0)
    want, _ = speculative_generate(model, TreeDraft(draft, (2, 2)), [1, 2, 3], 10, 3, rng=0)
    assert good.tolist() == want.tolist()  # the control: right rows pass
    with pytest.raises(ValueError, match=r"target: .*2 rows for 1 token|target: .*one row per token"):
        speculative_generate(_UserTreeModel(model, "extra row"), TreeDraft(draft, (2, 2)), [1, 2, 3], 10, 3, rng=0)
    with pytest.raises(ValueError, match="target: .*(sum|distribution)"):
        speculative_generate(_UserTreeModel(model, "half rows"), TreeDraft(draft, (2, 2)), [1, 2, 3], 10, 3, rng=0)


def test_a_node_with_probability_zero_under_its_own_row_is_refused():
    # Node 1 holds token 2, which its row never proposes: min(1, r(x) / p(x)) would divide by zero.
    tree = token_tree([0, 2], [-1, -1])
    p = np.array([[0.5, 0.5, 0.0], [0.5, 0.5, 0.0]])
    q = np.array([[0.0, 0.0, 1.0], [0.2, 0.3, 0.5], [0.2, 0.3, 0.5]])
    with pytest.raises(ValueError, match="p_draft: a node's token has probability 0"):
        multi_draft_verify(tree, p, q, rng=0)
    ok = multi_draft_verify(tree, np.array([[0.5, 0.5, 0.0], [0.0, 0.5, 0.5]]), q, rng=0)
    assert ok.tokens.tolist() == [2, *ok.tokens[1:].tolist()] and ok.n_accepted == 1  # the control


class _UserTreeProposer:
    """A user's proposer that answers every step with the tree ``make(vocab)`` returns."""

    verifier = staticmethod(multi_draft_verify)

    def __init__(self, make):
        self.make = make

    def start(self, prompt, vocab_size):
        self.vocab = vocab_size

    def propose(self, text, k, policy, choose, timings):
        return self.make(self.vocab)

    def accept(self, length):
        pass


def _tree_proposal(tokens, parents, rows, passes=1):
    from speclib.core.proposers import Proposal
    from speclib.core.tree import TokenTree

    tokens, parents = np.array(tokens), np.array(parents)
    return Proposal(tokens, np.asarray(rows, dtype=float), passes, TokenTree(tokens, parents, np.arange(tokens.size)))


@pytest.mark.parametrize("make, message", [
    (lambda v: _tree_proposal([0, 1], [-1, -1], np.eye(v)[[0, 1, 1]]), r"rows of shape \(3, 4\) for tokens of shape \(2,\)"),
    (lambda v: _tree_proposal([0, 1], [-1, -1], np.eye(v)[[0, 2]]), "probability 0 under its own row"),
    (lambda v: _tree_proposal([0, 0], [-1, -1], np.eye(v)[[0, 0]]), "node 1 repeats token 0 below node -1"),
    (lambda v: _tree_proposal([0, 1], [-1, 1], np.eye(v)[[0, 1]]), "node 1 has parent 1"),
    (lambda v: _tree_proposal([0, 1, 2], [-1, 0, 1], np.eye(v)[[0, 1, 2]]), "tree of depth 3; the policy allowed at most 2"),
], ids=["rows", "zero", "siblings", "order", "depth"])
def test_a_user_proposers_malformed_tree_is_refused_naming_it(make, message):
    target, _ = markov_pair(vocab_size=4, seed=0)
    with pytest.raises(ValueError, match=f"proposer _UserTreeProposer: propose\\(\\).*{message}"):
        speculative_generate(target, _UserTreeProposer(make), [0], 5, 2, rng=0)
    good = _UserTreeProposer(lambda v: _tree_proposal([0, 1], [-1, -1], np.eye(v)[[0, 1]]))  # the control
    assert speculative_generate(target, good, [0], 5, 2, rng=0)[0].size == 5
