import pytest
import torch

from ltx_core.loader import SDOps
from ltx_core.loader.sd_ops import KeyPattern, KeyRename


def test_nothing_is_selected_without_keep_patterns():
    assert SDOps("empty").rename("a.b") is None


def test_keep_drop_and_prefix_rename():
    ops = SDOps("t").keeping(prefix="model.").dropping(prefix="model.skip.").renaming_prefix("model.")
    assert ops.rename("model.block.weight") == "block.weight"
    assert ops.rename("model.skip.weight") is None
    assert ops.rename("other.weight") is None


def test_prefix_rename_only_touches_the_start():
    ops = SDOps("t").keeping().renaming_prefix("vocoder.")
    assert ops.rename("vocoder.vocoder.conv.weight") == "vocoder.conv.weight"


def test_global_replacement_and_order():
    ops = SDOps("t").keeping().replacing("attn", "attention").renaming_prefix("x.", "y.")
    assert ops.rename("x.attn.q") == "y.attention.q"


def test_pattern_requires_all_parts():
    p = KeyPattern(prefix="a.", suffix=".w", contains="mid")
    assert p.matches("a.mid.w")
    assert not p.matches("a.other.w")
    assert not p.matches("b.mid.w")


def test_rule_sets_are_immutable_values():
    base = SDOps("base").keeping(prefix="a.")
    derived = base.dropping(prefix="a.b.")
    assert base.drop == ()
    assert derived.rename("a.b.c") is None and base.rename("a.b.c") == "a.b.c"
    assert base == SDOps("base").keeping(prefix="a.")
    hash(derived)
    assert KeyRename("a", "b").apply("aa") == "ba"


def test_value_op_can_split_and_drop():
    def split_qkv(key, t):
        q, k, v = t.chunk(3)
        stem = key.removesuffix("qkv.weight")
        return [(stem + "q.weight", q), (stem + "k.weight", k), (stem + "v.weight", v)]

    ops = (
        SDOps("t")
        .keeping()
        .with_value_op(split_qkv, suffix="qkv.weight")
        .with_value_op(lambda k, t: [], suffix=".junk")
    )
    out = ops.apply_value("attn.qkv.weight", torch.arange(6.0).reshape(3, 2))
    assert [k for k, _ in out] == ["attn.q.weight", "attn.k.weight", "attn.v.weight"]
    assert torch.equal(out[2][1], torch.tensor([[4.0, 5.0]]))
    assert ops.apply_value("x.junk", torch.zeros(1)) == []
    kept = ops.apply_value("x.bias", torch.ones(1))
    assert kept[0][0] == "x.bias"


def test_then_concatenates_rules():
    a = SDOps("a").keeping(prefix="p.").renaming_prefix("p.")
    b = SDOps("b").dropping(suffix=".bias")
    both = a.then(b)
    assert both.name == "a+b"
    assert both.rename("p.w") == "w"
    assert both.rename("p.bias") is None


@pytest.mark.parametrize("key", ["", "."])
def test_degenerate_keys_do_not_crash(key):
    assert SDOps("t").keeping(prefix="x").rename(key) is None
