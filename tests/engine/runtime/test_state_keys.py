"""Stand-ins for keys Python cannot hash (engine/runtime/state_keys.py)."""
from millstream.engine.runtime.state_keys import StateKeys, hashable_key


def test_unhashable_keys_get_equal_hashable_stand_ins_at_any_depth():
    assert hashable_key([1, [2, 3]]) == (1, (2, 3))
    assert hashable_key((1, [2])) == (1, (2,))
    assert hashable_key({1, 2}) == frozenset({1, 2})
    assert hashable_key(bytearray(b"ab")) == b"ab"
    for k in ([1, [2, 3]], (1, [2]), {1, 2}, bytearray(b"ab")):
        hash(hashable_key(k))


def test_hashable_keys_are_kept_and_stand_ins_remember_the_selector_result():
    keys = StateKeys()
    assert keys.of("a") == "a" and keys.of((1, 2)) == (1, 2)
    assert keys.originals == {}  # nothing remembered for keys that need no stand-in
    held = keys.of(["a", 1])
    assert held == ("a", 1)
    assert keys.user_key(held) == ["a", 1] and isinstance(keys.user_key(held), list)
    assert keys.user_key("a") == "a"
